"""The blocking twin of ``client.LineClient``: JSON-RPC over a child process's stdin and
stdout, one request at a time, for synchronous callers (the benchmarks in ``tools/``,
hypothesis tests). It builds its messages and reads its lines with ``client``'s functions,
so both speak the protocol the same way.

The child is any line-framed MCP server: ``memtrio mcp`` (`BlockingClient.memtrio`, in
`client.server_env`), the reference server, a relay. Error handling: a reply that does
not come within the timeout raises `client.NoReply`; a server that closes stdout raises
`client.ServerGone`. `close` ends the child by pid whatever state it is in.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from .client import (
    AUTO_IDS_FROM,
    INITIALIZED,
    PROTOCOL_VERSION,
    READ_SIZE,
    NoReply,
    Reply,
    RequestId,
    ServerGone,
    initialize_params,
    request_message,
    server_command,
    server_env,
    take_line,
    tool_call_params,
)


class BlockingClient:
    """One server child process spoken to with blocking line I/O."""

    def __init__(
        self,
        command: Sequence[str],
        env: Mapping[str, str],
        cwd: Path,
        stderr: IO[bytes] | int | None = subprocess.DEVNULL,
        timeout: float = 60.0,
        preexec: Callable[[], None] | None = None,
    ) -> None:
        self.timeout = timeout  # seconds a reply may take, unless a call says otherwise
        self.started = time.perf_counter()  # just before the spawn (start-up benchmarks)
        self.proc = subprocess.Popen(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=dict(env),
            cwd=str(cwd),
            preexec_fn=preexec,
        )
        self._buffer = bytearray()
        self._next_id = AUTO_IDS_FROM

    @classmethod
    def memtrio(
        cls,
        home: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        args: Sequence[str] = (),
        stderr: IO[bytes] | int | None = subprocess.DEVNULL,
        timeout: float = 60.0,
        preexec: Callable[[], None] | None = None,
    ) -> BlockingClient:
        """``memtrio mcp ARGS`` in `server_env` (``home``, then ``env``), started in ``cwd``."""
        command = server_command(args, direct=preexec is not None)
        environment = server_env(home, env)
        return cls(command, environment, cwd or home, stderr, timeout, preexec)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def send_bytes(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError) as exc:
            raise ServerGone(f"cannot write to the server: {exc}") from None

    def send(self, obj: object) -> None:
        self.send_bytes(json.dumps(obj).encode() + b"\n")

    def read_line(self, timeout: float | None = None) -> bytes:
        """The next line of stdout, without its newline."""
        timeout = self.timeout if timeout is None else timeout
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while (line := take_line(self._buffer)) is None:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(left, 0.0))
            if not ready:
                raise NoReply(f"no line from the server within {timeout:g} s")
            chunk = os.read(fd, READ_SIZE)
            if not chunk:
                raise ServerGone(
                    f"the server closed stdout; partial: {bytes(self._buffer[:200])!r}"
                )
            self._buffer += chunk
        return line

    def read(self, timeout: float | None = None) -> Reply:
        reply = json.loads(self.read_line(timeout))
        assert isinstance(reply, dict), reply
        return reply

    def request(
        self,
        method: str,
        params: object = None,
        *,
        rid: RequestId | None = None,
        timeout: float | None = None,
    ) -> Reply:
        """Send one request and return its reply (server notifications on the way skipped)."""
        return self.timed_request(method, params, rid=rid, timeout=timeout)[0]

    def timed_request(
        self,
        method: str,
        params: object = None,
        *,
        rid: RequestId | None = None,
        timeout: float | None = None,
    ) -> tuple[Reply, float]:
        """The reply, and the milliseconds from writing the request's line to reading its
        reply's (this client's own JSON encoding and decoding are not in them)."""
        rid = self.new_id() if rid is None else rid
        line = json.dumps(request_message(method, params, rid)).encode() + b"\n"
        started = time.perf_counter()
        self.send_bytes(line)
        while True:
            raw = self.read_line(timeout)
            elapsed = (time.perf_counter() - started) * 1000
            reply = json.loads(raw)
            if not isinstance(reply, dict) or "method" not in reply:
                break
        if not isinstance(reply, dict) or reply.get("id") != rid:
            raise AssertionError(f"expected the reply to {rid!r}, got {reply}")
        return reply, elapsed

    def initialize(
        self,
        client: str = "memtrio-tools",
        version: str = PROTOCOL_VERSION,
        timeout: float | None = None,
    ) -> Reply:
        """``initialize`` (RuntimeError when it fails), then ``notifications/initialized``."""
        reply = self.request("initialize", initialize_params(client, version), timeout=timeout)
        if "result" not in reply:
            raise RuntimeError(f"initialize failed: {reply}")
        self.send(INITIALIZED)
        return reply

    def call_tool(
        self, name: str, arguments: object = None, *, timeout: float | None = None
    ) -> Reply:
        """The raw reply to ``tools/call`` (a JSON-RPC error or a CallToolResult)."""
        return self.request("tools/call", tool_call_params(name, arguments), timeout=timeout)

    def timed_call(
        self, name: str, arguments: object = None, *, timeout: float | None = None
    ) -> tuple[dict[str, Any], float]:
        """The result of a ``tools/call`` that must succeed (RuntimeError otherwise), and its
        milliseconds as `timed_request` counts them."""
        params = tool_call_params(name, arguments)
        reply, ms = self.timed_request("tools/call", params, timeout=timeout)
        result = reply.get("result")
        if not isinstance(result, dict) or result.get("isError"):
            raise RuntimeError(f"{name} failed: {json.dumps(reply)[:300]}")
        return result, ms

    def tool(
        self, name: str, arguments: object = None, *, timeout: float | None = None
    ) -> dict[str, Any]:
        """The result of a ``tools/call`` that must succeed (RuntimeError otherwise)."""
        return self.timed_call(name, arguments, timeout=timeout)[0]

    def close(self, timeout: float = 30.0) -> int:
        """A clean EOF, then the exit code; the child is killed if it does not exit within
        ``timeout``."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.proc.wait()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
