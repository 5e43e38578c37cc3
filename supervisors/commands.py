"""What every ``memtrio`` subcommand shares: its common flags, its configuration and its errors.

This is runtime, like ``supervisors.context``: the feature modules that add
subcommands import it, never the CLI entry (``supervisors.cli``). A subcommand
registers ``set_defaults(func=handler)`` where ``handler(args, run) -> int``
and ``run`` is the `AppRunner` the entry hands it, which starts the
application tree for the body of the command.

Errors exit non-zero with one clear line on stderr: raise `CliError` (or any
`UserError`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import msgspec

from . import config as config_mod
from .errors import UserError, one_line


class CliError(UserError):
    """A user-facing failure: printed as one line, exit code 1 (or ``code``)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message, code)


# Tool wording -> command-line wording, for tool errors a command passes on: the
# tools' argument names become the flags that set them (`scopes` -> `--scope`),
# the tools' names the commands that do the same (list_scopes -> memtrio scopes).
TOOL_FLAGS = {
    "scopes": "--scope",
    "memory_type": "--type",
    "importance": "--importance",
    "entities": "--entity",
    "relations": "--relation",
    "max_depth": "--depth",
    "direction": "--direction",
    "limit": "--limit",
    "use_embeddings": "--lexical",
    "root": "--root",
}
TOOL_PHRASES = (
    ("pass its scope in `scopes`; see list_scopes", "pass `--scope SCOPE`; see `memtrio scopes`"),
    ("`list_scopes`", "`memtrio scopes`"),
    ("list_scopes", "`memtrio scopes`"),
    ("the server's directory", "the current directory"),
    ("pass root as an absolute directory inside one", "run it inside one or pass `--root DIR`"),
    ("restart memtrio in that repository", "run memtrio in that repository"),
    ("point root at", "point `--root` at"),
    ("review_stale lists", "memtrio stale lists"),
    ("memories of the session's repository", "memories of the current directory's repository"),
    ("open the session in a Git checkout", "run it inside a Git checkout"),
    ("this session has none", "the current directory is in none"),
)
_TOOL_ARG = re.compile(r"`(?:\$\.)?(\w+)((?:\[\d+\])?)`")
_ROOT_VALUE = re.compile(r"(?<![\w-])root (?=')")


def cli_words(message: str) -> str:
    """A tool's error ``message`` in the words of the command line (its flags and commands).

    The MCP tools keep their wording; a CLI command passes their errors through this.
    """
    for tool, cli in TOOL_PHRASES:
        message = message.replace(tool, cli)
    message = _ROOT_VALUE.sub("--root ", message)
    return _TOOL_ARG.sub(lambda m: f"`{TOOL_FLAGS[m[1]]}`" if m[1] in TOOL_FLAGS else m[0], message)


def cli_flag(path: str) -> str:
    """The flag that sets a tool argument (``direction`` -> ``--direction``); the path as
    it is when no flag does."""
    flag = TOOL_FLAGS.get(re.split(r"[.\[]", path, maxsplit=1)[0])
    return f"`{flag}`" if flag else path


def as_sentence(line: str) -> str:
    """A command's help line as the description of its own ``--help``: capitalised, ended."""
    line = line.strip()
    if not line:
        return line
    return line[0].upper() + line[1:] + ("" if line[-1] in ".!?)" else ".")


class SubParsers(argparse._SubParsersAction):  # argparse's own class, subclassed
    """Subcommands whose ``--help`` opens with a description: the help line of the
    command list, as a sentence, unless the command gives its own."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        if kwargs.get("description") is None and kwargs.get("help"):
            kwargs["description"] = as_sentence(kwargs["help"])
        return super().add_parser(name, **kwargs)


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line (and exit code 2), and every subcommand's
    ``--help`` opening with a description (`SubParsers`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", "parsers", SubParsers)

    def error(self, message: str) -> NoReturn:
        command = self.prog.partition(" ")[2]
        where = f"{command}: " if command else ""
        self.exit(2, f"memtrio: {where}{one_line(message)} (see {self.prog} --help)\n")


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--home", help="data directory (default: $MEMTRIO_HOME or ~/.memtrio)")
    parser.add_argument(
        "--store",
        metavar="URL",
        help="the memory store: sqlite (the file in the home, default) or postgresql://user@host/db",
    )
    parser.add_argument(
        "--memory-file",
        "-f",
        metavar="PATH",
        help="the store's SQLite file (default: memtrio.sqlite in the home; env MEMTRIO_STORE_FILE, "
        "or the reference's MEMORY_FILE_PATH)",
    )
    parser.add_argument(
        "--log-level", choices=["debug", "info", "warning", "error", "off"], help="trace log level"
    )


def resolve_home(args: argparse.Namespace) -> Path:
    """The home: ``--home``, else ``$MEMTRIO_HOME``, else ``~/.memtrio`` (absolute, links kept)."""
    home = getattr(args, "home", None)
    return Path(os.path.abspath(Path(home).expanduser())) if home else config_mod.default_home()


def home_origin(args: argparse.Namespace) -> str:
    """Where the home's path came from, for messages."""
    if getattr(args, "home", None):
        return "--home"
    return "MEMTRIO_HOME" if os.environ.get("MEMTRIO_HOME") else ""


