"""End-to-end helpers: the official MCP Python SDK client against `memtrio mcp`, and the CLI.

``open_client`` launches the real server as a stdio child (``python -m
memtrio.supervisors.cli mcp``) with an isolated ``MEMTRIO_HOME``; the SDK's
stdio client passes only a whitelist of environment variables, so everything
the server needs is passed explicitly.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
from mcp import Client, StdioServerParameters

SERVER_ENV_PASSTHROUGH = ("PATH", "HOME", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "PYTHONPATH")


def server_env(home: Path, env: Mapping[str, str] | None = None) -> dict[str, str]:
    out = {k: os.environ[k] for k in SERVER_ENV_PASSTHROUGH if k in os.environ}
    out["MEMTRIO_HOME"] = str(home)
    out.setdefault("MEMTRIO_EMBEDDINGS", "off")
    out["PYTHONUNBUFFERED"] = "1"
    out.update(env or {})
    return out


def server_command(args: Sequence[str] = ()) -> list[str]:
    return [sys.executable, "-m", "memtrio.supervisors.cli", "mcp", *args]


def run_cli(
    *args: str,
    home: Path | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    timeout: float = 120.0,
) -> subprocess.CompletedProcess[str]:
    """``memtrio ARGS`` as a user runs it (``python -m memtrio.supervisors.cli``), to completion.

    With ``home``: the server's environment (`server_env`: that ``MEMTRIO_HOME``,
    embeddings off) plus ``env``, run in ``cwd`` or ``home``. Without: this
    process's environment plus ``env``.
    """
    full = server_env(home, env) if home is not None else {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "memtrio.supervisors.cli", *args],
        cwd=cwd or home,
        env=full,
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@asynccontextmanager
async def open_client(
    home: Path,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    args: Sequence[str] = (),
    timeout: float = 60.0,
) -> AsyncIterator[Client]:
    """An initialized official MCP client talking to a fresh `memtrio mcp` child.

    Embeddings are off unless ``env`` sets ``MEMTRIO_EMBEDDINGS``.
    """
    command = server_command(args)
    params = StdioServerParameters(
        command=command[0],
        args=command[1:],
        env=server_env(home, env),
        cwd=str(cwd) if cwd else str(home),
    )
    async with Client(params, read_timeout_seconds=timeout, mode="auto") as client:
        yield client


def result_payload(result: Any) -> Any:
    """The structured content of a tool result, else its text (JSON-decoded when it is JSON)."""
    if getattr(result, "structured_content", None) is not None:
        return result.structured_content
    texts = [c.text for c in result.content if getattr(c, "type", "") == "text"]
    text = "\n".join(texts)
    try:
        return json.loads(text)
    except ValueError:
        return text


async def call(client: Client, tool: str, **arguments: Any) -> tuple[bool, Any]:
    """Call ``tool``; (is_error, structured content or text)."""
    result = await client.call_tool(tool, arguments)
    return bool(result.is_error), result_payload(result)


async def ok(client: Client, tool: str, **arguments: Any) -> Any:
    """Call ``tool`` and assert it succeeded; its payload."""
    is_error, payload = await call(client, tool, **arguments)
    assert not is_error, f"{tool} failed: {payload}"
    return payload


async def fails(client: Client, tool: str, **arguments: Any) -> str:
    """Call ``tool`` and assert it returned an isError result; its text."""
    is_error, payload = await call(client, tool, **arguments)
    assert is_error, f"{tool} unexpectedly succeeded: {payload}"
    return payload if isinstance(payload, str) else json.dumps(payload)


class ThreadedClient:
    """An official client and its server on a trio loop of their own, in a thread.

    pytest-trio runs each test in its own ``trio.run``, so a server shared by
    several tests (a module-scoped fixture) cannot live inside any of them. It
    lives here; tests call it synchronously (``ok``, ``fails``, ``run``), each
    call awaited on the client's loop. ``close`` ends the session with a clean
    EOF and re-raises whatever failed in the thread.
    """

    def __init__(self, home: Path, **options: Any) -> None:
        self._home = home
        self._options = options
        self._ready = threading.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._failure: BaseException | None = None
        self._client: Client | None = None
        self._thread = threading.Thread(target=self._main, name="mcp-client", daemon=True)

    def _main(self) -> None:
        try:
            trio.run(self._serve)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread by close()
            self._failure = exc
        finally:
            self._ready.set()

    async def _serve(self) -> None:
        async with open_client(self._home, **self._options) as client:
            self._client = client
            self._token = trio.lowlevel.current_trio_token()
            self._stop = trio.Event()
            self._ready.set()
            await self._stop.wait()

    def start(self, timeout: float = 60.0) -> ThreadedClient:
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError(f"the server did not start within {timeout:g} s")
        if self._client is None:
            raise RuntimeError("the server did not start") from self._failure
        return self

    def run(self, afn: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
        """``await afn(client, *args, **kwargs)`` on the client's loop; its result."""
        return trio.from_thread.run(
            functools.partial(afn, self._client, *args, **kwargs), trio_token=self._token
        )

    def ok(self, tool: str, **arguments: Any) -> Any:
        return self.run(ok, tool, **arguments)

    def fails(self, tool: str, **arguments: Any) -> str:
        return self.run(fails, tool, **arguments)

    def close(self, timeout: float = 30.0) -> None:
        if self._token is not None and self._stop is not None:
            with contextlib.suppress(trio.RunFinishedError):
                trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"the client did not stop within {timeout:g} s"
        if self._failure is not None:
            raise self._failure


@contextlib.contextmanager
def threaded_client(home: Path, **options: Any) -> Iterator[ThreadedClient]:
    """A started `ThreadedClient` (see `open_client` for ``options``), closed on exit."""
    client = ThreadedClient(home, **options).start()
    try:
        yield client
    finally:
        client.close()
