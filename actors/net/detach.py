"""``memtrio serve --detach`` and ``memtrio serve --stop``: a ``memtrio serve`` started in the
background, which the command waits for until it is ready, and ended by the pid of its
runtime file (the mechanics, shared with the owner a ``memtrio mcp`` child starts, are
``actors.net.spawn``'s).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import trio

from ...supervisors.commands import load_config
from ...supervisors.errors import UserError
from . import runtime, spawn


def serve_detached(args: argparse.Namespace) -> int:
    """``memtrio serve --detach``: start this ``memtrio serve`` in the background, detached
    from the terminal (``actors.net.spawn.detach``: its own session, its log in
    ``logs/serve.log`` of the home), wait until it is ready (it has published its
    runtime file, so ``memtrio mcp`` attaches to it), print where it listens and its
    pid on stderr, and exit 0.

    Error handling: a configuration error exits 2 before anything starts; a server
    that exits before it is ready: its exit code, with the last line it logged
    (``memtrio: memtrio serve did not start: ...``).
    """
    if args.owner:
        raise UserError("--detach and --owner cannot be combined (an owner is always detached)", 2)
    cfg, home = load_config(args)
    running = spawn.published_serve(home)
    if running is not None:
        raise UserError(
            f"a memtrio serve of {home} already runs (pid {running.pid}"
            + (f", {running.url}" if running.url else "")
            + "): memtrio mcp attaches to it; stop it first with memtrio serve --stop"
        )
    argv = list(getattr(args, "argv", ()))
    if argv[:1] == ["serve"]:
        argv = argv[1:]
    argv = [word for word in argv if word != "--detach"]
    process, log_start = spawn.detach(home, Path.cwd(), argv)

    async def wait() -> runtime.Runtime:
        return await spawn.wait_published(home, process, log_start, log=spawn.DETACHED_LOG_FILE)

    try:
        found = trio.run(wait)
    except spawn.OwnerFailed as exc:
        raise UserError(f"memtrio serve did not start: {exc}", exc.code or 1) from None
    where = f"listening on {found.url}" if found.url else "serving its attach endpoint"
    print(
        f"memtrio serve: {where} (pid {found.pid}), detached; its log: "
        f"{spawn.log_path(home, spawn.DETACHED_LOG_FILE)}; stop it with memtrio serve --stop",
        file=sys.stderr,
        flush=True,
    )
    if found.ui:
        print(f"memtrio serve: dashboard at {found.ui}", file=sys.stderr, flush=True)
    return 0


def stop_serve(args: argparse.Namespace) -> int:
    """``memtrio serve --stop``: stop the ``memtrio serve`` of the home (the one its runtime
    file names: detached, an owner, or in another terminal) as SIGTERM does, and wait
    until it has exited; 1 when none runs."""
    cfg, home = load_config(args)
    try:
        pid = spawn.stop_published(home, cfg.server.shutdown_grace)
    except runtime.Untrusted as exc:
        raise UserError(
            f"not stopping anything: {exc}, so someone else may have written it"
        ) from None
    if pid is None:
        raise UserError(
            f"no memtrio serve of {home} runs (none named in {runtime.runtime_path(home)})"
        )
    print(f"memtrio serve: stopped pid {pid}", file=sys.stderr, flush=True)
    return 0
