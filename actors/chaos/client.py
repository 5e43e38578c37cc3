"""A line-level MCP client of a real ``memtrio mcp`` child process (and of any line-framed
stream: `LineClient`, which the TCP client of ``netclient`` shares).

The chaos harness needs what a polite client never does: pipelined requests,
raw bytes, duplicate ids, a ``kill -9`` in the middle of a burst. So it speaks
JSON-RPC over the child's stdin/stdout itself, and checks every line the
server writes: each must be one well-formed JSON-RPC 2.0 object (stdout
belongs to the protocol), and each response must answer a request that was
sent and not answered yet.

Error handling: protocol violations are recorded in ``violations`` (the
scenario reports them), never raised; a request whose reply does not come in
time raises `NoReply`; a server that exits fails its pending requests with
`ServerGone`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import trio

from ...protocol.jsonrpc import read_reply_line

PROTOCOL_VERSION = "2025-11-25"
# The id of a request this client sends (JSON-RPC also allows null in a reply).
RequestId = int | str
# A JSON-RPC reply object as decoded: its members are whatever the server wrote.
Reply = dict[str, Any]
# Variables passed through to the server; everything else is set explicitly.
ENV_PASSTHROUGH = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
    "PYTHONPATH",
    "TMPDIR",
)


class ServerGone(Exception):
    """The server process exited (or closed stdout) before replying."""


class NoReply(Exception):
    """No reply arrived within the timeout."""


def server_command() -> list[str]:
    return [sys.executable, "-m", "memtrio.supervisors.cli", "mcp"]


def server_env(home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: os.environ[k] for k in ENV_PASSTHROUGH if k in os.environ}
    env.update(
        {
            "MEMTRIO_HOME": str(home),
            "MEMTRIO_EMBEDDINGS": "off",
            "MEMTRIO_CODE": "off",
            # Each memtrio mcp serves embedded, in its own process; the scenarios of the
            # attach model (actors/chaos/scenarios/transports.py) turn attach on.
            "MEMTRIO_SERVE_ATTACH": "off",
            "PYTHONUNBUFFERED": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    )
    env.update(extra or {})
    return env


class Caller(Protocol):
    """What the load drivers need of a client: a ``memtrio mcp`` child, a TCP or an HTTP session."""

    @property
    def gone(self) -> bool: ...

    async def request(
        self,
        method: str,
        params: object = None,
        *,
        rid: RequestId | None = None,
        timeout: float = 30.0,
    ) -> Reply: ...

    async def call_tool(self, name: str, arguments: object, *, timeout: float = 60.0) -> Reply: ...


@dataclass
class Stats:
    sent: int = 0  # lines written to the server
    replies: int = 0  # responses read
    errors: int = 0  # JSON-RPC error responses
    tool_errors: int = 0  # tools/call results with isError
    orphans: list[RequestId | None] = field(default_factory=list)  # responses nobody waits for


class LineClient:
    """JSON-RPC 2.0 over one line-framed byte stream, pipelined: each request waits for its
    own reply by id.

    Subclasses say how bytes go out (`_write`) and run `_read_lines` on what comes
    in. Every line received is checked (one well-formed JSON-RPC object) and every
    response must answer a request sent and not answered yet: anything else is a
    violation, recorded, never raised.
    """

    def __init__(self) -> None:
        self.stats = Stats()
        self.violations: list[str] = []
        self._waiting: dict[RequestId, trio.MemorySendChannel[Reply]] = {}
        self._unmatched: list[Reply] = []  # replies with id null or unknown
        self._gone = trio.Event()
        self._next_id = 1_000_000
        self._send_lock = trio.Lock()

    async def _write(self, data: bytes) -> None:
        """Send ``data`` to the peer (raises a trio or OS error when it cannot)."""
        raise NotImplementedError

    # -- sending -----------------------------------------------------------

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    async def send_bytes(self, data: bytes) -> None:
        async with self._send_lock:
            try:
                await self._write(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                raise ServerGone(f"cannot write to the server: {exc}") from None
        self.stats.sent += data.count(b"\n") or 1

    async def send(self, obj: object) -> None:
        await self.send_bytes(json.dumps(obj).encode() + b"\n")

    def expect(self, rid: RequestId) -> trio.MemoryReceiveChannel[Reply]:
        """Register interest in the reply to ``rid`` before sending it."""
        send, receive = trio.open_memory_channel[Reply](8)
        self._waiting[rid] = send
        return receive

    def forget(self, rid: RequestId) -> None:
        """Stop waiting for the reply to ``rid`` (a later one counts as unmatched)."""
        self._waiting.pop(rid, None)

    async def wait_reply(
        self, rid: RequestId, receive: trio.MemoryReceiveChannel[Reply], timeout: float
    ) -> Reply:
        try:
            with trio.move_on_after(timeout):
                async with trio.open_nursery() as nursery:
                    result: list[Reply] = []

                    async def get() -> None:
                        result.append(await receive.receive())
                        nursery.cancel_scope.cancel()

                    async def gone() -> None:
                        await self._gone.wait()
                        await trio.sleep(0.05)  # let the reader deliver what it read last
                        nursery.cancel_scope.cancel()

                    nursery.start_soon(get)
                    nursery.start_soon(gone)
                if result:
                    return result[0]
                raise ServerGone(f"the server exited before answering request {rid!r}")
            raise NoReply(f"no reply to request {rid!r} within {timeout:g} s")
        finally:
            self.forget(rid)

    async def request(
        self,
        method: str,
        params: object = None,
        *,
        rid: RequestId | None = None,
        timeout: float = 30.0,
    ) -> Reply:
        """Send one request and return its response object."""
        rid = self.new_id() if rid is None else rid
        msg: dict[str, object] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        receive = self.expect(rid)
        try:
            await self.send(msg)
        except ServerGone:
            self.forget(rid)
            raise
        return await self.wait_reply(rid, receive, timeout)

    async def notify(self, method: str, params: object = None) -> None:
        msg: dict[str, object] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        await self.send(msg)

    async def initialize(self, timeout: float = 60.0) -> Reply:
        reply = await self.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "memtrio-chaos", "version": "1"},
            },
            timeout=timeout,
        )
        await self.notify("notifications/initialized")
        return reply

    async def call_tool(self, name: str, arguments: object, *, timeout: float = 60.0) -> Reply:
        """The raw response of ``tools/call`` (a JSON-RPC error or a CallToolResult)."""
        reply = await self.request(
            "tools/call", {"name": name, "arguments": arguments}, timeout=timeout
        )
        if (
            "result" in reply
            and isinstance(reply["result"], dict)
            and reply["result"].get("isError")
        ):
            self.stats.tool_errors += 1
        return reply

    async def tools(self) -> list[dict[str, Any]]:
        reply = await self.request("tools/list")
        return list(reply["result"]["tools"])

    def take_unmatched(self) -> list[Reply]:
        out, self._unmatched = self._unmatched, []
        return out

    # -- reading -----------------------------------------------------------

    async def _read_lines(self, stream: trio.abc.ReceiveStream) -> None:
        """Read ``stream`` until EOF, routing each response to its waiter."""
        buffer = bytearray()
        try:
            while True:
                try:
                    chunk = await stream.receive_some(65536)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    chunk = b""
                if not chunk:
                    if buffer.strip():
                        self.violations.append(
                            f"the stream ended inside a line: {bytes(buffer[:80])!r}"
                        )
                    return
                buffer += chunk
                while (nl := buffer.find(b"\n")) >= 0:
                    line = bytes(buffer[:nl])
                    del buffer[: nl + 1]
                    self._route(line)
        finally:
            self._gone.set()

    def _route(self, line: bytes) -> None:
        obj, why = read_reply_line(line)
        if obj is None:
            self.violations.append(str(why))
            return
        if "method" in obj:
            return  # a server notification (logging, progress)
        self.stats.replies += 1
        if "error" in obj:
            self.stats.errors += 1
        rid = obj["id"]
        waiter = self._waiting.pop(rid, None) if isinstance(rid, (int, str)) else None
        if waiter is None:
            self._unmatched.append(obj)
            self.stats.orphans.append(rid)
            return
        try:
            waiter.send_nowait(obj)
        except (trio.WouldBlock, trio.BrokenResourceError):
            pass

    @property
    def gone(self) -> bool:
        return self._gone.is_set()


class ServerProcess(LineClient):
    """One running ``memtrio mcp`` child and its line reader.

    Started by `start_server`; ``request`` pipelines freely (each call waits
    for its own reply by id).
    """

    def __init__(self, process: trio.Process, home: Path, stderr_path: Path) -> None:
        super().__init__()
        self.process = process
        self.home = home
        self.stderr_path = stderr_path

    async def _write(self, data: bytes) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send_all(data)

    async def read_loop(self) -> None:
        """Read stdout until EOF (stdout belongs to the protocol: every line is checked)."""
        assert self.process.stdout is not None
        await self._read_lines(self.process.stdout)

    # -- lifecycle ---------------------------------------------------------

    def kill9(self) -> None:
        if self.process.returncode is None:
            try:
                os.kill(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    async def close(self, timeout: float = 20.0) -> int:
        """Close stdin (a clean EOF) and wait for the exit code; kill -9 after ``timeout``."""
        if self.process.stdin is not None:
            try:
                await self.process.stdin.aclose()
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                pass
        with trio.move_on_after(timeout):
            return await self.process.wait()
        self.violations.append(f"the server did not exit within {timeout:g} s of EOF; killed")
        self.kill9()
        return await self.process.wait()

    async def wait_exit(self, timeout: float) -> int | None:
        with trio.move_on_after(timeout):
            return await self.process.wait()
        return None

    def stderr_text(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""


async def start_server(
    nursery: trio.Nursery,
    home: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    preexec: Callable[[], None] | None = None,
    wrap: list[str] | None = None,
    stderr_name: str = "server-stderr.txt",
) -> ServerProcess:
    """Spawn the server (its command prefixed by ``wrap``) and its reader task in ``nursery``;
    its stderr goes to ``home/stderr_name``."""
    home.mkdir(parents=True, exist_ok=True)
    stderr_path = home / stderr_name
    with open(stderr_path, "ab") as errlog:
        process = await trio.lowlevel.open_process(
            [*(wrap or []), *server_command()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errlog,
            env=server_env(home, env),
            cwd=str(cwd or home),
            preexec_fn=preexec,
        )
    server = ServerProcess(process, home, stderr_path)
    nursery.start_soon(server.read_loop)
    return server
