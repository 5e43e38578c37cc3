"""The HTTP pieces of the Streamable HTTP transport: requests, refusals, media types,
Origin checks, bodies with a size limit, SSE events (used by ``actors.net.http_asgi``)."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import msgspec
import trio

from ...protocol import jsonrpc, mcp

Scope = MutableMapping[str, Any]
Event = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Event]]
Send = Callable[[Event], Awaitable[None]]

PATH = "/mcp"
# The reconnection delay (ms) a priming event tells the client (SSE ``retry``).
RETRY_MS = 1000
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
# Characters of a client's header value an error message quotes.
SHOWN = 80
# A Content-Length as memtrio reads it: ASCII digits (more than 18 is over any limit).
DECLARED_LENGTH = re.compile(r"[0-9]+")
# Session not found (what the official SDKs answer with their 404).
SESSION_NOT_FOUND = -32001
SERVER_ERROR = -32000
# The answer of a JSON POST whose request the client cancelled (LSP's RequestCancelled).
REQUEST_CANCELLED = -32800
ALLOW = "GET, POST, DELETE, OPTIONS"
CORS_HEADERS = "content-type, authorization, mcp-session-id, mcp-protocol-version, last-event-id"


class Refusal(Exception):
    """An HTTP error answer: status, JSON-RPC code and message (and extra headers)."""

    def __init__(
        self,
        status: int,
        message: str,
        code: int = SERVER_ERROR,
        rid: jsonrpc.Id = None,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.code, self.rid, self.headers = (
            status,
            message,
            code,
            rid,
            headers,
        )


class Disconnected(Exception):
    """The client went away while its request was read."""


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]
    peer: str

    @classmethod
    def of(cls, scope: Scope) -> Request:
        headers: dict[str, str] = {}
        for raw_name, raw_value in scope.get("headers", ()):
            name = raw_name.decode("latin-1").lower()
            value = raw_value.decode("latin-1")
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        client = scope.get("client") or ("?", 0)
        return cls(scope["method"].upper(), scope["path"], headers, f"{client[0]}:{client[1]}")

    def header(self, name: str) -> str | None:
        return self.headers.get(name)

    @property
    def has_body(self) -> bool:
        length = self.header("content-length")
        chunked = self.header("transfer-encoding") is not None
        return chunked or (length is not None and length.strip() not in ("", "0"))


class BodyWatch:
    """A request's ASGI ``receive`` that notes whether the request's body was read to its
    end (``read``).

    A response sent before the body was read (a refusal: wrong token, wrong origin, a body
    too large) makes hypercorn close the connection once the rest of the request arrives.
    Such a response says so (`closing`): a keep-alive client would otherwise send its next
    request on that connection and get "server disconnected" instead of an answer.
    """

    def __init__(self, receive: Receive, request: Request) -> None:
        self._receive = receive
        self.read = not request.has_body

    async def __call__(self) -> Event:
        message = await self._receive()
        if message.get("type") == "http.request" and not message.get("more_body", False):
            self.read = True
        return message

    def closing(self) -> list[tuple[str, str]]:
        """The headers of a response sent now: ``Connection: close`` while the body is unread."""
        return [] if self.read else [("connection", "close")]


def shown(value: str) -> str:
    """A client's header value quoted in a message: ``repr``, at most `SHOWN` characters."""
    if len(value) > SHOWN:
        return repr(value[:SHOWN]) + f" (and {len(value) - SHOWN} more characters)"
    return repr(value)


def media(accept: str | None) -> tuple[bool, bool]:
    """(accepts JSON, accepts SSE) from an ``Accept`` header (absent: both)."""
    if accept is None:
        return True, True
    types = {part.split(";")[0].strip().lower() for part in accept.split(",")}
    anything = "*/*" in types
    json_ok = anything or "application/json" in types or "application/*" in types
    sse_ok = anything or "text/event-stream" in types or "text/*" in types
    return json_ok, sse_ok


def wants_sse(accept: str | None, methods: list[str]) -> bool:
    """The reply shape of a POST carrying requests ``methods``.

    The rule: a client that accepts only one of the two gets that one; one that
    accepts both gets an SSE stream when a request is a ``tools/call`` (it may run
    long, and a stream survives a dropped connection: the client resumes it with
    ``Last-Event-ID``) and plain JSON otherwise (initialize, lists, ping: instant).
    """
    json_ok, sse_ok = media(accept)
    if not json_ok:
        return True
    if not sse_ok:
        return False
    return "tools/call" in methods


def origin_allowed(origin: str, allowed: tuple[str, ...]) -> bool:
    """Whether a browser ``Origin`` may use the server (DNS-rebinding protection)."""
    if origin in allowed:
        return True
    try:
        parts = urlsplit(origin)
        host = parts.hostname
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and host is not None and host in LOOPBACK_HOSTS


async def respond(
    send: Send,
    status: int,
    body: bytes = b"",
    headers: list[tuple[str, str]] | None = None,
    content_type: str | None = "application/json",
) -> None:
    """Send a whole response."""
    raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers or ()]
    if body and content_type:
        raw.append((b"content-type", content_type.encode()))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def sse_event(event_id: str, data: bytes) -> bytes:
    """One SSE event (``data`` is one JSON text; empty: a priming event)."""
    if not data:
        return f"id: {event_id}\nretry: {RETRY_MS}\ndata: \n\n".encode()
    return b"".join((f"id: {event_id}\nevent: message\ndata: ".encode(), data, b"\n\n"))  # one copy


async def read_body(receive: Receive, limit: int, declared: str | None) -> bytes:
    """The request body, refused (413) past ``limit`` bytes without reading further."""
    too_big = Refusal(
        413,
        f"Request body exceeds the limit of {limit} bytes ([server] request_limit); "
        "it was not read",
        jsonrpc.INVALID_REQUEST,
    )
    length = DECLARED_LENGTH.fullmatch(declared.strip()) if declared is not None else None
    if length is not None and (len(length[0]) > 18 or int(length[0]) > limit):
        raise too_big
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise Disconnected
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise too_big
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def watch_disconnect(receive: Receive, scope: trio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()


def cancelled_ids(msg: jsonrpc.Decoded) -> list[jsonrpc.Id]:
    """The request ids a body's ``notifications/cancelled`` name."""
    elements = (
        [jsonrpc.decode_line(e, in_batch=True) for e in msg.elements]
        if isinstance(msg, jsonrpc.Batch)
        else [msg]
    )
    ids: list[jsonrpc.Id] = []
    for element in elements:
        if (
            isinstance(element, jsonrpc.Message)
            and element.method == "notifications/cancelled"
            and element.params is not None
        ):
            try:
                ids.append(mcp.cancelled_params.decode(element.params).requestId)
            except msgspec.DecodeError:
                continue
    return ids


async def lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
