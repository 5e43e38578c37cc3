"""A raw line-level driver of `memtrio mcp`, for what no well-behaved client sends.

``raw_server`` starts the real server as a child process; `RawServer` writes
lines and reads replies one at a time (``send_request`` then ``read``, or
``request`` for both): it is the chaos harness's client (``memtrio.actors.chaos.client``).
`open_pipeline` lets many tasks send requests at once, each reply routed to its caller
by id, every stdout line checked on the way.
`wait_for_event` waits for a line of the server's trace log, the observable
signal that something happened inside the server (a call is in flight, a
restart happened).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
import waits
import zygote
from launch import server_command, server_env
from memtrio.actors.chaos.client import ServerProcess, initialize_params, request_message


def initialize_request(version: str = "2025-11-25", client: str = "raw") -> dict[str, Any]:
    """The ``initialize`` request (id 0) of a client that asks for ``version``."""
    return request_message("initialize", initialize_params(client, version), 0)


INIT = initialize_request()

# How often a wait for a trace event looks at the log again.
POLL_INTERVAL = 0.01


class RawServer(ServerProcess):
    """The chaos client of a ``memtrio mcp`` child, driven step by step by a test
    (`send_request` then `read`; `request` for both), or pipelined in `open_pipeline`."""

    async def initialize(
        self, timeout: float = 30.0, client: str = "raw", rid: int | str | None = 0
    ) -> dict[str, Any]:
        return await super().initialize(timeout, client, rid)

    async def close_stdin(self) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.aclose()

    async def wait(self, timeout: float = 30.0) -> int:
        with trio.fail_after(timeout):
            return await self.process.wait()

    @property
    def pid(self) -> int:
        """The server's own pid (the child of its stand-in when forked: `zygote.pid_of`)."""
        return zygote.pid_of(self.process.pid)

    def kill9(self) -> None:
        """SIGKILL the server itself; a stand-in ends with it (after the child is gone)."""
        server = self.pid
        if server == self.process.pid or self.process.returncode is not None:
            super().kill9()
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(server, signal.SIGKILL)

    def rss_bytes(self) -> int:
        """The server process's resident memory now (Linux ``/proc``)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError(f"no VmRSS in /proc/{self.pid}/status")


@asynccontextmanager
async def raw_server(
    home: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    args: tuple[str, ...] = (),
    preexec: Callable[[], None] | None = None,
    stderr: Path | None = None,
    fork: bool = True,
) -> AsyncIterator[RawServer]:
    """``memtrio mcp`` in ``home`` (stderr appended to ``stderr``, by default
    ``home/server-stderr.txt``); killed on exit.

    Forked by the worker's zygote (`zygote`) unless ``fork`` is False (a test that
    measures the process's memory), ``preexec`` is given (it runs in the process that
    is started), or the attach model is on (its tests follow processes by pid)."""
    env = server_env(home, env)
    stderr_name = stderr or "server-stderr.txt"
    forked = fork and preexec is None and env.get("MEMTRIO_SERVE_ATTACH") == "off"
    command = zygote.command(["mcp", *args]) if forked else server_command(args)
    server = await RawServer.spawn(command, env, home, cwd, stderr_name, preexec)
    try:
        yield server
    finally:
        server.kill9()
        with trio.move_on_after(5):
            await server.process.wait()


def trace_events(home: Path) -> list[dict[str, Any]]:
    path = home / "logs" / "memtrio.log"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def wait_for_event(
    home: Path, event: str, timeout: float = 30.0, **fields: Any
) -> dict[str, Any]:
    """The first trace-log event named ``event`` whose fields include ``fields``.

    Polls the log (written a whole line at a time) until the event is there, so
    the test goes on as soon as the server has done it; fails after ``timeout``.
    """
    path = home / "logs" / "memtrio.log"
    seen = 0
    found: dict[str, Any] = {}

    def logged() -> bool:
        nonlocal seen
        if path.exists():
            text = path.read_bytes()
            end = text.rfind(b"\n") + 1
            for line in text[seen:end].splitlines():
                record = json.loads(line) if line.strip() else {}
                if record.get("event") == event and all(
                    record.get(k) == v for k, v in fields.items()
                ):
                    found.update(record)
                    return True
            seen = end
        return False

    await waits.until(logged, timeout, POLL_INTERVAL)
    return found


# A server whose replies a reader task routes to the requests of many tasks at once.
Pipeline = RawServer


@asynccontextmanager
async def open_pipeline(server: RawServer) -> AsyncIterator[RawServer]:
    """``server`` pipelined until the block ends (its reader task routes each reply to its
    request by id, checking every stdout line on the way), then step by step again."""
    async with trio.open_nursery() as nursery:
        server.read_in(nursery)
        yield server
        nursery.cancel_scope.cancel()
