"""Network MCP clients of a real ``memtrio serve``: a TCP session and a Streamable HTTP session.

Like the stdio client (``client``), they speak the protocol themselves, so they
can do what a polite client never does: drop a connection in the middle of a
call (a FIN or a reset), abandon an HTTP session without ``DELETE``, cut an SSE
stream right after its priming event and resume it with ``Last-Event-ID``.

The HTTP client is HTTP/1.1 written on trio streams (one connection per
request), not an HTTP library: the scenarios need to know exactly when a
connection is dropped and which bytes were read before, which a pooling client
hides, and ``memtrio chaos`` ships in the main package without an HTTP client
dependency.

Error handling: as in ``client``: a session that is gone (connection closed,
HTTP 404 for the session) raises `ServerGone`, a late reply `NoReply`, and
protocol violations (a malformed line or event, a reply delivered twice) are
recorded in ``violations``.
"""

from __future__ import annotations

import codecs
import json
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import trio

from .client import (
    INITIALIZED,
    PROTOCOL_VERSION,
    LineClient,
    NoReply,
    Reply,
    RequestId,
    ServerGone,
    Stats,
    initialize_params,
    request_message,
    tool_call_params,
)

BOTH = "application/json, text/event-stream"
SSE = "text/event-stream"
HEADER_LIMIT = 65536
READ_SIZE = 65536


def _reset_on_close(stream: trio.abc.Stream) -> None:
    """Make closing ``stream`` send a TCP reset (SO_LINGER 0) instead of a FIN."""
    if not isinstance(stream, trio.SocketStream):
        return
    try:
        stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass


