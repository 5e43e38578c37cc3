"""The WebSocket transport of ``memtrio serve``: one JSON-RPC message per text frame.

Each connection is one MCP session, run like a TCP connection (its own
supervisor, ``Connections.run``). `FrameStream` presents the connection to the
line-framed reader and writer of ``actors.stdio``: an incoming text frame
becomes one line, an outgoing line one text frame (without its newline; lines
are never batched into one frame). So a WebSocket session has the resilience of
every other transport: a malformed frame is answered -32700, a frame over
``[server] request_limit`` -32600 (Oversized), and the session goes on; a
binary frame is answered -32700 too.

The handshake is where the connection is checked: ``Authorization: Bearer``
(401 with ``WWW-Authenticate`` when wrong or missing), the ``Origin`` a browser
sends (403 unless loopback or in ``[serve] allowed_origins``) and the
connection limit (503). The subprotocol ``mcp`` is accepted when offered. With
a certificate the listener serves ``wss://``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from urllib.parse import urlsplit

import trio
from trio_websocket import (
    ConnectionClosed,
    WebSocketConnection,
    WebSocketRequest,
    wrap_server_stream,
)

from ...protocol import jsonrpc
from ...protocol.plural import plural
from ...supervisors import trace
from ...supervisors.context import AppContext
from ...supervisors.supervisor import ChildContext, ChildSpec
from . import vouch
from .accept import gate, serve_gated
from .admission import Admission, peer_key
from .auth import CHALLENGE, BearerAuth
from .bind import SamePort
from .connections import Connection, Connections
from .listen import Listen, is_loopback
from .tcp import limit_message, session_children
from .tls import server_ssl_context

SUBPROTOCOL = "mcp"
# The WebSocket library holds a message whole before handing it over: a frame up to
# this many times the request limit is answered -32600 (Oversized) and the session
# goes on; a longer one closes the connection with 1009 (Message Too Big).
FRAME_HOLD_FACTOR = 2
RECEIVE_BUFFER = 65536


class FrameStream(trio.abc.Stream):
    """A WebSocket connection as the byte stream of lines the stdio reader and writer use.

    Receiving: each text frame is one line (a newline inside the frame, only
    valid as JSON whitespace, becomes a tab, which keeps both valid and invalid
    JSON as they were); a binary or empty frame is answered -32700 here. The end
    of the connection is EOF. Sending: each line is one text frame.
    """

    def __init__(self, ws: WebSocketConnection, name: str) -> None:
        self._ws = ws
        self._name = name
        self._buffer = b""

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        while not self._buffer:
            try:
                message = await self._ws.get_message()
            except ConnectionClosed:
                return b""
            if isinstance(message, bytes):
                await self._parse_error(f"a binary frame ({plural(len(message), 'byte')})")
                continue
            frame = message.encode("utf-8").replace(b"\n", b"\t")
            if not frame.strip():
                await self._parse_error("an empty text frame")
                continue
            self._buffer = frame + b"\n"
        size = len(self._buffer) if max_bytes is None else max_bytes
        data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data

    async def _parse_error(self, what: str) -> None:
        trace.event(self._name, "bad_frame", level="info", frame=what)
        message = (
            f"Parse error: {what}; send each JSON-RPC message (or batch) as one UTF-8 text frame"
        )
        try:
            await self._ws.send_message(
                jsonrpc.error_response(None, jsonrpc.PARSE_ERROR, message).decode().rstrip("\n")
            )
        except ConnectionClosed:
            pass

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        """Send each line of ``data`` as one text frame.

        Error handling: a closed connection raises `trio.BrokenResourceError`
        (the writer then reports the peer gone).
        """
        for line in bytes(data).split(b"\n"):
            if not line:
                continue
            try:
                await self._ws.send_message(line.decode("utf-8"))
            except ConnectionClosed as exc:
                raise trio.BrokenResourceError(f"the WebSocket is closed: {exc}") from None

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def send_eof(self) -> None:
        await self._ws.aclose()

    async def aclose(self) -> None:
        await self._ws.aclose()


def header(request: WebSocketRequest, name: bytes) -> bytes | None:
    for key, value in request.headers:
        if key.lower() == name:
            return value
    return None


def origin_allowed(origin: bytes | None, allowed: tuple[str, ...]) -> bool:
    """Whether a browser page at ``origin`` may connect (no Origin: not a browser, allowed)."""
    if origin is None:
        return True
    text = origin.decode("latin-1").strip()
    if text in allowed or "*" in allowed:
        return True
    host = urlsplit(text).hostname
    return host is not None and is_loopback(host)


def peer_of(request: WebSocketRequest) -> str:
    """The peer's `peer_key` (a plain connection's stream is the listener's `GatedStream`,
    whose ``repr`` is just that)."""
    remote = request.remote
    if isinstance(remote, str):
        return remote
    return peer_key(remote.address, remote.port)


class WsServer:
    """The connections one WebSocket listener admits and serves."""

    def __init__(
        self, app: AppContext, listen: Listen, connections: Connections, admission: Admission
    ) -> None:
        self.app = app
        self.frame_limit = FRAME_HOLD_FACTOR * app.config.server.request_limit
        self.listen = listen
        self.connections = connections
        self.admission = admission
        self.auth = BearerAuth(listen.token, listen.grants, listen.allowed_roots)
        self.stopping = False
        self.serving: dict[str, Connection] = {}
        self.drained = trio.Event()  # set once stopping and no session is left

    async def serve_stream(self, stream: trio.abc.Stream) -> None:
        """One accepted connection: wait for its opening handshake, then `handle` it.

        Cancellation: a connection that sends no complete handshake is pending until
        its listener shuts it down (``[serve] auth_timeout`` from accept, or evicted),
        which cancels this."""
        async with trio.open_nursery() as nursery:
            request = await wrap_server_stream(
                nursery,
                stream,
                max_message_size=self.frame_limit,
                receive_buffer_size=RECEIVE_BUFFER,
            )
            await self.handle(request)
            nursery.cancel_scope.cancel()

    async def handle(self, request: WebSocketRequest) -> None:
        """Check the handshake, then serve the session until it ends; never raises.

        Until its handshake passes the checks the connection is pending in the
        listener's `Admission` (its pool, and ``[serve] auth_timeout`` from accept)."""
        if not await self.admit(request):
            return
        self.admission.authorise_peer(peer_of(request))
        subprotocol = SUBPROTOCOL if SUBPROTOCOL in request.proposed_subprotocols else None
        try:
            ws = await request.accept(subprotocol=subprotocol)
        except ConnectionClosed:
            return
        conn = self.connections.open("ws", peer_of(request))
        self.serving[conn.id] = conn
        stream = FrameStream(ws, conn.id)
        grant = self.auth.grant_for_header(header(request, b"authorization"))  # admitted: one
        try:
            children = session_children(self.app, conn, stream, stream, grant)
            await self.connections.run(conn, children)
        finally:
            self.serving.pop(conn.id, None)
            if self.stopping and not self.serving:
                self.drained.set()
            with trio.move_on_after(2.0) as scope:
                scope.shield = True
                await ws.aclose()

    async def admit(self, request: WebSocketRequest) -> bool:
        """Whether the handshake may proceed; a refused one got its HTTP answer."""
        peer = peer_of(request)
        refusal: tuple[int, list[tuple[bytes, bytes]], str] | None = None
        if self.stopping:
            refusal = (503, [], "the server is shutting down")
        elif not self.auth.check_header(header(request, b"authorization")):
            given = header(request, b"authorization") is not None
            refusal = (
                401,
                [(b"WWW-Authenticate", CHALLENGE.encode())],
                "Unauthorized: send 'Authorization: Bearer <token>'"
                + ("; the token was wrong" if given else ""),
            )
        elif not origin_allowed(header(request, b"origin"), self.listen.allowed_origins):
            refusal = (
                403,
                [],
                "Forbidden: this Origin is not allowed; add it to [serve] allowed_origins",
            )
        elif self.connections.full:
            refusal = (503, [(b"Retry-After", b"5")], limit_message(self.connections.limit))
        if refusal is None:
            return True
        status, headers, why = refusal
        self.connections.refuse("ws", peer, f"{status} {why}")
        try:
            await request.reject(
                status,
                extra_headers=[(b"Content-Type", b"text/plain; charset=utf-8"), *headers],
                body=why.encode() + b"\n",
            )
        except ConnectionClosed:
            pass
        return False

    def stop(self) -> None:
        """End every session gracefully (`drained` is set once all have ended)."""
        self.stopping = True
        for conn in list(self.serving.values()):
            conn.closed.set()
        if not self.serving:
            self.drained.set()


