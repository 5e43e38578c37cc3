"""Transports for the official MCP SDK `Client` that the SDK does not ship, and a tap.

The SDK speaks stdio and Streamable HTTP; ``memtrio serve`` also serves
newline-delimited JSON-RPC over TCP and one message per text frame over
WebSocket. A `Client` takes any `Transport`: an async context manager yielding
a stream of received `SessionMessage` (or the `Exception` a message failed to
parse with) and a stream it sends `SessionMessage` on. `tcp_transport` and
`ws_transport` are those, and name the session's repository in ``initialize``
(``_meta["memtrio/root"]``, docs/transports.md), since they have no other way.

`Tap` wraps any of them (the SDK's stdio transport too) so a test can write
raw text on the session's own connection and read the answers the SDK has no
request waiting for (an error with a null id, or an id of the test's own).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import trio
from anyio.streams.memory import MemoryObjectSendStream
from mcp.client._transport import ReadStream, Transport, TransportStreams, WriteStream
from mcp.shared.message import SessionMessage
from trio_websocket import ConnectionClosed, open_websocket_url

RAW_ID_PREFIX = "raw-"
"""Requests a test writes raw use string ids with this prefix: their answers go to the tap."""

STRAY_TIMEOUT = 15.0

Send = Callable[[str], Awaitable[None]]


def parse(text: str | bytes) -> SessionMessage | Exception:
    """One received message, or why it is not one (handed to the SDK, as its stdio client does)."""
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(text, by_name=False))
    except ValueError as exc:
        return exc


def encode(message: SessionMessage, root: str | None) -> str:
    """The wire text of ``message``; an ``initialize`` request names ``root`` in its ``_meta``."""
    msg = message.message
    if root is not None and isinstance(msg, types.JSONRPCRequest) and msg.method == "initialize":
        data = msg.model_dump(by_alias=True, mode="json", exclude_unset=True)
        data.setdefault("params", {}).setdefault("_meta", {})["memtrio/root"] = root
        return json.dumps(data)
    return msg.model_dump_json(by_alias=True, exclude_unset=True)


@asynccontextmanager
async def message_transport(
    send: Send, received: AsyncIterator[str | bytes], root: str | None
) -> AsyncIterator[TransportStreams]:
    """SDK streams over one connection: ``send`` writes one message, ``received`` yields
    each message until the peer closes.

    Cancellation: leaving the block stops both pumps; closing the connection is the caller's.
    """
    to_sdk, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, from_sdk = anyio.create_memory_object_stream[SessionMessage](0)

    async def pump_in() -> None:
        async with to_sdk:
            async for text in received:
                try:
                    await to_sdk.send(parse(text))
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    return  # the session is gone

    async def pump_out() -> None:
        async with from_sdk:
            async for message in from_sdk:
                await send(encode(message, root))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(pump_in)
        nursery.start_soon(pump_out)
        try:
            yield read_stream, write_stream
        finally:
            nursery.cancel_scope.cancel()


async def lines_of(stream: trio.abc.ReceiveStream) -> AsyncIterator[bytes]:
    """Each newline-terminated line of ``stream`` until EOF (or a reset)."""
    buffer = b""
    while True:
        try:
            chunk = await stream.receive_some(65536)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return
        if not chunk:
            return
        *lines, buffer = (buffer + chunk).split(b"\n")
        for line in lines:
            yield line


@asynccontextmanager
async def tcp_transport(host: str, port: int, root: str | None) -> AsyncIterator[TransportStreams]:
    """A session over ``memtrio serve --transport tcp``: one JSON-RPC message per line."""
    stream = await trio.open_tcp_stream(host, port)

    async def send(text: str) -> None:
        await stream.send_all(text.encode() + b"\n")

    async with stream, message_transport(send, lines_of(stream), root) as streams:
        yield streams


@asynccontextmanager
async def ws_transport(url: str, root: str | None) -> AsyncIterator[TransportStreams]:
    """A session over ``memtrio serve --transport ws``: one message per text frame, subprotocol
    ``mcp``."""
    async with open_websocket_url(url, subprotocols=["mcp"]) as ws:
        assert ws.subprotocol == "mcp", ws.subprotocol

        async def frames() -> AsyncIterator[str | bytes]:
            while True:
                try:
                    yield await ws.get_message()
                except ConnectionClosed:
                    return

        async with message_transport(ws.send_message, frames(), root) as streams:
            yield streams


class RawText:
    """Text a transport writes as it is, in place of a JSON-RPC message: SDK transports write
    ``message.model_dump_json(...)``, the SDK's stdio transport included."""

    def __init__(self, text: str) -> None:
        self.text = text

    def model_dump_json(self, **_options: Any) -> str:
        return self.text

    def model_dump(self, **_options: Any) -> Any:
        raise TypeError("raw text is not a JSON-RPC message")


def is_stray(message: types.JSONRPCMessage) -> bool:
    """An answer no SDK request waits for: the server could not tell which request it answers,
    or it answers one the test wrote raw."""
    if not isinstance(message, types.JSONRPCError | types.JSONRPCResponse):
        return False
    return message.id is None or (
        isinstance(message.id, str) and message.id.startswith(RAW_ID_PREFIX)
    )


class Tap:
    """``inner`` for the SDK, plus `send_raw`: write text on the same connection, and get the
    server's answer to it.

    `open` is the `Transport` to give the `Client`.
    """

    def __init__(self, inner: Transport) -> None:
        self._inner = inner
        self._write: WriteStream[SessionMessage] | None = None
        self._strays_in, self._strays = anyio.create_memory_object_stream[dict[str, Any]](16)

    @asynccontextmanager
    async def open(self) -> AsyncIterator[TransportStreams]:
        async with self._inner as (read, write):
            self._write = write
            to_sdk, sdk_read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._forward, read, to_sdk)
                try:
                    yield sdk_read, write
                finally:
                    nursery.cancel_scope.cancel()

    async def _forward(
        self,
        read: ReadStream[SessionMessage | Exception],
        to_sdk: MemoryObjectSendStream[SessionMessage | Exception],
    ) -> None:
        async with to_sdk:
            async for item in read:
                if isinstance(item, SessionMessage) and is_stray(item.message):
                    self._strays_in.send_nowait(item.message.model_dump(by_alias=True, mode="json"))
                    continue
                try:
                    await to_sdk.send(item)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    return

    async def send_raw(self, text: str) -> dict[str, Any]:
        """Write ``text`` as one message (a line, a frame) on the session's connection; the
        server's answer (an error with a null id, or the answer to a ``raw-`` id)."""
        assert self._write is not None, "the transport is not open"
        await self._write.send(SessionMessage(RawText(text)))  # type: ignore[arg-type]
        with trio.fail_after(STRAY_TIMEOUT):
            return await self._strays.receive()
