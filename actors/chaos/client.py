"""The one JSON-RPC line client of memtrio's own tools and tests: a real ``memtrio mcp``
child process (`start_server`) or any line-framed stream (`LineClient`, which the TCP
client of ``netclient`` and the test suite's raw drivers share), and the one environment
a server of theirs runs in (`server_env`). The blocking twin for synchronous callers
(benchmarks, hypothesis tests) is ``blocking.BlockingClient``; both build their messages
and judge replies with the functions here.

The chaos harness needs what a polite client never does: pipelined requests,
raw bytes, duplicate ids, a ``kill -9`` in the middle of a burst. So it speaks
JSON-RPC over the child's stdin/stdout itself, and checks every line the
server writes: each must be one well-formed JSON-RPC 2.0 object (stdout
belongs to the protocol), and each response must answer a request that was
sent and not answered yet.

A `LineClient` is driven one of two ways: pipelined, with its reader task running
(``read_loop``; each `request` waits for its own reply by id), or step by step with no
reader task (`send_request`, then `read` the next line; `request` then sends and reads
the reply itself).

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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import trio

from ...protocol import jsonrpc, mcp
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
# What the chaos scenarios add: no code index (each scenario's server starts in a bare
# home), no bytecode written by the many short-lived children.
CHAOS_ENV = {"MEMTRIO_CODE": "off", "PYTHONDONTWRITEBYTECODE": "1"}
# Requests numbered by the client: far from the small ids tests and scenarios pick.
AUTO_IDS_FROM = 1_000_000
READ_SIZE = 65536
INITIALIZED: dict[str, object] = {"jsonrpc": "2.0", "method": "notifications/initialized"}
S = TypeVar("S", bound="ServerProcess")


class ServerGone(Exception):
    """The server process exited (or closed stdout) before replying."""


class NoReply(Exception):
    """No reply arrived within the timeout."""


LAUNCHER_ENV = "MEMTRIO_CHAOS_LAUNCHER"


def memtrio_command(args: Sequence[str] = (), *, direct: bool = False) -> list[str]:
    """``memtrio ARGS`` run by this interpreter, or by the launcher that `LAUNCHER_ENV`
    names (a JSON list of strings, the command's prefix: the test suite's fork server,
    tests/zygote.py, whose children are these same commands without the interpreter's
    start; a value that is not such a list is ignored). ``direct``: always this
    interpreter, for a process a wrapper command or a ``preexec_fn`` must reach itself."""
    launcher = None if direct else os.environ.get(LAUNCHER_ENV)
    if launcher:
        try:
            prefix = json.loads(launcher)
        except ValueError:
            prefix = None
        if isinstance(prefix, list) and prefix and all(isinstance(a, str) for a in prefix):
            return [*prefix, *args]
    return [sys.executable, "-m", "memtrio.supervisors.cli", *args]


def server_command(args: Sequence[str] = (), *, direct: bool = False) -> list[str]:
    """``memtrio mcp ARGS`` (`memtrio_command`)."""
    return memtrio_command(["mcp", *args], direct=direct)


def server_env(home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """An isolated server environment: ``MEMTRIO_HOME=home``, embeddings off and a
    ``memtrio mcp`` that serves embedded (``MEMTRIO_SERVE_ATTACH=off``: it starts no owner
    that would outlive its caller), then ``extra``; nothing of this process's environment
    but `ENV_PASSTHROUGH`."""
    env = {k: os.environ[k] for k in ENV_PASSTHROUGH if k in os.environ}
    env.update(
        {
            "MEMTRIO_HOME": str(home),
            "MEMTRIO_EMBEDDINGS": "off",
            "MEMTRIO_SERVE_ATTACH": "off",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra or {})
    return env


def chaos_env(home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """`server_env` with `CHAOS_ENV` (the scenarios of the attach model turn attach on)."""
    return server_env(home, {**CHAOS_ENV, **(extra or {})})


def request_message(method: str, params: object, rid: RequestId) -> dict[str, object]:
    """A JSON-RPC request (``params`` left out when None)."""
    msg: dict[str, object] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def initialize_params(
    client: str = "memtrio-chaos", version: str = PROTOCOL_VERSION
) -> dict[str, object]:
    """The ``initialize`` parameters of a client named ``client`` that asks for ``version``."""
    return {
        "protocolVersion": version,
        "capabilities": {},
        "clientInfo": {"name": client, "version": "1"},
    }


def tool_call_params(name: str, arguments: object) -> dict[str, object]:
    return {"name": name, "arguments": {} if arguments is None else arguments}


def tool_text(result: Mapping[str, Any]) -> str:
    """The text items of a tool result, joined."""
    items = result.get("content")
    if not isinstance(items, list):
        return ""
    return " ".join(str(c.get("text", "")) for c in items if isinstance(c, dict))


def internal_failure(reply: Reply) -> str | None:
    """Why ``reply`` shows an internal failure of the server, or None: a JSON-RPC -32603,
    or an ``isError`` result that is a handler's unexpected exception
    (`mcp.is_tool_failure`) or shows a traceback, as opposed to a refusal of the input
    that names what to do."""
    error = reply.get("error")
    if isinstance(error, dict):
        if error.get("code") == jsonrpc.INTERNAL_ERROR:
            return f"internal error -32603: {error.get('message')!r}"
        return None
    result = reply.get("result")
    if isinstance(result, dict) and result.get("isError"):
        text = tool_text(result)
        if mcp.is_tool_failure(text) or "Traceback" in text:
            return f"the tool failed inside: {text[:300]!r}"
    return None


def take_line(buffer: bytearray) -> bytes | None:
    """The first whole line of ``buffer`` (removed, without its newline), or None."""
    nl = buffer.find(b"\n")
    if nl < 0:
        return None
    line = bytes(buffer[:nl])
    del buffer[: nl + 1]
    return line


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
    """JSON-RPC 2.0 over one line-framed byte stream, pipelined or step by step (see the
    module's docstring).

    Subclasses say how bytes go out (`_write`) and give the stream they come in on
    (``receive``). Every line the reader task receives is checked (one well-formed
    JSON-RPC object) and every response must answer a request sent and not answered
    yet: anything else is a violation, recorded, never raised.
    """

    def __init__(self, receive: trio.abc.ReceiveStream | None = None) -> None:
        self.stats = Stats()
        self.violations: list[str] = []
        self.receive = receive
        self._buffer = bytearray()
        self._waiting: dict[RequestId, trio.MemorySendChannel[Reply]] = {}
        self._unmatched: list[Reply] = []  # replies with id null or unknown
        self._gone = trio.Event()
        self._pipelined = False  # a reader task routes the replies (`read_loop`)
        self._next_id = AUTO_IDS_FROM
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

    async def send_request(self, rid: RequestId, method: str, params: object = None) -> None:
        """Send one request and read nothing (step by step: `read` its reply)."""
        await self.send(request_message(method, params, rid))

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
        """Send one request and return its response object: routed to it by the reader
        task when one runs, else the next line read (which must answer it)."""
        rid = self.new_id() if rid is None else rid
        if not self._pipelined:
            await self.send_request(rid, method, params)
            reply = await self.read(timeout)
            if not isinstance(reply, dict) or reply.get("id") != rid:
                raise AssertionError(f"expected the reply to {rid!r}, got {reply}")
            return reply
        receive = self.expect(rid)
        try:
            await self.send_request(rid, method, params)
        except ServerGone:
            self.forget(rid)
            raise
        return await self.wait_reply(rid, receive, timeout)

    async def notify(self, method: str, params: object = None) -> None:
        msg: dict[str, object] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        await self.send(msg)

    async def initialize(
        self, timeout: float = 60.0, client: str = "memtrio-chaos", rid: RequestId | None = None
    ) -> Reply:
        reply = await self.request(
            "initialize", initialize_params(client), rid=rid, timeout=timeout
        )
        await self.send(INITIALIZED)
        return reply

    async def call_tool(
        self, name: str, arguments: object = None, *, timeout: float = 60.0
    ) -> Reply:
        """The raw response of ``tools/call`` (a JSON-RPC error or a CallToolResult)."""
        reply = await self.request("tools/call", tool_call_params(name, arguments), timeout=timeout)
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

    async def _receive_some(self) -> bytes | bytearray:
        """More bytes of the stream (b"" at its end, or when it broke)."""
        assert self.receive is not None, "this client has no stream to read"
        try:
            return await self.receive.receive_some(READ_SIZE)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            return b""

    async def read_line(self, timeout: float = 30.0) -> bytes:
        """Step by step: the next line, without its newline (EOFError at the stream's end,
        trio.TooSlowError after ``timeout``)."""
        with trio.fail_after(timeout):
            while (line := take_line(self._buffer)) is None:
                chunk = await self._receive_some()
                if not chunk:
                    raise EOFError(f"the stream ended; partial: {bytes(self._buffer[:200])!r}")
                self._buffer += chunk
        return line

    async def read(self, timeout: float = 30.0) -> Any:
        """Step by step: the next line, decoded (an object, or a batch's array)."""
        return json.loads(await self.read_line(timeout))

    async def rest(self, timeout: float = 30.0) -> bytes:
        """Step by step: everything until the stream ends."""
        out = bytearray(self._buffer)
        self._buffer.clear()
        with trio.fail_after(timeout):
            while chunk := await self._receive_some():
                out += chunk
        return bytes(out)

    def read_in(self, nursery: trio.Nursery) -> None:
        """Drive the client pipelined from now on: its reader task runs in ``nursery``."""
        self._pipelined = True
        nursery.start_soon(self.read_loop)

    async def read_loop(self) -> None:
        """Pipelined: read until EOF, routing each response to its waiter (every line is
        checked: stdout belongs to the protocol). Started by `read_in`; cancelled, it
        leaves the client to be driven step by step again."""
        self._pipelined = True
        try:
            while True:
                chunk = await self._receive_some()
                if not chunk:
                    if self._buffer.strip():
                        self.violations.append(
                            f"the stream ended inside a line: {bytes(self._buffer[:80])!r}"
                        )
                    return
                self._buffer += chunk
                while (line := take_line(self._buffer)) is not None:
                    self._route(line)
        except trio.Cancelled:
            self._pipelined = False
            raise
        finally:
            if self._pipelined:
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
            self.stats.orphans.append(rid if isinstance(rid, (int, str)) else None)
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
        super().__init__(process.stdout)
        self.process = process
        self.home = home
        self.stderr_path = stderr_path

    async def _write(self, data: bytes) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send_all(data)

    @classmethod
    async def spawn(
        cls: type[S],
        command: Sequence[str],
        env: Mapping[str, str],
        home: Path,
        cwd: Path | None = None,
        stderr_name: str | Path = "server-stderr.txt",
        preexec: Callable[[], None] | None = None,
    ) -> S:
        """Start ``command`` in ``cwd`` (default ``home``) with ``env``; its stderr is
        appended to ``home/stderr_name`` (an absolute path: that file)."""
        stderr_path = home / stderr_name
        with open(stderr_path, "ab") as errlog:
            process = await trio.lowlevel.open_process(
                list(command),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errlog,
                env=dict(env),
                cwd=str(cwd or home),
                preexec_fn=preexec,
            )
        return cls(process, home, stderr_path)

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
    environment = chaos_env(home, env)
    # A launcher's child is not the process a wrapper, a preexec_fn or the attach model's
    # checks (owners and children followed by pid) would reach: those start it directly.
    attaching = environment.get("MEMTRIO_SERVE_ATTACH", "off") != "off"
    direct = bool(wrap) or preexec is not None or attaching
    command = [*(wrap or []), *server_command(direct=direct)]
    server = await ServerProcess.spawn(command, environment, home, cwd, stderr_name, preexec)
    server.read_in(nursery)
    return server
