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
import traceback
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import trio

from . import config as config_mod
from . import trace
from .app import (
    VERSION,
    AppContext,
    build_context,
    configure_observability,
    default_features,
    open_app,
)
from .errors import UserError, find_user_error, one_line
from .supervisor import Escalation

# Feature modules that add subcommands; each has register(subparsers).
COMMAND_MODULES: list[str] = [
    "memtrio.actors.store.cli",
    "memtrio.actors.embedder.cli",
    "memtrio.actors.code.cli",
    "memtrio.actors.chaos.cli",
]


class CliError(UserError):
    """A user-facing failure: printed as one line, exit code 1 (or ``code``)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message, code)


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line (and exit code 2)."""

    def error(self, message: str) -> NoReturn:
        command = self.prog.partition(" ")[2]
        where = f"{command}: " if command else ""
        self.exit(2, f"memtrio: {where}{one_line(message)} (see {self.prog} --help)\n")


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--home", help="data directory (default: $MEMTRIO_HOME or ~/.memtrio)")
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


# The command-line flags that set configuration keys, named in error messages.
FLAGS = {("log", "level"): "--log-level", ("tools", "enabled"): "--tools"}


def load_config(
    args: argparse.Namespace, extra: dict[str, dict[str, Any]] | None = None
) -> tuple[config_mod.Config, Path]:
    """The configuration (file < environment < flags) and the home; `ConfigError` if invalid."""
    home = resolve_home(args)
    overrides: dict[str, dict[str, Any]] = {"log": {"level": getattr(args, "log_level", None)}}
    tools = getattr(args, "tools", None)
    if tools:
        overrides["tools"] = {"enabled": tools}
    for section, values in (extra or {}).items():
        overrides.setdefault(section, {}).update(values)
    return config_mod.load(home, overrides=overrides, flags=FLAGS), home


def start(
    args: argparse.Namespace, extra_config: dict[str, dict[str, Any]] | None = None
) -> AppContext:
    """Configuration, home (created private, checked usable), trace log: the app to run.

    Error handling: `ConfigError` (exit 2) or `HomeError` (exit 1), one line each.
    """
    cfg, home = load_config(args, extra_config)
    app = build_context(cfg, home, home_origin=home_origin(args))
    configure_observability(cfg, home)
    return app


def run_with_app(
    args: argparse.Namespace,
    body: Callable[[AppContext], Awaitable[int]],
    features: Sequence[Any] | None = None,
    extra_config: dict[str, dict[str, Any]] | None = None,
) -> int:
    """Start the application tree (no transport), run ``body(app)``, stop the tree.

    The command reports its own errors in one line, so actor warnings go to the
    log file only (unless ``MEMTRIO_LOG_STDERR_LEVEL`` says otherwise).

    Error handling: a `UserError` raised by ``body`` or behind a supervisor's
    escalation (a damaged database, say) is raised as itself, out of the
    exception groups of the tree.
    """
    quiet: dict[str, dict[str, Any]] = (
        {} if os.environ.get("MEMTRIO_LOG_STDERR_LEVEL") else {"log": {"stderr_level": "error"}}
    )
    for section, values in (extra_config or {}).items():
        quiet.setdefault(section, {}).update(values)
    app = start(args, quiet)

    async def main() -> int:
        async with open_app(app, features if features is not None else default_features()):
            return await body(app)

    try:
        return trio.run(main)
    except (Escalation, BaseExceptionGroup) as exc:
        known = find_user_error(exc)
        if known is not None:
            raise known from None
        raise


def cmd_mcp(args: argparse.Namespace) -> int:
    from ..actors.stdio import serve_stdio

    return serve_stdio(start(args), default_features())


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
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
    """Run one command; every failure ends as one line on stderr and an exit code.

    The process umask is ``077`` while the command runs: memtrio creates its
    files private anyway (`private`), this covers whatever else gets created.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    umask = os.umask(0o077)
    try:
        return _run_command(args)
    finally:
        os.umask(umask)


def _run_command(args: argparse.Namespace) -> int:
    try:
        code = args.func(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # Output piped into a closed reader (e.g. `| head`); not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (Exception, BaseExceptionGroup) as exc:  # noqa: BLE001 - every failure: one line
        return report(exc)
    return int(code or 0)


def report(exc: BaseException) -> int:
    """Print ``exc`` as the one line of a failed command; its exit code.

    A `UserError` (behind exception groups and escalations too) is printed as it
    is. Anything else is a bug or an unforeseen environment: its type and
    message, with the traceback in the trace log (or on stderr with
    ``MEMTRIO_LOG_STDERR_LEVEL=debug``).
    """
    known = find_user_error(exc)
    if known is not None:
        print(f"memtrio: {known}", file=sys.stderr)
        return known.code
    if isinstance(exc, BaseExceptionGroup):
        leaf: BaseException = exc
        while isinstance(leaf, BaseExceptionGroup):
            leaf = leaf.exceptions[0]
        if isinstance(leaf, (KeyboardInterrupt, BrokenPipeError)):
            return 130 if isinstance(leaf, KeyboardInterrupt) else 0
        exc = leaf
    details = "".join(traceback.format_exception(exc))
    trace.record("cli", "failed", level="error", error=f"{type(exc).__name__}: {exc}", exc=details)
    if os.environ.get("MEMTRIO_LOG_STDERR_LEVEL") == "debug":
        print(details, end="", file=sys.stderr)
    if isinstance(exc, Escalation):
        print(f"memtrio: {exc}", file=sys.stderr)
        return 1
    if isinstance(exc, UnicodeDecodeError) or (
        isinstance(exc, UnicodeEncodeError) and "surrogates" in exc.reason
    ):
        # Bytes that are not UTF-8 (decoded with surrogateescape) in a file, stdin or argv.
        print(
            f"memtrio: the input is not UTF-8 text (at character {exc.start}); convert it to UTF-8",
            file=sys.stderr,
        )
        return 1
    if isinstance(exc, OSError) and exc.strerror:
        where = f" {exc.filename}" if exc.filename else ""
        print(f"memtrio: cannot use{where}: {exc.strerror}", file=sys.stderr)
        return 1
    where = (
        f"the traceback is in the trace log {trace.LOG.path}"
        if trace.LOG.enabled("error")
        else "MEMTRIO_LOG_STDERR_LEVEL=debug shows the traceback"
    )
    print(
        f"memtrio: unexpected error: {one_line(f'{type(exc).__name__}: {exc}')} "
        f"({where}; please report it)",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    # Run the importable module's main: subcommand modules raise *its* CliError,
    # which this copy (``__main__``) would not catch.
    from memtrio.supervisors.cli import main as _main

    sys.exit(_main())
