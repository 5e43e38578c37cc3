"""The TCP transport of ``memtrio serve``: newline-delimited JSON-RPC, one session a connection.

A connection is framed exactly like stdio (one JSON-RPC message or batch per
line, ``actors.stdio.transport_children``), so it gets the same resilience: a
bad line is answered -32700 and the session goes on, an oversized line -32600.
With a token (``Listen.token``), the first line must be the token, or ``Bearer
<token>``; a connection that fails to present it gets one JSON-RPC error line
and is closed. A connection over ``[serve] max_connections`` gets one error
line and is closed.

Each connection runs under its own supervisor (`Connections.run`): a
connection whose actors keep crashing is closed alone; a peer that goes away
ends its own session only (the answers of its running calls are dropped).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import trio

from ...protocol import jsonrpc
from ...protocol.plural import plural
from ...supervisors.context import AppContext
from ...supervisors.errors import UserError
from ...supervisors.supervisor import ChildContext, ChildSpec
from ..session_state import SessionState
from ..stdio import transport_children
from .auth import BearerAuth
from .connections import Connection, Connections
from .listen import Listen

# JSON-RPC "server error" code of the lines a refused connection gets.
REFUSED = -32000
# Seconds a client has to send its token line, and the longest token line read.
AUTH_TIMEOUT = 10.0
AUTH_LINE_LIMIT = 4096
# Seconds to write the refusal line to a connection that is turned away.
REFUSAL_TIMEOUT = 2.0


class PrefixedStream(trio.abc.ReceiveStream):
    """A receive stream that first yields ``prefix`` (read past the token line), then ``stream``."""

    def __init__(self, prefix: bytes, stream: trio.abc.ReceiveStream) -> None:
        self._prefix = prefix
        self._stream = stream

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self._prefix:
            size = len(self._prefix) if max_bytes is None else max_bytes
            data, self._prefix = self._prefix[:size], self._prefix[size:]
            return data
        return await self._stream.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self._stream.aclose()


class ListenError(UserError):
    """The listener cannot bind its address (in use, not an address of this machine)."""


async def open_listeners(listen: Listen) -> list[trio.SocketListener]:
    """The bound TCP listeners of ``listen``.

    Error handling: raises `ListenError` (one line, exit 1) when the address cannot be bound.
    """
    try:
        return await trio.open_tcp_listeners(listen.port, host=listen.host)
    except OSError as exc:
        why = exc.strerror or str(exc)
        raise ListenError(
            f"cannot listen on {listen.host}:{listen.port}: {why[0].lower()}{why[1:]}; "
            "is another memtrio serve running there? choose another --bind (port 0: any free port)"
        ) from None


def limit_message(limit: int) -> str:
    return (
        f"Server error: the server is at its limit of {plural(limit, 'connection')} "
        "([serve] max_connections); try again later"
    )


async def refuse(stream: trio.SocketStream, message: str) -> None:
    """Send one JSON-RPC error line (id null) and close ``stream``; never raises."""
    with trio.move_on_after(REFUSAL_TIMEOUT):
        try:
            await stream.send_all(jsonrpc.error_response(None, REFUSED, message))
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
    await trio.aclose_forcefully(stream)


async def read_first_line(stream: trio.SocketStream) -> tuple[bytes | None, bytes]:
    """The first line (without its newline) and whatever followed it; None if the peer sent
    no complete line in time (or one longer than `AUTH_LINE_LIMIT`)."""
    buffer = bytearray()
    with trio.move_on_after(AUTH_TIMEOUT):
        while b"\n" not in buffer and len(buffer) <= AUTH_LINE_LIMIT:
            try:
                data = await stream.receive_some(AUTH_LINE_LIMIT)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                data = b""
            if not data:
                break
            buffer += data
    line, newline, rest = bytes(buffer).partition(b"\n")
    if not newline or len(line) > AUTH_LINE_LIMIT:
        return None, b""
    return line, rest


def peer_name(stream: trio.SocketStream) -> str:
    try:
        address = stream.socket.getpeername()
    except OSError:
        return "unknown"
    host, port = address[0], address[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def session_children(
    app: AppContext,
    conn: Connection,
    incoming: trio.abc.ReceiveStream,
    outgoing: trio.abc.SendStream,
) -> list[ChildSpec]:
    """The reader, Session and writer of one network connection (a shared-server session:
    no repository until the client names one; its end closes this connection only)."""
    state = SessionState(
        name=f"{conn.id}.session", root=None, root_source="none", on_close=conn.closed.set
    )
    return transport_children(
        app, incoming, outgoing, name=conn.id, session_state=state, on_peer_gone=conn.closed.set
    )


class TcpServer:
    """The connections one TCP listener admits and serves."""

    def __init__(self, app: AppContext, listen: Listen, connections: Connections) -> None:
        self.app = app
        self.connections = connections
        self.auth = BearerAuth(listen.token)
        self.stopping = False
        self.serving: dict[str, Connection] = {}
        self.admitting: set[trio.CancelScope] = set()

    async def handle(self, stream: trio.SocketStream) -> None:
        """Serve one accepted connection until its session ends; never raises."""
        rest: bytes | None = None
        with trio.CancelScope() as scope:
            self.admitting.add(scope)
            try:
                rest = await self.admit(stream)
            finally:
                self.admitting.discard(scope)
        if rest is None or scope.cancelled_caught or self.stopping:
            await trio.aclose_forcefully(stream)
            return
        conn = self.connections.open("tcp", peer_name(stream))
        self.serving[conn.id] = conn
        incoming = PrefixedStream(rest, stream) if rest else stream
        try:
            await self.connections.run(conn, session_children(self.app, conn, incoming, stream))
        finally:
            self.serving.pop(conn.id, None)
            await trio.aclose_forcefully(stream)

    async def admit(self, stream: trio.SocketStream) -> bytes | None:
        """Check the limit and the token: the bytes read past the token line, or None when
        the connection was refused (it got its error line)."""
        peer = peer_name(stream)
        if self.connections.full:
            self.connections.refuse("tcp", peer, "max_connections")
            await refuse(stream, limit_message(self.connections.limit))
            return None
        rest = b""
        if self.auth.required:
            line, rest = await read_first_line(stream)
            if line is None or not self.auth.check_line(line):
                self.connections.refuse("tcp", peer, "no token" if line is None else "bad token")
                await refuse(
                    stream,
                    "Unauthorized: the first line of the connection must be the bearer token "
                    "(the token alone, or 'Bearer <token>'); "
                    + ("none was sent" if line is None else "it was wrong"),
                )
                return None
            if self.connections.full:  # others got in while this one sent its token
                self.connections.refuse("tcp", peer, "max_connections")
                await refuse(stream, limit_message(self.connections.limit))
                return None
        return rest

    def stop(self) -> None:
        """End every connection: those being admitted at once, the others gracefully."""
        self.stopping = True
        for scope in list(self.admitting):
            scope.cancel()
        for conn in list(self.serving.values()):
            conn.closed.set()


def tcp_listener(
    app: AppContext,
    listen: Listen,
    connections: Connections,
    *,
    name: str = "tcp",
    on_listening: Callable[[str, int], None] | None = None,
) -> ChildSpec:
    """The root's child serving MCP on ``listen.host:listen.port`` over TCP.

    It records its address in ``connections.listeners``, registers the
    ``transports`` section of ``server_status`` and calls ``on_listening(host,
    port)`` once bound (port 0: the port the system chose).

    Cancellation: on a graceful stop it stops accepting, then ends every
    connection it serves (each session drains its running calls within
    ``[server] shutdown_grace``) before it returns.
    """

    async def start(
        ctx: ChildContext, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        server = TcpServer(app, listen, connections)
        listeners = await open_listeners(listen)
        bound = listeners[0].socket.getsockname()
        host, port = str(bound[0]), int(bound[1])
        with connections.listening(app.status_sections, name, listen.url(port)):
            try:
                async with trio.open_nursery() as handlers:
                    async with trio.open_nursery() as acceptor:
                        acceptor.start_soon(
                            partial(trio.serve_listeners, handler_nursery=handlers),
                            server.handle,
                            listeners,
                        )
                        if on_listening is not None:
                            on_listening(host, port)
                        task_status.started()
                        await ctx.shutdown.wait()
                        acceptor.cancel_scope.cancel()
                    server.stop()
            finally:
                server.stop()
                for listener in listeners:
                    await trio.aclose_forcefully(listener)

    return ChildSpec(
        name,
        start,
        shutdown=app.config.server.shutdown_grace + 10.0,
        why="accepts TCP connections; each runs under its own supervisor, isolated from the others",
    )
