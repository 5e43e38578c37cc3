"""End-to-end helpers: the official MCP Python SDK client against memtrio, and the CLI.

``open_client`` gives a test an initialized official `Client` on a fresh
server with an isolated ``MEMTRIO_HOME``, over the transport the test runs
with (one of `TRANSPORTS`; conftest.py parametrizes the end-to-end modules
over them, see `every_transport`):

- ``stdio``: ``memtrio mcp`` as the SDK's stdio child, started in ``cwd``;
- ``http``: a ``memtrio serve --transport http`` process and the SDK's
  Streamable HTTP client, declaring ``cwd`` as its MCP root;
- ``tcp``, ``ws``: a ``memtrio serve`` process of that transport and the
  transports of `sdk_transports`, naming ``cwd`` in ``initialize``.

The SDK's stdio client passes only a whitelist of environment variables, so
everything the server needs is passed explicitly (`launch.server_env`); a
``memtrio serve`` gets the same environment.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2
import mcp_types as types
import pytest
import trio
import zygote
from launch import server_command as server_command  # re-exported: tests import it here
from launch import server_env as server_env
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from sdk_transports import Tap, tcp_transport, ws_transport
from serve_helpers import serve_process

TRANSPORTS = ("stdio", "http", "tcp", "ws")
every_transport = pytest.mark.transports(*TRANSPORTS)
"""A module's ``pytestmark``: each of its tests runs once per transport (conftest.py)."""


def only_on(*transports: str, reason: str) -> pytest.MarkDecorator:
    """A test of an `every_transport` module that runs on ``transports`` only, and why."""
    return pytest.mark.transports(*transports, reason=reason)


def stdio_only(reason: str) -> pytest.MarkDecorator:
    return only_on("stdio", reason=reason)


_selected = ["stdio"]


@contextlib.contextmanager
def selected_transport(name: str) -> Iterator[str]:
    """``open_client`` calls that name no transport use ``name`` until the block ends."""
    assert name in TRANSPORTS, name
    _selected.append(name)
    try:
        yield name
    finally:
        _selected.pop()


def run_cli(
    *args: str,
    home: Path | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    timeout: float = 120.0,
) -> subprocess.CompletedProcess[str]:
    """``memtrio ARGS`` as a user runs it (``python -m memtrio.supervisors.cli``, forked by
    the worker's zygote: `zygote`), to completion.

    With ``home``: the server's environment (`server_env`: that ``MEMTRIO_HOME``,
    embeddings off) plus ``env``, run in ``cwd`` or ``home``. Without: this
    process's environment plus ``env``.
    """
    full = server_env(home, env) if home is not None else {**os.environ, **(env or {})}
    return subprocess.run(
        zygote.command(args),
        cwd=cwd or home,
        env=full,
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@dataclass
class Session:
    """An initialized client, and a way around it on the same connection."""

    client: Client
    transport: str
    send_raw: Callable[[str], Awaitable[dict[str, Any]]]
    """Write text as one message (a stdio or TCP line, an HTTP POST body, a WebSocket
    frame) on the session's connection; the server's JSON-RPC answer to it."""


@asynccontextmanager
async def open_session(
    home: Path,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    args: Sequence[str] = (),
    timeout: float = 60.0,
    transport: str | None = None,
) -> AsyncIterator[Session]:
    """An initialized official MCP client on a fresh server (see the module docstring) over
    ``transport`` (default: the test's), the server stopped when the block ends.

    The session's repository is ``cwd`` (default ``home``). Embeddings are off
    unless ``env`` sets ``MEMTRIO_EMBEDDINGS``. ``args`` are ``memtrio mcp``
    options: stdio only.
    """
    transport = transport or _selected[-1]
    root = (cwd or home).resolve()
    if transport == "stdio":
        command = zygote.command(["mcp", *args])
        params = StdioServerParameters(
            command=command[0], args=command[1:], env=server_env(home, env), cwd=str(root)
        )
        async with open_tapped(Tap(stdio_client(params)), transport, timeout) as session:
            yield session
        return
    assert not args, f"{list(args)} are memtrio mcp options: a test passing them is stdio-only"
    serve_args = ["--transport", transport, "--bind", "127.0.0.1:0"]
    async with serve_process(home, serve_args, env=env) as served:
        if transport == "http":
            async with open_http_session(served.url, root, timeout) as session:
                yield session
            return
        parts = urlsplit(served.url)
        assert parts.hostname is not None and parts.port is not None, served.url
        opened = (
            tcp_transport(parts.hostname, parts.port, str(root))
            if transport == "tcp"
            else ws_transport(served.url, str(root))
        )
        async with open_tapped(Tap(opened), transport, timeout) as session:
            yield session


@asynccontextmanager
async def open_tapped(tap: Tap, transport: str, timeout: float) -> AsyncIterator[Session]:
    async with Client(tap.open(), read_timeout_seconds=timeout, mode="auto") as client:
        yield Session(client, transport, tap.send_raw)


def roots_callback(root: Path) -> Callable[[Any], Awaitable[types.ListRootsResult]]:
    async def list_roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=root.as_uri())])  # type: ignore[arg-type]

    return list_roots


@asynccontextmanager
async def open_http_session(url: str, root: Path, timeout: float) -> AsyncIterator[Session]:
    """The SDK's Streamable HTTP client on ``url``, declaring ``root`` as its one MCP root;
    ``send_raw`` POSTs to the session the SDK opened."""
    session_ids: list[str] = []

    async def record_session_id(response: httpx2.Response) -> None:
        if sid := response.headers.get("mcp-session-id"):
            session_ids.append(sid)

    async with httpx2.AsyncClient(
        timeout=httpx2.Timeout(30.0, read=300.0),
        event_hooks={"response": [record_session_id]},
    ) as http:

        async def send_raw(text: str) -> dict[str, Any]:
            assert session_ids, "no Mcp-Session-Id seen"
            headers = {
                "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
                "Mcp-Session-Id": session_ids[-1],
                "MCP-Protocol-Version": client.protocol_version,
            }
            response = await http.post(url, content=text.encode(), headers=headers)
            assert response.headers["content-type"].startswith("application/json"), response
            reply = response.json()
            assert isinstance(reply, dict), reply
            return reply

        async with Client(
            streamable_http_client(url, http_client=http),
            read_timeout_seconds=timeout,
            mode="auto",
            list_roots_callback=roots_callback(root),
        ) as client:
            yield Session(client, "http", send_raw)


@asynccontextmanager
async def open_client(home: Path, **options: Any) -> AsyncIterator[Client]:
    """The client of `open_session` (same options)."""
    async with open_session(home, **options) as session:
        yield session.client


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
