"""The ``memtrio`` command line.

Subcommands come from this module (``mcp``) and from feature modules listed in
`COMMAND_MODULES`; each of those exposes ``register(subparsers)`` that adds its
parsers with ``set_defaults(func=handler)``, where ``handler(args) -> int``.

Errors exit non-zero with one clear line on stderr.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import trio

from . import config as config_mod
from .app import (
    VERSION,
    AppContext,
    build_context,
    configure_observability,
    default_features,
    open_app,
)

# Feature modules that add subcommands; each has register(subparsers).
COMMAND_MODULES: list[str] = [
    "memtrio.actors.store.cli",
    "memtrio.actors.embedder.cli",
    "memtrio.actors.code.cli",
    "memtrio.actors.chaos.cli",
]


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


def run_with_app(
    args: argparse.Namespace,
    body: Callable[[AppContext], Awaitable[int]],
    features: Sequence[Any] | None = None,
    extra_config: dict[str, dict[str, Any]] | None = None,
) -> int:
    """Start the application tree (no transport), run ``body(app)``, stop the tree."""
    cfg, home = load_config(args, extra_config)
    configure_observability(cfg, home)
    app = build_context(cfg, home)

    async def main() -> int:
        async with open_app(app, features if features is not None else default_features()):
            return await body(app)

    try:
        return trio.run(main)
    except* CliError as group:  # raised inside the app's nursery: unwrap it
        leaf: BaseException = group
        while isinstance(leaf, BaseExceptionGroup):
            leaf = leaf.exceptions[0]
        raise leaf from None


def cmd_mcp(args: argparse.Namespace) -> int:
    from ..actors.stdio import serve_stdio

    cfg, home = load_config(args)
    configure_observability(cfg, home)
    app = build_context(cfg, home)
    return serve_stdio(app, default_features())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memtrio",
        description="Local memory and code navigation for coding agents, over MCP.",
    )
    parser.add_argument("--version", action="version", version=f"memtrio {VERSION}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    mcp = sub.add_parser("mcp", help="serve MCP over stdio (what an agent launches)")
    add_common(mcp)
    mcp.add_argument(
        "--tools",
        type=lambda s: [p.strip() for p in s.split(",") if p.strip()],
        help="comma-separated tool groups to advertise (memory, graph-read, graph-write, vectors, code)",
    )
    mcp.set_defaults(func=cmd_mcp)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = args.func(args)
    except CliError as exc:
        print(f"memtrio: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # Output piped into a closed reader (e.g. `| head`); not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return int(code or 0)


if __name__ == "__main__":
    # Run the importable module's main: subcommand modules raise *its* CliError,
    # which this copy (``__main__``) would not catch.
    from memtrio.supervisors.cli import main as _main

    sys.exit(_main())
