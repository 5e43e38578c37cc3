"""The ``MEMTRIO_*`` environment variables memtrio reads, and the typos among those set.

The settings (``supervisors.config``: every key of every section as
``MEMTRIO_<SECTION>_<KEY>``, and its `config.ALIASES`) are the one source of
the settings' names; the few other names the code reads are declared in
`OTHER_ENV`. A test (tests/test_newcomer_errors.py) checks every
``MEMTRIO_*`` name in the tree against `known_env_names`, so a new variable
cannot be forgotten here: add it to `OTHER_ENV` (or make it a setting).

Every command warns once about each other ``MEMTRIO_*`` variable set
(`unknown_env`, ``supervisors.cli``), with the closest known name.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

import msgspec

from .config import ALIASES, Config

PREFIX = "MEMTRIO_"
MAX_NAME = 80  # characters of a name shown or compared
MAX_WARNINGS = 20  # unknown names warned about one by one; the rest are counted

# The other MEMTRIO_* variables memtrio reads (not settings): name -> what reads it.
OTHER_ENV: dict[str, str] = {
    "MEMTRIO_HOME": "the data directory (--home)",
    "MEMTRIO_MCP_UI": "memtrio mcp --ui: the owner binds the dashboard",
    "MEMTRIO_FAULTS": "fault points to switch on (supervisors/faults.py)",
    "MEMTRIO_FAULTS_SEED": "the seed of MEMTRIO_FAULTS probabilities",
    "MEMTRIO_TRANSPORT": "the transport of memtrio mcp / serve (--transport)",
    "MEMTRIO_PORT": "the port of memtrio serve",
    "MEMTRIO_AUTH_TOKEN": "the bearer token of memtrio serve (--auth-token)",
    "MEMTRIO_UI": "memtrio serve: also serve the dashboard (--ui)",
    "MEMTRIO_PROGRESS": "off: long jobs show no progress on stderr (supervisors/progress.py)",
    "MEMTRIO_PROGRESS_INTERVAL": "seconds between two progress lines when stderr is not a terminal",
    "MEMTRIO_CHAOS_PG_URL": "memtrio chaos: the PostgreSQL server of the pg scenarios",
    "MEMTRIO_CHAOS_LAUNCHER": "memtrio chaos: the command prefix (JSON list) its mcp servers run by",
    "MEMTRIO_TEST_STORES": "the test suite: the stores to run (sqlite, postgres)",
    "MEMTRIO_TEST_TRANSPORTS": "the test suite: the transports to run (stdio, http, tcp, ws)",
    "MEMTRIO_TEST_TURNS": "the test suite: the locks of its parallel run (tests/turns.py)",
    "MEMTRIO_TEST_ZYGOTE": "the test suite: off starts each memtrio command for real (tests/zygote.py)",
}


def _sections() -> dict[str, type[msgspec.Struct]]:
    """The settings sections of `Config` (its other fields, such as ``invalid``, are not)."""
    defaults = Config()
    return {
        name: type(getattr(defaults, name))
        for name in Config.__struct_fields__
        if isinstance(getattr(defaults, name), msgspec.Struct)
    }


def section_prefixes() -> tuple[str, ...]:
    """``MEMTRIO_<SECTION>_`` of every settings section."""
    return tuple(f"{PREFIX}{section.upper()}_" for section in _sections())


def known_env_names() -> list[str]:
    """Every ``MEMTRIO_*`` variable memtrio reads: each setting as
    ``MEMTRIO_<SECTION>_<KEY>``, the aliases and `OTHER_ENV`, sorted."""
    names = {
        f"{PREFIX}{section.upper()}_{key.upper()}"
        for section, kind in _sections().items()
        for key in kind.__struct_fields__
    }
    names.update(name for name in ALIASES if name.startswith(PREFIX))
    names.update(OTHER_ENV)
    return sorted(names)


def unknown_env(env: Mapping[str, str]) -> list[tuple[str, str | None]]:
    """The ``MEMTRIO_*`` names in ``env`` that memtrio does not read, each with the closest
    known name (None when none is close), in name order.

    A name under a settings section (``MEMTRIO_RETRIEVAL_DAMPNG``) is left out:
    `config.load` refuses it as a configuration error naming the closest key.
    """
    known = known_env_names()
    tails = [name[len(PREFIX) :] for name in known]
    sections = section_prefixes()
    found: list[tuple[str, str | None]] = []
    for name in sorted(env):
        if not name.startswith(PREFIX) or name in known or name.startswith(sections):
            continue
        # Compared without the shared prefix, which would make any name look close; a name
        # far longer than any known one is close to none (and not worth the comparison).
        tail = name[len(PREFIX) :]
        close = (
            difflib.get_close_matches(tail, tails, n=1, cutoff=0.6) if len(tail) <= MAX_NAME else []
        )
        found.append((name, PREFIX + close[0] if close else None))
    return found


def unknown_env_warnings(found: list[tuple[str, str | None]]) -> list[str]:
    """The stderr lines about `unknown_env`'s names: one a name, at most `MAX_WARNINGS`."""
    lines = [unknown_env_warning(name, closest) for name, closest in found[:MAX_WARNINGS]]
    if len(found) > MAX_WARNINGS:
        lines.append(
            f"memtrio: warning: and {len(found) - MAX_WARNINGS} more unknown MEMTRIO_* "
            "environment variables, ignored"
        )
    return lines


def unknown_env_warning(name: str, closest: str | None) -> str:
    """The one stderr line about the unknown environment variable ``name`` (shown printable
    and cut to `MAX_NAME` characters)."""
    hint = f"did you mean {closest}?" if closest else "docs/configuration.md lists the names"
    return f"memtrio: warning: unknown environment variable {shown(name)} is ignored ({hint})"


def shown(name: str) -> str:
    """``name`` as a message may show it: escaped unless printable, at most `MAX_NAME` long."""
    text = name if name.isprintable() else ascii(name)
    return text if len(text) <= MAX_NAME else text[: MAX_NAME - 1] + "…"
