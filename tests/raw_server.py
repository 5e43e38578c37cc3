"""A raw line-level driver of `memtrio mcp`, for what no well-behaved client sends."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
from mcp_client import server_command, server_env

INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}


class RawServer:
    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self._buffer = bytearray()

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

    async def read(self, timeout: float = 30.0) -> dict[str, Any]:
        """The next line of stdout, decoded (fails the test on a non-JSON line)."""
        assert self.process.stdout is not None
        with trio.fail_after(timeout):
            while b"\n" not in self._buffer:
                chunk = await self.process.stdout.receive_some(65536)
                if not chunk:
                    raise EOFError(f"server closed stdout; partial: {bytes(self._buffer[:200])!r}")
                self._buffer += chunk
        line, _, rest = bytes(self._buffer).partition(b"\n")
        self._buffer = bytearray(rest)
        return json.loads(line)

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

    async def rest_of_stdout(self, timeout: float = 30.0) -> bytes:
        assert self.process.stdout is not None
        out = bytearray(self._buffer)
        with trio.fail_after(timeout):
            while chunk := await self.process.stdout.receive_some(65536):
                out += chunk
        return bytes(out)


@asynccontextmanager
async def raw_server(
    home: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    args: tuple[str, ...] = (),
) -> AsyncIterator[RawServer]:
    errlog = open(home / "server-stderr.txt", "ab")  # noqa: SIM115 - closed below
    process = await trio.lowlevel.open_process(
        server_command(args),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errlog,
        env=server_env(home, env),
        cwd=str(cwd or home),
    )
    try:
        yield RawServer(process)
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
