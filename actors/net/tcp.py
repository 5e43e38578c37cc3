"""The TCP transport of ``memtrio serve``: newline-delimited JSON-RPC, one session a connection.

A connection is framed exactly like stdio (one JSON-RPC message or batch per
line, ``actors.stdio.transport_children``), so it gets the same resilience: a
bad line is answered -32700 and the session goes on, an oversized line -32600.
With a token (``Listen.token``), the first line must be the token, or ``Bearer
<token>``, within ``[serve] auth_timeout`` seconds of the accept; a connection
that fails to present it gets one JSON-RPC error line and is closed. Until then
it is one of the listener's pending connections (``actors.net.accept``: at
most ``[serve] unauth_limit`` of them, the oldest evicted by a new one). A
connection over ``[serve] max_connections`` gets one error line and is closed.

Each connection runs under its own supervisor (`Connections.run`): a
connection whose actors keep crashing is closed alone; a peer that goes away
ends its own session only (the answers of its running calls are dropped).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial

import trio

from ...protocol import jsonrpc
from ...protocol.plural import plural
from ...supervisors.context import AppContext
from ...supervisors.grants import Grant
from ...supervisors.supervisor import ChildContext, ChildSpec
from ..session_state import SessionState
from ..stdio import transport_children
from . import vouch
from .accept import GatedStream, gate, serve_gated
from .auth import BearerAuth
from .bind import SamePort
from .connections import Connection, Connections
from .listen import Listen

# JSON-RPC "server error" code of the lines a refused connection gets.
REFUSED = -32000
# The longest token line read (the deadline is [serve] auth_timeout, `Listen.auth_timeout`).
AUTH_LINE_LIMIT = 4096
# Seconds to write the refusal line to a connection that is turned away.
REFUSAL_TIMEOUT = 2.0
NO_PROOF = (
    "Unauthorized: this endpoint serves memtrio mcp children of its home only, "
    "which prove they hold the secret of its runtime file"
)

# A listener's own admission check in place of the token line (the attach endpoint's
# proof, ``actors.net.proof``): the bytes read past it, or None to refuse the connection.
Handshake = Callable[[GatedStream], Awaitable[bytes | None]]


class PrefixedStream(trio.abc.ReceiveStream):
    """A receive stream that first yields ``prefix`` (read past the token line), then ``stream``."""

    def __init__(self, prefix: bytes, stream: trio.abc.ReceiveStream) -> None:
        self._prefix = prefix
        self._stream = stream

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        if self._prefix:
            size = len(self._prefix) if max_bytes is None else max_bytes
            data, self._prefix = self._prefix[:size], self._prefix[size:]
            return data
        return await self._stream.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self._stream.aclose()


def limit_message(limit: int) -> str:
    return (
        f"Server error: the server is at its limit of {plural(limit, 'connection')} "
        "([serve] max_connections); try again later"
    )


async def refuse(stream: trio.abc.Stream, message: str) -> None:
    """Send one JSON-RPC error line (id null) and close ``stream``; never raises."""
    with trio.move_on_after(REFUSAL_TIMEOUT):
        try:
            await stream.send_all(jsonrpc.error_response(None, REFUSED, message))
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
    await trio.aclose_forcefully(stream)


async def read_first_line(
    stream: trio.abc.ReceiveStream, timeout: float
) -> tuple[bytes | None, bytes]:
    """The first line (without its newline) and whatever followed it; None if the peer sent
    no complete line within ``timeout`` seconds (or one longer than `AUTH_LINE_LIMIT`)."""
    buffer = bytearray()
    with trio.move_on_after(timeout):
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


def peer_name(stream: GatedStream) -> str:
    return stream.ticket.peer


def session_children(
    app: AppContext,
    conn: Connection,
    incoming: trio.abc.ReceiveStream,
    outgoing: trio.abc.SendStream,
    grant: Grant | None,
) -> list[ChildSpec]:
    """The reader, Session and writer of one network connection (a shared-server session:
    no repository until the client names one, within ``grant``, what its token opens; its
    end closes this connection only)."""
    state = SessionState(
        name=f"{conn.id}.session",
        root=None,
        root_source="none",
        on_close=conn.closed.set,
        grant=grant,
    )
    return transport_children(
        app, incoming, outgoing, name=conn.id, session_state=state, on_peer_gone=conn.closed.set
    )


class TcpServer:
    """The connections one TCP listener admits and serves."""

    def __init__(
        self,
        app: AppContext,
        listen: Listen,
        connections: Connections,
        handshake: Handshake | None = None,
    ) -> None:
        self.app = app
        self.listen = listen
        self.connections = connections
        self.auth = BearerAuth(listen.token, listen.grants, listen.allowed_roots)
        self.handshake = handshake
        self.stopping = False
        self.serving: dict[str, Connection] = {}
        self.admitting: set[trio.CancelScope] = set()

    async def handle(self, stream: GatedStream) -> None:
        """Serve one accepted connection until its session ends; never raises."""
        admitted: tuple[bytes, Grant] | None = None
        with trio.CancelScope() as scope:
            self.admitting.add(scope)
            try:
                admitted = await self.admit(stream)
            finally:
                self.admitting.discard(scope)
        if admitted is None or scope.cancelled_caught or self.stopping:
            await trio.aclose_forcefully(stream)
            return
        conn = self.connections.open("tcp", peer_name(stream))
        self.serving[conn.id] = conn
        rest, grant = admitted
        incoming = PrefixedStream(rest, stream) if rest else stream
        try:
            children = session_children(self.app, conn, incoming, stream, grant)
            await self.connections.run(conn, children)
        finally:
            self.serving.pop(conn.id, None)
            await trio.aclose_forcefully(stream)

    async def admit(self, stream: GatedStream) -> tuple[bytes, Grant] | None:
        """Check the limit and the token (or the attach proof): the bytes read past the token
        line and the grant the token opens, or None when the connection was refused (it got
        its error line). Until then the connection is pending in its listener's `Admission`
        (its pool and deadline)."""
        peer = peer_name(stream)
        if self.connections.full:
            self.connections.refuse("tcp", peer, "max_connections")
            await refuse(stream, limit_message(self.connections.limit))
            return None
        rest = b""
        grant = self.auth.grant_for_line(b"")  # auth off (or attach): the open grant
        if self.handshake is not None:
            proven = await self.handshake(stream)
            if proven is None:
                if stream.ticket.shut_down:
                    return None  # evicted or past [serve] auth_timeout: counted by the listener
                self.connections.refuse("tcp", peer, "no proof")
                await refuse(stream, NO_PROOF)
                return None
            rest = proven
        elif self.auth.required:
            line, rest = await read_first_line(stream, self.listen.auth_timeout)
            if line is None and stream.ticket.shut_down:
                return None  # evicted or past [serve] auth_timeout: counted by the listener
            grant = self.auth.grant_for_line(line) if line is not None else None
            if line is None or grant is None:
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
        assert grant is not None
        stream.ticket.authorise()
        return rest, grant

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
    handshake: Handshake | None = None,
    shows: Callable[[int], vouch.Vouch] | None = None,
    attach: bool = False,
) -> ChildSpec:
    """The root's child serving MCP on ``listen.host:listen.port`` over TCP (``attach``:
    the attach endpoint, with its own small pool of pending connections and the
    descriptor reserve, see ``actors.net.accept``).

    It records its address in ``connections.listeners``, registers the
    ``transports`` section of ``server_status`` and calls ``on_listening(host,
    port)`` once bound (port 0: the port the system chose). ``handshake``, when
    given, admits a connection instead of the token line; ``shows(port)`` is then what
    a newcomer's first bytes must show to displace a pending connection (without it:
    the token line, `vouch.first_line`).

    A restart binds the port of the incarnation before (`SamePort`).

    Cancellation: on a graceful stop it stops accepting, then ends every
    connection it serves (each session drains its running calls within
    ``[server] shutdown_grace``) before it returns.
    """
    same_port = SamePort(listen.host, listen.port, listen.bind_hint)

    async def start(
        ctx: ChildContext, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        server = TcpServer(app, listen, connections, handshake)
        admission = connections.admission(
            name, unauth_limit=listen.unauth_limit, auth_timeout=listen.auth_timeout, attach=attach
        )
        bound_listeners = await same_port.open()
        bound = bound_listeners[0].socket.getsockname()
        host, port = str(bound[0]), int(bound[1])
        shown = shows(port) if shows is not None else vouch.first_line(server.auth)
        listeners = gate(bound_listeners, admission, vouch=shown)
        with connections.listening(app.status_sections, name, listen.url(port)):
            try:
                async with trio.open_nursery() as handlers:
                    async with trio.open_nursery() as acceptor:
                        acceptor.start_soon(admission.expire)
                        acceptor.start_soon(
                            partial(serve_gated, handler_nursery=handlers), server.handle, listeners
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
