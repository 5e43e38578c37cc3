"""The Streamable HTTP listener of ``memtrio serve --transport http`` (MCP 2025-11-25).

hypercorn's trio worker serves the ASGI application (``actors.net.http_asgi``)
inside the application's own trio program, as a child of the root supervisor.
Each MCP session runs under its own supervisor (``actors.net.http_session``,
`Connections.run`), so a crash inside one session never reaches another
session or the listener.

The listener accepts through ``actors.net.accept`` (`serve_asgi` runs hypercorn's
per-connection server on the connections it admits), so an HTTP connection is
counted from accept: it is pending until one of its requests shows the token
(`authorising`), at most ``[serve] auth_timeout`` seconds, in a pool of at most
``[serve] unauth_limit`` pending connections.

Shutdown: new sessions are refused (503), every session's supervisor stops (its
Session lets running calls finish within ``[server] shutdown_grace`` and the
router delivers their answers), the streams end, then hypercorn stops.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from functools import partial
from typing import Any

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio.tcp_server import TCPServer
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import ConnectionState
from hypercorn.utils import wrap_app

from ...supervisors import trace
from ...supervisors.context import AppContext
from ...supervisors.supervisor import PERMANENT, ChildContext, ChildSpec
from . import vouch
from .accept import GatedListener, gate, serve_gated
from .admission import Admission, peer_key
from .auth import BearerAuth
from .bind import SamePort
from .connections import Connections
from .http_asgi import Asgi, HttpServer
from .http_wire import PATH, Receive, Scope, Send
from .listen import Listen
from .throttle import Throttle

# Seconds hypercorn waits for open connections once the sessions have ended.
HYPERCORN_GRACE = 2.0
logger = logging.getLogger("memtrio.http")


def hypercorn_config(listen: Listen) -> HypercornConfig:
    """hypercorn's settings for ``listen`` (address, TLS; its logs go to ours)."""
    config = HypercornConfig()
    host = f"[{listen.host}]" if ":" in listen.host else listen.host
    config.bind = [f"{host}:{listen.port}"]
    if listen.tls_cert is not None and listen.tls_key is not None:
        config.certfile = str(listen.tls_cert)
        config.keyfile = str(listen.tls_key)
    config.accesslog = None
    config.errorlog = logger
    config.graceful_timeout = HYPERCORN_GRACE
    config.include_server_header = False
    config.ssl_handshake_timeout = listen.auth_timeout
    return config