class TcpSession(LineClient):
    """One MCP session on a TCP connection of ``memtrio serve`` (newline-delimited JSON-RPC).

    Opened by `open_tcp_session` (which sends the token line or runs the attach proof);
    its reader runs in the nursery given there.
    """

    def __init__(self, stream: trio.SocketStream, label: str) -> None:
        super().__init__(stream)
        self.stream = stream
        self.label = label

    async def _write(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def vanish(self, *, reset: bool) -> None:
        """Drop the connection at once (a reset, or a FIN), whatever is in flight."""
        if reset:
            _reset_on_close(self.stream)
        await trio.aclose_forcefully(self.stream)

    async def close(self, timeout: float = 20.0) -> None:
        """A polite end: EOF, then wait until the server closes its side."""
        try:
            await self.stream.send_eof()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        with trio.move_on_after(timeout):
            await self._gone.wait()
        await trio.aclose_forcefully(self.stream)


async def open_tcp_session(
    nursery: trio.Nursery,
    host: str,
    port: int,
    token: str | None,
    label: str,
    handshake: Callable[[trio.SocketStream], Awaitable[bytes]] | None = None,
) -> TcpSession:
    """Connect, present ``token`` (the first line) or run ``handshake`` (the attach
    endpoint's proof), start the reader in ``nursery``."""
    stream = await trio.open_tcp_stream(host, port)
    session = TcpSession(stream, label)
    if handshake is not None:
        await handshake(stream)  # the endpoint sends nothing more until the client speaks
    if token is not None:
        await stream.send_all(token.encode() + b"\n")
    session.read_in(nursery)
    return session


# -- HTTP/1.1 on trio streams --------------------------------------------------------


@dataclass
class SseEvent:
    id: str | None
    data: str


@dataclass
class HttpResponse:
    """A response whose headers were read; its body is read from ``stream`` on demand."""

    status: int
    headers: dict[str, str]
    stream: trio.abc.Stream
    buffer: bytearray  # body bytes already received (still chunk-encoded)
    _decoded: bytearray = field(default_factory=bytearray)
    _chunk_left: int = 0  # bytes of the current chunk still to come (chunked bodies)
    _ended: bool = False

    @property
    def chunked(self) -> bool:
        return "chunked" in self.headers.get("transfer-encoding", "").lower()

    @property
    def is_sse(self) -> bool:
        return self.headers.get("content-type", "").startswith(SSE)

    async def _more(self) -> bool:
        """Receive more raw bytes; False at EOF."""
        try:
            data = await self.stream.receive_some(READ_SIZE)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            data = b""
        self.buffer += data
        return bool(data)

    def _decode(self) -> None:
        """Move what ``buffer`` holds of the chunked body into ``_decoded``."""
        while not self._ended:
            if self._chunk_left:
                take = min(self._chunk_left, len(self.buffer))
                if not take:
                    return
                self._decoded += self.buffer[:take]
                del self.buffer[:take]
                self._chunk_left -= take
                continue
            end = self.buffer.find(b"\r\n")
            if end < 0:
                return
            line = bytes(self.buffer[:end]).split(b";")[0].strip()
            if not line:  # the CRLF that ends a chunk's data
                del self.buffer[: end + 2]
                continue
            size = int(line, 16)
            del self.buffer[: end + 2]
            if size == 0:
                self._ended = True
                return
            self._chunk_left = size

    async def chunks(self) -> AsyncIterator[bytes]:
        """The decoded body, as it arrives (ends with the body, or at EOF)."""
        length = self.headers.get("content-length")
        remaining = int(length) if length is not None and not self.chunked else None
        while True:
            if self.chunked:
                self._decode()
                data, self._decoded = bytes(self._decoded), bytearray()
            else:
                data, self.buffer = bytes(self.buffer), bytearray()
                if remaining is not None:
                    data = data[:remaining]
                    remaining -= len(data)
            if data:
                yield data
            if self._ended or remaining == 0:
                return
            if not await self._more():
                return

    async def body(self) -> bytes:
        return b"".join([chunk async for chunk in self.chunks()])

    async def events(self) -> AsyncIterator[SseEvent]:
        """The SSE events of the body, one by one as they arrive."""
        decoder = codecs.getincrementaldecoder("utf-8")()
        pending = ""
        event_id: str | None = None
        data: list[str] = []
        async for chunk in self.chunks():
            pending += decoder.decode(chunk)
            while "\n" in pending:
                line, pending = pending.split("\n", 1)
                line = line.rstrip("\r")
                if not line:
                    if event_id is not None or data:
                        yield SseEvent(event_id, "\n".join(data))
                    event_id, data = None, []
                    continue
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "id":
                    event_id = value
                elif name == "data":
                    data.append(value)

    async def close(self, *, reset: bool = False) -> None:
        if reset:
            _reset_on_close(self.stream)
        await trio.aclose_forcefully(self.stream)


async def http_exchange(
    host: str, port: int, method: str, path: str, headers: dict[str, str], body: bytes = b""
) -> HttpResponse:
    """Send one request on a new connection and read the response's status and headers."""
    stream = await trio.open_tcp_stream(host, port)
    try:
        lines = [f"{method} {path} HTTP/1.1", f"host: {host}:{port}", "connection: close"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        if body or method == "POST":
            lines += ["content-type: application/json", f"content-length: {len(body)}"]
        await stream.send_all("\r\n".join(lines).encode() + b"\r\n\r\n" + body)
        buffer = bytearray()
        while (end := buffer.find(b"\r\n\r\n")) < 0:
            data = await stream.receive_some(READ_SIZE)
            if not data or len(buffer) > HEADER_LIMIT:
                raise ServerGone(f"{method} {path}: the connection closed before a response")
            buffer += data
    except BaseException:
        await trio.aclose_forcefully(stream)
        raise
    head = bytes(buffer[:end]).decode("latin-1").split("\r\n")
    status = int(head[0].split()[1])
    fields = {}
    for line in head[1:]:
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip()
    return HttpResponse(status, fields, stream, bytearray(buffer[end + 4 :]))


@dataclass
class Resume:
    """What dropping and resuming POST streams did (`HttpSession.call_tool`)."""

    dropped: int = 0  # POST streams cut after their priming event
    resumed: int = 0  # GETs with Last-Event-ID
    redropped: int = 0  # resumed streams cut again before any event


class HttpSession:
    """One MCP session of a ``memtrio serve --transport http`` (Streamable HTTP, 2025-11-25).

    Each request is a new connection. With ``drop`` set, each ``tools/call`` whose
    ``drop()`` says so has its POST's SSE stream cut right after the priming event
    and is resumed with ``GET`` + ``Last-Event-ID``; ``redrop()`` cuts the resumed
    stream too, once, before any event (see `resumed_call`).
    """

    def __init__(
        self,
        url: str,
        label: str,
        *,
        drop: Callable[[], bool] | None = None,
        redrop: Callable[[], bool] | None = None,
    ) -> None:
        hostport, _, path = url.split("://", 1)[1].partition("/")
        host, _, port = hostport.rpartition(":")
        self.host, self.port, self.path = host.strip("[]"), int(port), "/" + path
        self.label = label
        self.sid: str | None = None
        self.drop = drop
        self.redrop = redrop
        self.stats = Stats()
        self.resume = Resume()
        self.violations: list[str] = []
        self._ended = False
        self._next_id = 0

    @property
    def gone(self) -> bool:
        return self._ended

    def _headers(self, accept: str = BOTH) -> dict[str, str]:
        headers = {"accept": accept, "mcp-protocol-version": PROTOCOL_VERSION}
        if self.sid is not None:
            headers["mcp-session-id"] = self.sid
        return headers

    async def post(self, message: object, accept: str = BOTH) -> HttpResponse:
        """POST one JSON-RPC message (a 404 for the session raises `ServerGone`)."""
        self.stats.sent += 1
        body = json.dumps(message).encode()
        response = await http_exchange(
            self.host, self.port, "POST", self.path, self._headers(accept), body
        )
        await self._check_session(response)
        return response

    async def _check_session(self, response: HttpResponse) -> None:
        """A 404 for our session: it is over (`ServerGone`)."""
        if response.status == 404 and self.sid is not None:
            self._ended = True
            await response.close()
            raise ServerGone(f"{self.label}: the server ended the session (404)")

    async def initialize(self, timeout: float = 60.0) -> Reply:
        with trio.fail_after(timeout):
            response = await self.post(request_message("initialize", initialize_params(), 0))
            reply = json.loads(await response.body())
            await response.close()
            self.sid = response.headers.get("mcp-session-id")
            if response.status != 200 or self.sid is None:
                raise ServerGone(f"{self.label}: initialize answered {response.status}: {reply}")
            done = await self.post(INITIALIZED)
            await done.close()
            if done.status != 202:
                self.violations.append(f"notifications/initialized answered {done.status}")
        return dict(reply)

    async def request(
        self,
        method: str,
        params: object = None,
        *,
        rid: RequestId | None = None,
        timeout: float = 30.0,
    ) -> Reply:
        """One request, answered as JSON or as an SSE stream; its reply."""
        if rid is None:
            self._next_id += 1
            rid = self._next_id
        msg = request_message(method, params, rid)
        try:
            with trio.fail_after(timeout):
                if method == "tools/call" and self.drop is not None and self.drop():
                    return await self.resumed_call(msg, rid)
                response = await self.post(msg)
                try:
                    return await self._answer(response, rid)
                finally:
                    await response.close()
        except trio.TooSlowError:
            raise NoReply(
                f"{self.label}: no reply to request {rid!r} within {timeout:g} s"
            ) from None
        except (OSError, trio.BrokenResourceError) as exc:
            raise ServerGone(f"{self.label}: {type(exc).__name__}: {exc}") from None

    async def call_tool(self, name: str, arguments: object, *, timeout: float = 60.0) -> Reply:
        reply = await self.request("tools/call", tool_call_params(name, arguments), timeout=timeout)
        result = reply.get("result")
        if isinstance(result, dict) and result.get("isError"):
            self.stats.tool_errors += 1
        return reply

    async def _answer(self, response: HttpResponse, rid: RequestId) -> Reply:
        """The reply to ``rid`` in a JSON or SSE response (exactly one is a must)."""
        if not response.is_sse:
            reply = dict(json.loads(await response.body()))
            self._count(reply)
            return reply
        replies = [r async for r in self._stream_replies(response, rid, [])]
        return self._one(replies, rid)

    async def _stream_replies(
        self, response: HttpResponse, rid: RequestId, seen_ids: list[str]
    ) -> AsyncIterator[Reply]:
        """The messages of an SSE stream that answer ``rid``; ``seen_ids`` collects event ids."""
        async for event in response.events():
            if event.id is not None:
                if event.id in seen_ids:
                    self.violations.append(f"{self.label}: event id {event.id} delivered twice")
                seen_ids.append(event.id)
            if not event.data:
                continue
            message = json.loads(event.data)
            if isinstance(message, dict) and message.get("id") == rid and "method" not in message:
                yield message

    def _one(self, replies: list[Reply], rid: RequestId) -> Reply:
        if not replies:
            raise ServerGone(f"{self.label}: the stream of request {rid!r} ended without a reply")
        if len(replies) > 1:
            self.violations.append(
                f"{self.label}: request {rid!r} was answered {len(replies)} times"
            )
        self._count(replies[0])
        return replies[0]

    def _count(self, reply: Reply) -> None:
        self.stats.replies += 1
        if "error" in reply:
            self.stats.errors += 1

    async def resumed_call(self, msg: dict[str, object], rid: RequestId) -> Reply:
        """POST ``msg``, cut its SSE stream right after the priming event, resume it with
        ``GET`` + ``Last-Event-ID`` (sometimes cut again before any event, and resumed
        once more): the reply must come exactly once."""
        response = await self.post(msg)
        if not response.is_sse:
            try:
                return await self._answer(response, rid)
            finally:
                await response.close()
        seen: list[str] = []
        first: SseEvent | None = None
        async for event in response.events():
            first = event
            break
        await response.close(reset=True)
        self.resume.dropped += 1
        if first is None or first.id is None or first.data:
            self.violations.append(
                f"{self.label}: the POST stream did not start with a priming event"
            )
            raise ServerGone(f"{self.label}: no priming event to resume from")
        seen.append(first.id)
        if self.redrop is not None and self.redrop():
            again = await self._get(first.id)
            await again.close(reset=True)
            self.resume.redropped += 1
        resumed = await self._get(first.id)
        try:
            replies = [r async for r in self._stream_replies(resumed, rid, seen)]
        finally:
            await resumed.close()
        return self._one(replies, rid)

    async def _get(self, last_event_id: str) -> HttpResponse:
        self.stats.sent += 1
        self.resume.resumed += 1
        headers = {**self._headers(SSE), "last-event-id": last_event_id}
        response = await http_exchange(self.host, self.port, "GET", self.path, headers)
        await self._check_session(response)
        if response.status != 200:
            text = (await response.body())[:200]
            await response.close()
            self.violations.append(
                f"{self.label}: resuming after {last_event_id} answered {response.status}: {text!r}"
            )
            raise ServerGone(f"{self.label}: the stream could not be resumed")
        return response

    async def vanish_mid_call(self, message: object, *, read_headers: bool, reset: bool) -> None:
        """POST ``message`` and drop the connection without waiting for the answer (after its
        headers, or right after sending); the session is left behind, never deleted."""
        self.stats.sent += 1
        body = json.dumps(message).encode()
        stream = await trio.open_tcp_stream(self.host, self.port)
        lines = [f"POST {self.path} HTTP/1.1", f"host: {self.host}:{self.port}"]
        lines += [f"{k}: {v}" for k, v in self._headers().items()]
        lines += ["content-type: application/json", f"content-length: {len(body)}"]
        try:
            await stream.send_all("\r\n".join(lines).encode() + b"\r\n\r\n" + body)
            if read_headers:
                with trio.move_on_after(10):
                    await stream.receive_some(READ_SIZE)
        except (trio.BrokenResourceError, OSError):
            pass
        if reset:
            _reset_on_close(stream)
        await trio.aclose_forcefully(stream)
        self._ended = True

    async def delete(self) -> int:
        """End the session (DELETE); the status."""
        self.stats.sent += 1
        response = await http_exchange(self.host, self.port, "DELETE", self.path, self._headers())
        await response.close()
        self._ended = True
        return response.status
