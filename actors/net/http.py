"""The Streamable HTTP listener of ``memtrio serve --transport http`` (MCP 2025-11-25).

hypercorn's trio worker serves the ASGI application (``actors.net.http_asgi``)
inside the application's own trio program, as a child of the root supervisor.
Each MCP session runs under its own supervisor (``actors.net.http_session``,
`Connections.run`), so a crash inside one session never reaches another
session or the listener.

Shutdown: new sessions are refused (503), every session's supervisor stops (its
Session lets running calls finish within ``[server] shutdown_grace`` and the
router delivers their answers), the streams end, then hypercorn stops.
"""

from __future__ import annotations

import logging
from functools import partial

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve as hypercorn_serve

from ...supervisors import trace
from ...supervisors.context import AppContext
from ...supervisors.supervisor import PERMANENT, ChildContext, ChildSpec
from .connections import Connections
from .http_asgi import Asgi, HttpServer
from .listen import Listen

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
    return config


def _port(bind: str) -> int:
    """The port of a bound address as hypercorn reports it (``http://127.0.0.1:8000``)."""
    return int(bind.rsplit(":", 1)[1].rstrip("/"))


async def serve_http(
    ctx: ChildContext,
    *,
    app: AppContext,
    listen: Listen,
    connections: Connections,
    extra: Asgi | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``listen`` until a graceful stop; record the bound URL in ``connections``.

    Error handling: failing to bind (address in use, bad certificate) raises, so
    the supervisor sees the listener fail to start; a failure inside one session
    ends that session only.
    """
    stopping = trio.Event()
    entry: dict[str, object] = {"transport": "http"}
    try:
        async with trio.open_nursery() as nursery:
            server = HttpServer(app, listen, connections, nursery, extra)
            serve = partial(
                hypercorn_serve,
                server,
                hypercorn_config(listen),
                shutdown_trigger=stopping.wait,
                mode="asgi",
            )
            binds: list[str] = await nursery.start(serve)
            entry["url"] = listen.url(_port(binds[0]))
            connections.listeners.append(entry)
            nursery.start_soon(server.expire_idle)
            trace.event("http", "listening", url=entry["url"], tls=listen.tls)
            task_status.started()
            await ctx.shutdown.wait()
            trace.event("http", "draining", sessions=len(server.sessions))
            with trio.CancelScope(shield=True):
                await server.drain(app.config.server.shutdown_grace)
            stopping.set()
            # hypercorn returns once its connections closed (within HYPERCORN_GRACE);
            # then the idle reaper is all that is left.
            await _wait_for(nursery, 1)
            nursery.cancel_scope.cancel()
    finally:
        if entry in connections.listeners:
            connections.listeners.remove(entry)


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

    async def start(
        ctx: ChildContext, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        await serve_http(
            ctx,
            app=app,
            listen=listen,
            connections=connections,
            extra=extra,
            task_status=task_status,
        )

    return ChildSpec(
        "http",
        start,
        PERMANENT,
        shutdown=grace + 3.0 + 2 * HYPERCORN_GRACE + 2.0,
        why="the network listener; sessions live in their own supervisors under it",
    )
