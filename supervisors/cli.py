"""The ``memtrio`` command line.

This is the CLI entry, part of the composition root: it may import ``actors``.
Subcommands come from this module (``mcp``) and from feature modules listed in
`COMMAND_MODULES`; each of those exposes ``register(subparsers)`` that adds its
parsers with ``set_defaults(func=handler)``, where ``handler(args, run) -> int``
and ``run`` is `run_with_app` (an `AppRunner`, see ``supervisors.context``).

Errors exit non-zero with one clear line on stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any

import trio

from ..actors import stdio
from ..actors.chaos import cli as chaos_cli
from ..actors.code import cli as code_cli
from ..actors.embedder import cli as embedder_cli
from ..actors.store import cli as store_cli
from .app import build_context, configure_observability, default_features, open_app, serve
from .commands import CliError, add_common, load_config
from .context import VERSION, AppContext, AppRunner
from .supervisor import first_leaf

# Feature modules that add subcommands; each has register(subparsers).
COMMAND_MODULES = (store_cli, embedder_cli, code_cli, chaos_cli)


def run_with_app(
    args: argparse.Namespace,
    body: Callable[[AppContext], Awaitable[int]],
    *,
    features: Collection[str] | None = None,
    extra_config: dict[str, dict[str, Any]] | None = None,
) -> int:
    """Start the application tree (no transport), run ``body(app)``, stop the tree.

    ``features`` names the features to start (default: all of them). This is the
    `AppRunner` every subcommand is handed.
    """
    cfg, home = load_config(args, extra_config)
    configure_observability(cfg, home)
    app = build_context(cfg, home)
    chosen = [f for f in default_features() if features is None or f.name in features]

    async def main() -> int:
        async with open_app(app, chosen):
            return await body(app)

    try:
        return trio.run(main)
    except* CliError as group:  # raised inside the app's nursery: unwrap it
        raise first_leaf(group) from None


def cmd_mcp(args: argparse.Namespace, run: AppRunner) -> int:
    """Serve MCP over stdio (``run`` is unused: the transport is the root's last child)."""
    cfg, home = load_config(args)
    configure_observability(cfg, home)
    app = build_context(cfg, home)
    proto_in, proto_out = stdio.protect_stdout()
    return serve(
        app,
        default_features(),
        lambda: stdio.stdio_transport(app, proto_in, proto_out),
        name="stdio",
    )


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
    for module in COMMAND_MODULES:
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = args.func(args, run_with_app)
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
