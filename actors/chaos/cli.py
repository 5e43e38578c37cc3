"""``memtrio chaos`` and ``memtrio trace``."""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from ...supervisors.commands import CliError, add_common, load_config
from ...supervisors.config import log_path
from ...supervisors.context import AppRunner
from . import traceview


def cmd_chaos(args: argparse.Namespace, run: AppRunner) -> int:
    from . import runner  # the harness and every scenario: not loaded for other commands

    seed = args.seed if args.seed is not None else random.randrange(1, 1_000_000)
    try:
        runner.select(args.scenario, args.quick)
    except ValueError as exc:
        raise CliError(str(exc), 2) from None
    code, _, _ = runner.main(
        args.scenario,
        seed=seed,
        quick=args.quick,
        keep=_kept_base(args),
        as_json=args.json,
    )
    return code


def _kept_base(args: argparse.Namespace) -> Path | None:
    """Where the servers' homes go (``--home`` or ``--keep``, kept), else None (a temporary one)."""
    if args.home and args.keep and Path(args.home) != Path(args.keep):
        raise CliError("chaos: --home and --keep name the same directory; give one of them", 2)
    chosen = args.home or args.keep
    return Path(chosen).expanduser() if chosen else None


def cmd_trace(args: argparse.Namespace, run: AppRunner) -> int:
    cfg, home = load_config(args)
    path = Path(args.log) if args.log else log_path(cfg, home)
    try:
        text = traceview.render(
            path, trace_id=args.trace_id, last=args.last, slow_ms=args.slow, as_json=args.json
        )
    except traceview.TraceError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"cannot read the trace log {path}: {exc.strerror or exc}") from None
    print(text)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    chaos = sub.add_parser(
        "chaos",
        help="run the fault-injection suite against real server processes and check invariants",
        description=(
            "Start real `memtrio mcp` and `memtrio serve` servers, drive them with MCP clients of its "
            "own (stdio, TCP, HTTP), inject faults (MEMTRIO_FAULTS, kill -9, locks, a full or read-only "
            "disk, malformed traffic, dropped connections, a PostgreSQL store stopped mid-burst) and "
            "check that "
            "every request is answered and no acknowledged write is lost. One line per scenario, then a "
            "summary table; exit 1 if any invariant broke."
        ),
    )
    chaos.add_argument(
        "--quick", action="store_true", help="the short CI set (under 3 minutes on 2 cores)"
    )
    chaos.add_argument(
        "--seed", type=int, help="make the run repeatable (default: random, printed)"
    )
    chaos.add_argument("--scenario", action="append", help="run only this scenario (repeatable)")
    chaos.add_argument(
        "--home",
        metavar="DIR",
        help="create the servers' homes and logs in DIR and keep them (default: a temporary "
        "directory, removed afterwards; your own home is never used)",
    )
    chaos.add_argument("--keep", metavar="DIR", help="the same as --home DIR")
    chaos.add_argument("--json", action="store_true", help="machine-readable results")
    chaos.set_defaults(func=cmd_chaos)

    trace = sub.add_parser(
        "trace",
        help="show requests from the trace log as trees of timed spans",
        description=(
            "Render requests from the structured log ($MEMTRIO_HOME/logs/memtrio.log) as trees of spans "
            "with durations: actor hops, SQL, embedding, ranking."
        ),
    )
    add_common(trace)
    trace.add_argument("trace_id", nargs="?", help="show this trace (a prefix is enough)")
    trace.add_argument("--last", type=int, metavar="N", help="the last N requests (default 5)")
    trace.add_argument(
        "--slow", type=float, metavar="MS", help="list requests slower than MS milliseconds"
    )
    trace.add_argument("--log", help="read this log file instead of the home's")
    trace.add_argument("--json", action="store_true", help="the spans as JSON")
    trace.set_defaults(func=cmd_trace)