def ws_listener(
    app: AppContext,
    listen: Listen,
    connections: Connections,
    *,
    name: str = "ws",
    on_listening: Callable[[str, int], None] | None = None,
) -> ChildSpec:
    """The root's child serving MCP over WebSocket (``wss`` with a certificate) on
    ``listen.host:listen.port``.

    Like `tcp_listener`: records its address, registers the ``transports``
    section of ``server_status``, calls ``on_listening(host, port)`` once bound.

    Error handling: a certificate or key that cannot be loaded raises
    `ConfigError` here, before anything starts. Cancellation: a graceful stop
    ends every connection (each session drains its running calls) before it
    returns.
    """
    ssl_context = server_ssl_context(listen)
    same_port = SamePort(listen.host, listen.port, listen.bind_hint)  # kept across restarts

    async def start(
        ctx: ChildContext, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        admission = connections.admission(
            name, unauth_limit=listen.unauth_limit, auth_timeout=listen.auth_timeout
        )
        server = WsServer(app, listen, connections, admission)
        bound_listeners = await same_port.open()
        listeners = gate(
            bound_listeners, admission, ssl_context, vouch.authorization_header(server.auth)
        )
        bound = listeners[0].socket.getsockname()
        host, port = str(bound[0]), int(bound[1])
        with connections.listening(app.status_sections, name, listen.url(port)):
            try:
                async with trio.open_nursery() as handlers:
                    async with trio.open_nursery() as acceptor:
                        acceptor.start_soon(admission.expire)
                        await acceptor.start(
                            partial(serve_gated, handler_nursery=handlers),
                            server.serve_stream,
                            listeners,
                        )
                        if on_listening is not None:
                            on_listening(host, port)
                        task_status.started()
                        await ctx.shutdown.wait()
                        acceptor.cancel_scope.cancel()
                    server.stop()
                    await server.drained.wait()
                    # What is left: handshakes in progress, closing handshakes of ended
                    # sessions; a peer that does not answer them must not delay the stop.
                    handlers.cancel_scope.cancel()
            finally:
                server.stop()
                for listener in listeners:
                    await trio.aclose_forcefully(listener)

    return ChildSpec(
        name,
        start,
        shutdown=app.config.server.shutdown_grace + 10.0,
        why="accepts WebSocket connections; each runs under its own supervisor, isolated",
    )