# The ``[vectors]`` flags of ``memtrio mcp`` and ``memtrio serve``: flag -> (key, metavar, help).
VECTOR_FLAGS: dict[str, tuple[str, str, str]] = {
    "--embedding-dims": ("dims", "N", "dimensions of bring-your-own vectors, 1-4096 (default 384)"),
    "--vec-backend": (
        "backend",
        "B",
        "vector index: hnsw, auto, exact or ivf (default hnsw: exact below 10,000 vectors)",
    ),
    "--vec-exact-below": (
        "exact_below",
        "N",
        "hnsw: indexes of fewer vectors are searched exactly, 0 = never (default 10000)",
    ),
    "--vec-metric": ("metric", "M", "the vector tools' metric: cos, ip or l2sq (default cos)"),
    "--vec-quantization": (
        "quantization",
        "Q",
        "hnsw stored scalars: f32, f16, bf16 or i8 (default f32)",
    ),
    "--vec-connectivity": ("connectivity", "M", "hnsw graph degree (default 16)"),
    "--vec-expansion-add": ("expansion_add", "N", "hnsw efConstruction (default 200)"),
    "--vec-expansion-search": (
        "expansion_search",
        "N",
        "hnsw efSearch (default 128; the reference's 50 loses recall@10: docs/vectors.md)",
    ),
    "--ivf-nlist": ("ivf_nlist", "N", "ivf cells (default 256)"),
    "--ivf-nprobe": ("ivf_nprobe", "N", "ivf cells probed per query (default 8)"),
}

SECRETS_HELP = (
    "credentials in what is written: refuse the write, redact them to a [REDACTED:kind] "
    "marker with a warning (default), or allow them ([store] secrets, MEMTRIO_SECRETS)"
)

# The ``[store]`` flags of ``memtrio mcp`` and ``memtrio serve`` (the reference's names).
STORE_FLAGS: dict[str, tuple[str, str, str]] = {
    "--cache-size-mb": ("cache_size_mb", "MB", "SQLite page cache per connection (default 8)"),
    "--mmap-size": ("mmap_size_mb", "MB", "memory-mapped I/O per connection, 0 = off (default 0)"),
    "--busy-timeout-ms": (
        "busy_timeout_ms",
        "MS",
        "how long a write waits for another process's lock (default 30000)",
    ),
    "--wal-flush-ms": (
        "wal_flush_ms",
        "MS",
        "durability async: WAL checkpoint period, the power-loss window (default 250)",
    ),
    "--secrets": ("secrets", "MODE", SECRETS_HELP),
}


def _metavar(hint: object) -> str:
    return "on|off" if hint is bool else "N" if hint is int else "X"


# The ranking flags of ``memtrio mcp``, ``serve`` and ``search`` (the reference's): one per
# ``[retrieval]`` key, and ``--embedding-batch-size``. Their environment variables win over
# them (file < flag < environment): flag -> (section, key, metavar).
RANKING_FLAGS: dict[str, tuple[str, str, str]] = {
    "--embedding-batch-size": ("embedding", "batch_size", "N"),
    **{
        f"--retrieval-{f.name.replace('_', '-')}": ("retrieval", f.name, _metavar(f.type))
        for f in msgspec.structs.fields(config_mod.RetrievalConfig)
    },
}


def add_ranking_options(parser: argparse.ArgumentParser) -> None:
    """`RANKING_FLAGS` (docs/configuration.md): each overrides config.toml, and its
    ``MEMTRIO_*`` variable overrides it."""
    defaults = {
        "embedding": config_mod.EmbeddingConfig(),
        "retrieval": config_mod.RetrievalConfig(),
    }
    for flag, (section, key, metavar) in RANKING_FLAGS.items():
        default = getattr(defaults[section], key)
        shown = ("on" if default else "off") if isinstance(default, bool) else default
        parser.add_argument(
            flag,
            dest=f"{section}_{key}",
            metavar=metavar,
            help=f"[{section}] {key} (default {shown}; MEMTRIO_{section.upper()}_{key.upper()} wins)",
        )


