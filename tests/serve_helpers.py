"""End-to-end helpers for ``memtrio serve``: the real server as a child process, and
line (TCP) and frame (WebSocket) clients that speak raw JSON-RPC to it.

`serve_process` starts ``python -m memtrio.supervisors.cli serve ...`` (or any
subcommand) with an isolated ``MEMTRIO_HOME``, reads the one listening line
from stderr to learn the URL (``--bind 127.0.0.1:0``: any free port) and keeps
draining stderr so the server never blocks on it.
"""

from __future__ import annotations

import json
import re
import ssl
import subprocess
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio
import zygote
from launch import server_env
from memtrio.actors.chaos import client as chaos_client
from memtrio.actors.chaos.netclient import TcpSession
from raw_server import initialize_request
from trio_websocket import WebSocketConnection, open_websocket_url

LISTENING = re.compile(r"memtrio serve: listening on (\S+) \(pid (\d+)\)")
START_TIMEOUT = 30.0
READ_TIMEOUT = 15.0


@dataclass
class Served:
    process: trio.Process
    url: str
    stderr: list[str] = field(default_factory=list)
    pid: int = 0
    """The server's own pid (not its stand-in's: `zygote.pid_of`), taken once it listens."""

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1].split("/", 1)[0])

    async def wait(self, timeout: float = 30.0) -> int:
        with trio.fail_after(timeout):
            return await self.process.wait()

    def stderr_text(self) -> str:
        return "".join(self.stderr)


async def _drain(stream: trio.abc.ReceiveStream, into: list[str], ready: trio.Event) -> None:
    buffer = b""
    while True:
        try:
            chunk = await stream.receive_some(65536)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            chunk = b""
        if not chunk:
            if buffer:
                into.append(buffer.decode(errors="replace"))
            ready.set()
            return
        buffer += chunk
        while b"\n" in buffer:
            line, _, buffer = buffer.partition(b"\n")
            into.append(line.decode(errors="replace") + "\n")
            if LISTENING.search(into[-1]):
                ready.set()


@asynccontextmanager
async def serve_process(
    home: Path,
    args: Sequence[str],
    env: Mapping[str, str] | None = None,
    command: str = "serve",
) -> AsyncIterator[Served]:
    """``memtrio COMMAND ARGS`` running until the block ends (then SIGTERM; killed if stuck).

    Raises AssertionError with the server's stderr if it exits before listening.
    """
    process = await trio.lowlevel.open_process(
        zygote.command([command, *args]),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=server_env(home, env),
        cwd=str(home),
    )
    lines: list[str] = []
    ready = trio.Event()
    try:
        async with trio.open_nursery() as nursery:
            assert process.stderr is not None
            nursery.start_soon(_drain, process.stderr, lines, ready)
            with trio.fail_after(START_TIMEOUT):
                await ready.wait()
            found = next((m for m in map(LISTENING.search, lines) if m), None)
            assert found is not None, f"the server did not start: {''.join(lines)}"
            served = Served(process, found[1], lines, zygote.pid_of(process.pid))
            try:
                yield served
            finally:
                if process.returncode is None:
                    process.terminate()
                with trio.move_on_after(30):
                    await process.wait()
                nursery.cancel_scope.cancel()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def initialize_line(client: str = "net-test") -> dict[str, Any]:
    return initialize_request(client=client)


class Steps(chaos_client.LineClient):
    """What the tests add to the chaos client they drive step by step: an ``initialize``
    that must succeed, and ``tool`` for a call that must get a result."""

    async def initialize(
        self, timeout: float = READ_TIMEOUT, client: str = "net-test", rid: int | str | None = 0
    ) -> dict[str, Any]:
        """``initialize`` (id 0), which must succeed, then ``notifications/initialized``."""
        reply = await super().initialize(timeout, client, rid)
        assert reply["id"] == 0 and "result" in reply, reply
        return reply

    async def tool(self, name: str, **arguments: Any) -> dict[str, Any]:
        """The result of a ``tools/call`` (AssertionError on a JSON-RPC error)."""
        reply = await self.call_tool(name, arguments, timeout=READ_TIMEOUT)
        assert "result" in reply, reply
        result: dict[str, Any] = reply["result"]
        return result


class LineClient(TcpSession, Steps):
    """A raw newline-delimited JSON-RPC client over one TCP connection, driven step by step
    by a test: the chaos harness's TCP session (``memtrio.actors.chaos.netclient``)."""

    def __init__(self, stream: trio.SocketStream) -> None:
        super().__init__(stream, "test")

    async def aclose(self) -> None:
        await self.stream.aclose()


@asynccontextmanager
async def tcp_client(port: int, token: str | None = None) -> AsyncIterator[LineClient]:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    client = LineClient(stream)
    try:
        if token is not None:
            await client.send_bytes(f"Bearer {token}\n".encode())
        yield client
    finally:
        await trio.aclose_forcefully(stream)


class FrameClient(Steps):
    """A raw JSON-RPC client over one WebSocket: the chaos client with one message per text
    frame instead of one per line."""

    def __init__(self, ws: WebSocketConnection) -> None:
        super().__init__()
        self.ws = ws

    async def _write(self, data: bytes) -> None:
        await self.ws.send_message(data.decode().removesuffix("\n"))

    async def read_line(self, timeout: float = READ_TIMEOUT) -> bytes:
        """The next frame (a text frame, without a newline of its own)."""
        with trio.fail_after(timeout):
            frame = await self.ws.get_message()
        assert isinstance(frame, str), f"a binary frame from the server: {frame!r}"
        assert not frame.endswith("\n"), f"a frame with its newline: {frame!r}"
        return frame.encode()


@asynccontextmanager
async def ws_client(
    url: str,
    token: str | None = None,
    subprotocols: Sequence[str] = ("mcp",),
    ssl_context: ssl.SSLContext | None = None,
    headers: Sequence[tuple[str, str]] = (),
) -> AsyncIterator[FrameClient]:
    extra = [(k.encode(), v.encode()) for k, v in headers]
    if token is not None:
        extra.append((b"Authorization", f"Bearer {token}".encode()))
    async with open_websocket_url(
        url, ssl_context=ssl_context, subprotocols=list(subprotocols), extra_headers=extra
    ) as ws:
        yield FrameClient(ws)


def structured(result: dict[str, Any]) -> Any:
    """The structured content of a tool result, else its text JSON-decoded."""
    if result.get("structuredContent") is not None:
        return result["structuredContent"]
    return json.loads(result["content"][0]["text"])
