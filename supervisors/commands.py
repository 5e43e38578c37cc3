"""What every ``memtrio`` subcommand shares: its common flags, its configuration and its errors.

This is runtime, like ``supervisors.context``: the feature modules that add
subcommands import it, never the CLI entry (``supervisors.cli``). A subcommand
registers ``set_defaults(func=handler)`` where ``handler(args, run) -> int``
and ``run`` is the `AppRunner` the entry hands it, which starts the
application tree for the body of the command.

Errors exit non-zero with one clear line on stderr: raise `CliError`.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import config as config_mod


class CliError(Exception):
    """A user-facing failure: printed as one line, exit code 1 (or ``code``)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--home", help="data directory (default: $MEMTRIO_HOME or ~/.memtrio)")
    parser.add_argument(
        "--log-level", choices=["debug", "info", "warning", "error", "off"], help="trace log level"
    )


def resolve_home(args: argparse.Namespace) -> Path:
    home = getattr(args, "home", None)
    return Path(home).expanduser().resolve() if home else config_mod.default_home()


def load_config(
    args: argparse.Namespace, extra: dict[str, dict[str, Any]] | None = None
) -> tuple[config_mod.Config, Path]:
    """The configuration for ``args`` (config.toml, environment, then flags) and the home.

    Error handling: an invalid configuration raises `CliError` with exit code 2.
    """
    home = resolve_home(args)
    overrides: dict[str, dict[str, Any]] = {"log": {"level": getattr(args, "log_level", None)}}
    tools = getattr(args, "tools", None)
    if tools:
        overrides["tools"] = {"enabled": tools}
    for section, values in (extra or {}).items():
        overrides.setdefault(section, {}).update(values)
    try:
        cfg = config_mod.load(home, overrides=overrides)
    except config_mod.ConfigError as exc:
        raise CliError(f"configuration error: {exc}", 2) from None
    return cfg, home


def emit(args: argparse.Namespace, value: Any, human: Callable[[Any], str]) -> None:
    """Print ``value``: as JSON with ``--json``, else as ``human(value)`` (nothing when empty)."""
    if getattr(args, "json", False):
        print(json.dumps(value, ensure_ascii=False, indent=None if isinstance(value, list) else 2))
    else:
        text = human(value)
        if text:
            print(text)