async def serve_asgi(
    app: Asgi,
    config: HypercornConfig,
    listeners: Sequence[trio.abc.Listener[Any] | GatedListener],
    *,
    shutdown_trigger: Callable[[], Awaitable[object]],
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` with hypercorn's per-connection HTTP server (HTTP/1.1, and h2 over TLS)
    on the connections ``listeners`` accept, until ``shutdown_trigger`` returns; then
    let open connections finish within ``config.graceful_timeout`` seconds.

    hypercorn's own ``serve`` accepts on sockets it binds itself; this loop lets the
    listeners (`GatedListener`) count and refuse connections from accept.

    Error handling: a certificate that cannot be loaded raises (``ssl.SSLError``,
    ``OSError``) before anything is accepted.
    """
    wrapped = wrap_app(app, config.wsgi_max_body_size, "asgi")  # type: ignore[arg-type]  # our ASGI callables take plain mappings, hypercorn's TypedDicts
    context = WorkerContext(None)
    ssl_context = config.create_ssl_context()

    failures = Throttle()

    async def handle(stream: trio.abc.Stream) -> None:
        if ssl_context is not None:
            stream = trio.SSLStream(stream, ssl_context, server_side=True, https_compatible=True)
        await TCPServer(wrapped, config, context, ConnectionState({}), stream)  # type: ignore[arg-type]  # hypercorn annotates the stream as TLS; it serves any trio stream (plain: .socket)

    async def handle_alone(stream: trio.abc.Stream) -> None:
        """`handle` for a listener without a gate (`run_gated` does this for the others):
        a connection's failure ends that connection, never the listener."""
        try:
            await handle(stream)
        except Exception as exc:  # ExceptionGroup included; Cancelled is a BaseException
            if failures.due():
                trace.warning("http", "connection_error", error=f"{type(exc).__name__}: {exc}"[:300],
                              count=failures.count)  # fmt: skip
        finally:
            await trio.aclose_forcefully(stream)

    async with trio.open_nursery() as handlers:
        async with trio.open_nursery() as acceptor:
            if all(isinstance(listener, GatedListener) for listener in listeners):
                gated = [listener for listener in listeners if isinstance(listener, GatedListener)]
                await acceptor.start(partial(serve_gated, handler_nursery=handlers), handle, gated)
            else:
                await acceptor.start(
                    partial(trio.serve_listeners, handler_nursery=handlers), handle_alone, listeners
                )
            task_status.started()
            await shutdown_trigger()
            acceptor.cancel_scope.cancel()
        await context.terminated.set()
        handlers.cancel_scope.deadline = trio.current_time() + config.graceful_timeout


def authorising(app: Asgi, admission: Admission, auth: BearerAuth) -> Asgi:
    """``app``, marking a pending connection authorised by its first request to ``/mcp``
    that carries one of the tokens of ``auth`` (the single token or a ``[[serve.tokens]]``
    one; any request with auth off; never a CORS preflight), or by a dashboard API
    request (``/api/``) the dashboard answers with success.

    A pending connection's requests are `Admission.begin`/`done` brackets: it is not
    shut while one is being answered.
    """

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        client = scope.get("client") if scope["type"] == "http" else None
        ticket = admission.ticket_of(peer_key(*client[:2])) if client else None
        if ticket is None:
            await app(scope, receive, send)
            return
        path = str(scope.get("path", "")).rstrip("/")
        method = str(scope.get("method", "")).upper()
        if path == PATH and method != "OPTIONS":
            headers = {k.lower(): v for k, v in scope.get("headers", ())}
            if auth.check_header(headers.get(b"authorization")):
                ticket.authorise()
                await app(scope, receive, send)
                return
        dashboard_api = path == "/api" or path.startswith("/api/")

        async def watching(message: MutableMapping[str, Any]) -> None:
            if (
                dashboard_api
                and message["type"] == "http.response.start"
                and int(message.get("status", 500)) < 400
            ):
                ticket.authorise()
            await send(message)

        admission.begin(ticket)
        try:
            await app(scope, receive, watching)
        finally:
            admission.done(ticket)

    return wrapped


async def serve_http(
    ctx: ChildContext,
    *,
    app: AppContext,
    listen: Listen,
    connections: Connections,
    extra: Asgi | None = None,
    port: SamePort | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``listen`` until a graceful stop; record the bound URL in ``connections``
    (``port``: the listener's port across restarts, see `SamePort`).

    Error handling: failing to bind (address in use, bad certificate) raises, so
    the supervisor sees the listener fail to start; a failure inside one session
    ends that session only.
    """
    stopping = trio.Event()
    entry: dict[str, object] = {"transport": "http"}
    admission = connections.admission(
        "http", unauth_limit=listen.unauth_limit, auth_timeout=listen.auth_timeout
    )
    port = port or SamePort(listen.host, listen.port, listen.bind_hint)
    bound = await port.open()
    auth = BearerAuth(listen.token, listen.grants, listen.allowed_roots)
    # Under TLS (hypercorn's, after the gate) the first bytes show no token: no vouch.
    shows = None if listen.tls else vouch.authorization_header(auth)
    listeners = gate(bound, admission, vouch=shows)
    try:
        async with trio.open_nursery() as nursery:
            server = HttpServer(app, listen, connections, nursery, extra)
            serve = partial(
                serve_asgi,
                authorising(server, admission, auth),
                hypercorn_config(listen),
                listeners,
                shutdown_trigger=stopping.wait,
            )
            await nursery.start(serve)
            entry["url"] = listen.url(listeners[0].socket.getsockname()[1])
            connections.listeners.append(entry)
            nursery.start_soon(server.expire_idle)
            nursery.start_soon(admission.expire)
            trace.event("http", "listening", url=entry["url"], tls=listen.tls)
            task_status.started()
            await ctx.shutdown.wait()
            trace.event("http", "draining", sessions=len(server.sessions))
            with trio.CancelScope(shield=True):
                await server.drain(app.config.server.shutdown_grace)
            stopping.set()
            # hypercorn returns once its connections closed (within HYPERCORN_GRACE);
            # then the idle reaper and the pending connections' deadline are all that is left.
            await _wait_for(nursery, 2)
            nursery.cancel_scope.cancel()
    finally:
        if entry in connections.listeners:
            connections.listeners.remove(entry)
        for listener in listeners:
            await trio.aclose_forcefully(listener)


async def _wait_for(nursery: trio.Nursery, remaining: int) -> None:
    """Wait (at most `HYPERCORN_GRACE` + 1 s) until ``remaining`` tasks are left in ``nursery``."""
    with trio.move_on_after(HYPERCORN_GRACE + 1.0):
        while len(nursery.child_tasks) > remaining:
            await trio.sleep(0.01)


def http_listener(
    app: AppContext, listen: Listen, connections: Connections, extra: Asgi | None = None
) -> ChildSpec:
    """The root's child serving Streamable HTTP on ``listen`` (and ``extra``, the dashboard,
    on every other path); registers ``server_status``'s ``transports`` section."""
    app.status_sections["transports"] = connections.snapshot
    grace = app.config.server.shutdown_grace
    port = SamePort(listen.host, listen.port, listen.bind_hint)  # kept across restarts

    async def start(
        ctx: ChildContext, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        await serve_http(
            ctx,
            app=app,
            listen=listen,
            connections=connections,
            extra=extra,
            port=port,
            task_status=task_status,
        )

    return ChildSpec(
        "http",
        start,
        PERMANENT,
        shutdown=grace + 3.0 + 2 * HYPERCORN_GRACE + 2.0,
        why="the network listener; sessions live in their own supervisors under it",
    )
