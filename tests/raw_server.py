"""A raw line-level driver of `memtrio mcp`, for what no well-behaved client sends.

``raw_server`` starts the real server as a child process; `RawServer` writes
lines and reads replies one at a time (``request`` then ``read``, or ``call``
for both). `Pipeline` sends many requests at once from several tasks and routes
each reply to its caller by id, checking every stdout line on the way.
`wait_for_event` waits for a line of the server's trace log, the observable
signal that something happened inside the server (a call is in flight, a
restart happened).
"""

from __future__ import annotations

import itertools
import json
import subprocess
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
from launch import server_command, server_env
from memtrio.protocol.jsonrpc import read_reply_line


def initialize_request(version: str = "2025-11-25", client: str = "raw") -> dict[str, Any]:
    """The ``initialize`` request (id 0) of a client that asks for ``version``."""
    return {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": client, "version": "1"},
        },
    }


INIT = initialize_request()

# Requests numbered by `RawServer.call` and `Pipeline`: far from the small ids tests pick.
AUTO_IDS_FROM = 1_000_000
# How often a wait for a trace event looks at the log again.
POLL_INTERVAL = 0.01


class RawServer:
    def __init__(self, process: trio.Process, home: Path) -> None:
        self.process = process
        self.home = home
        self._buffer = bytearray()
        self._ids = itertools.count(AUTO_IDS_FROM)

    async def send_bytes(self, data: bytes) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send_all(data)

    async def send(self, obj: Any) -> None:
        await self.send_bytes(json.dumps(obj).encode() + b"\n")

    async def request(self, rid: Any, method: str, params: Any = None) -> None:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        await self.send(msg)

    async def read_line(self, timeout: float = 30.0) -> bytes:
        """The next line of stdout, without its newline (EOFError when stdout closes)."""
        assert self.process.stdout is not None
        with trio.fail_after(timeout):
            while b"\n" not in self._buffer:
                chunk = await self.process.stdout.receive_some(65536)
                if not chunk:
                    raise EOFError(f"server closed stdout; partial: {bytes(self._buffer[:200])!r}")
                self._buffer += chunk
        line, _, rest = bytes(self._buffer).partition(b"\n")
        self._buffer = bytearray(rest)
        return line

    async def read(self, timeout: float = 30.0) -> dict[str, Any]:
        """The next line of stdout, decoded (fails the test on a non-JSON line)."""
        return json.loads(await self.read_line(timeout))

    async def call(self, method: str, params: Any = None, timeout: float = 30.0) -> dict[str, Any]:
        """Send one request (the next automatic id) and return its reply, the next line."""
        rid = next(self._ids)
        await self.request(rid, method, params)
        reply = await self.read(timeout)
        assert reply.get("id") == rid, f"expected the reply to {rid}, got {reply}"
        return reply

    async def call_tool(
        self, name: str, arguments: Any = None, timeout: float = 30.0
    ) -> dict[str, Any]:
        """The raw reply to ``tools/call`` (a JSON-RPC error or a CallToolResult)."""
        return await self.call(
            "tools/call", {"name": name, "arguments": arguments or {}}, timeout=timeout
        )

    async def initialize(self) -> dict[str, Any]:
        await self.send(INIT)
        reply = await self.read()
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return reply

    async def close_stdin(self) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.aclose()

    async def wait(self, timeout: float = 30.0) -> int:
        with trio.fail_after(timeout):
            return await self.process.wait()

    async def close(self, timeout: float = 30.0) -> int:
        """A clean EOF, then the exit code."""
        await self.close_stdin()
        return await self.wait(timeout)

    async def rest_of_stdout(self, timeout: float = 30.0) -> bytes:
        assert self.process.stdout is not None
        out = bytearray(self._buffer)
        with trio.fail_after(timeout):
            while chunk := await self.process.stdout.receive_some(65536):
                out += chunk
        return bytes(out)

    def rss_bytes(self) -> int:
        """The server process's resident memory now (Linux ``/proc``)."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError(f"no VmRSS in /proc/{self.process.pid}/status")


@asynccontextmanager
async def raw_server(
    home: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    args: tuple[str, ...] = (),
    preexec: Callable[[], None] | None = None,
) -> AsyncIterator[RawServer]:
    """``memtrio mcp`` in ``home`` (stderr appended to ``home/server-stderr.txt``); killed on exit."""
    errlog = open(home / "server-stderr.txt", "ab")  # noqa: SIM115 - closed below
    process = await trio.lowlevel.open_process(
        server_command(args),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errlog,
        env=server_env(home, env),
        cwd=str(cwd or home),
        preexec_fn=preexec,
    )
    try:
        yield RawServer(process, home)
    finally:
        if process.returncode is None:
            process.kill()
            with trio.move_on_after(5):
                await process.wait()
        errlog.close()


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
    with trio.fail_after(timeout):
        while True:
            if path.exists():
                text = path.read_bytes()
                end = text.rfind(b"\n") + 1
                for line in text[seen:end].splitlines():
                    record = json.loads(line) if line.strip() else {}
                    if record.get("event") == event and all(
                        record.get(k) == v for k, v in fields.items()
                    ):
                        return record
                seen = end
            await trio.sleep(POLL_INTERVAL)


class Pipeline:
    """Concurrent requests over one server's stdio.

    Any number of tasks call ``request`` at once; a reader task routes each
    reply to its caller by id. Every stdout line is checked: one well-formed
    JSON-RPC object answering a request that is waiting. What is not is kept
    in ``violations``.
    """

    def __init__(self, server: RawServer) -> None:
        self.server = server
        self.violations: list[str] = []
        self.replies = 0
        self._waiting: dict[int, trio.MemorySendChannel[dict[str, Any]]] = {}
        self._ids = itertools.count(AUTO_IDS_FROM)
        self._send_lock = trio.Lock()

    async def request(
        self, method: str, params: Any = None, timeout: float = 60.0
    ) -> dict[str, Any]:
        rid = next(self._ids)
        send, receive = trio.open_memory_channel[dict[str, Any]](1)
        self._waiting[rid] = send
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        try:
            async with self._send_lock:
                await self.server.send(msg)
            with trio.fail_after(timeout):
                return await receive.receive()
        finally:
            self._waiting.pop(rid, None)

    async def call_tool(
        self, name: str, arguments: Any = None, timeout: float = 60.0
    ) -> dict[str, Any]:
        return await self.request(
            "tools/call", {"name": name, "arguments": arguments or {}}, timeout=timeout
        )

    async def read_replies(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Route replies until stdout closes."""
        task_status.started()
        while True:
            try:
                line = await self.server.read_line(timeout=float("inf"))
            except EOFError:
                return
            obj, why = read_reply_line(line)
            if obj is None:
                self.violations.append(str(why))
                continue
            if "method" in obj:
                continue  # a server notification
            waiter = self._waiting.pop(obj["id"], None) if isinstance(obj["id"], int) else None
            if waiter is None:
                self.violations.append(f"reply to no waiting request: {line[:120]!r}")
                continue
            self.replies += 1
            waiter.send_nowait(obj)


@asynccontextmanager
async def open_pipeline(server: RawServer) -> AsyncIterator[Pipeline]:
    """A `Pipeline` over ``server`` whose reader runs until the block ends."""
    pipeline = Pipeline(server)
    async with trio.open_nursery() as nursery:
        await nursery.start(pipeline.read_replies)
        yield pipeline
        nursery.cancel_scope.cancel()