def ranking_overrides(args: argparse.Namespace) -> dict[str, dict[str, str]]:
    """The `RANKING_FLAGS` given (as text; `config.load` converts and checks them)."""
    given: dict[str, dict[str, str]] = {}
    for section, key, _ in RANKING_FLAGS.values():
        value = getattr(args, f"{section}_{key}", None)
        if value is not None:
            given.setdefault(section, {})[key] = value
    return given


# The command-line flags that set configuration keys, named in error messages.
FLAGS = {
    ("log", "level"): "--log-level",
    ("tools", "enabled"): "--tools",
    ("store", "url"): "--store",
    ("store", "file"): "--memory-file",
    **{(section, key): flag for flag, (section, key, _) in RANKING_FLAGS.items()},
    ("vectors", "enabled"): "--vectors",
    ("serve", "strict_permissions"): "--strict-permissions",
    **{("vectors", key): flag for flag, (key, _, _) in VECTOR_FLAGS.items()},
    **{("store", key): flag for flag, (key, _, _) in STORE_FLAGS.items()},
}


def add_vector_options(parser: argparse.ArgumentParser) -> None:
    """The ``[vectors]`` flags (docs/configuration.md) of the serving commands."""
    parser.add_argument(
        "--vectors",
        action="store_const",
        const="on",
        help="advertise and serve the vector tools ([vectors] enabled)",
    )
    for flag, (key, metavar, text) in VECTOR_FLAGS.items():
        names = [flag, "--vec-index"] if flag == "--vec-backend" else [flag]
        parser.add_argument(*names, dest=f"vectors_{key}", metavar=metavar, help=text)


def add_store_options(parser: argparse.ArgumentParser) -> None:
    """The ``[store]`` flags (docs/configuration.md) of the serving commands."""
    for flag, (key, metavar, text) in STORE_FLAGS.items():
        parser.add_argument(flag, dest=f"store_{key}", metavar=metavar, help=text)


def add_secrets_option(parser: argparse.ArgumentParser) -> None:
    """``--secrets``, of the commands that write what a user gives (remember, import, ...)."""
    parser.add_argument(
        "--secrets", dest="store_secrets", choices=["refuse", "redact", "allow"], help=SECRETS_HELP
    )


def store_overrides(args: argparse.Namespace) -> dict[str, str]:
    """The ``[store]`` keys given as flags (as text; `config.load` converts and checks)."""
    given = {key: getattr(args, f"store_{key}", None) for key, _, _ in STORE_FLAGS.values()}
    return {key: value for key, value in given.items() if value is not None}


def vector_overrides(args: argparse.Namespace) -> dict[str, str]:
    """The ``[vectors]`` keys given as flags (as text; `config.load` converts and checks)."""
    given = {"enabled": getattr(args, "vectors", None)}
    for key, _, _ in VECTOR_FLAGS.values():
        given[key] = getattr(args, f"vectors_{key}", None)
    return {key: value for key, value in given.items() if value is not None}


def load_config(
    args: argparse.Namespace, extra: dict[str, dict[str, Any]] | None = None
) -> tuple[config_mod.Config, Path]:
    """The configuration (file < environment < flags) and the home; `ConfigError` if invalid."""
    home = resolve_home(args)
    overrides: dict[str, dict[str, Any]] = {"log": {"level": getattr(args, "log_level", None)}}
    tools = getattr(args, "tools", None)
    if tools:
        overrides["tools"] = {"enabled": tools}
    store = store_overrides(args)
    if getattr(args, "store", None):
        store["url"] = args.store
    if getattr(args, "memory_file", None):
        store["file"] = args.memory_file
    if store:
        overrides["store"] = store
    vectors = vector_overrides(args)
    if vectors:
        overrides["vectors"] = vectors
    if getattr(args, "strict_permissions", False):
        overrides["serve"] = {"strict_permissions": True}
    for section, values in (extra or {}).items():
        overrides.setdefault(section, {}).update(values)
    return config_mod.load(
        home, overrides=overrides, flags=FLAGS, under_env=ranking_overrides(args)
    ), home


def emit(args: argparse.Namespace, value: object, human: Callable[[Any], str]) -> None:
    """Print ``value``: as JSON with ``--json``, else as ``human(value)`` (nothing when empty).

    A tool's result struct is printed as its tools see it (`msgspec.to_builtins`:
    ISO 8601 times, absent optional fields left out); ``human`` gets the same.
    """
    if isinstance(value, msgspec.Struct):
        value = msgspec.to_builtins(value)
    if getattr(args, "json", False):
        print(json.dumps(value, ensure_ascii=False, indent=None if isinstance(value, list) else 2))
    else:
        text = human(value)
        if text:
            print(text)
