"""The owner side of the attach model: the attach endpoint of ``memtrio serve``.

Besides its public listener, ``memtrio serve`` listens on ``127.0.0.1`` (a port
the system picks) with the TCP transport (``actors.net.tcp``), and publishes
where, with a fresh random secret, in its runtime file (``actors.net.runtime``).
A ``memtrio mcp`` child of the same home finds it there and relays its stdio to
it (``actors.net.attach``): each child is one session of this server.

A connection is admitted by the handshake of ``actors.net.proof`` instead of a
token line: the child proves it read the secret, and the endpoint proves to the
child that it is the server that wrote the file. The secret never travels.

An owner a ``memtrio mcp`` child started (``memtrio serve --owner``,
``actors.net.spawn``) exits on its own once it has served no session for
``[serve] idle_exit`` seconds (`idle_exit_child`); so does any ``memtrio serve``
given ``--idle-exit``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial

import trio

from ...supervisors import trace
from ...supervisors.context import AppContext
from ...supervisors.supervisor import ChildContext, ChildSpec
from . import proof
from .accept import GatedStream
from .connections import Connections
from .listen import Listen
from .runtime import Runtime, Untrusted, publish, withdraw
from .tcp import tcp_listener

# The attach endpoint's connections are agent sessions on this machine: they stay
# open as long as the agent's session, idle or not (a week: the longest idle_timeout).
ATTACH_IDLE_TIMEOUT = 7 * 86400.0


def attach_listen(connections: Connections) -> Listen:
    """The attach endpoint's settings: loopback, a port the system picks (no token: the
    proof of `admit` admits a connection)."""
    return Listen(
        transport="tcp",
        host="127.0.0.1",
        port=0,
        max_connections=connections.limit,
        idle_timeout=ATTACH_IDLE_TIMEOUT,
        bind_hint="",  # not the user's choice: a free port of 127.0.0.1
    )


async def admit(secret: bytes, stream: GatedStream) -> bytes | None:
    """The attach endpoint's admission: the handshake of ``actors.net.proof`` for this
    process and the port the connection came in on; the bytes read past it, or None.

    A connection whose hello shows the secret (`proof.hello_nonce`) is marked vouched in
    its listener's pool, so no other newcomer displaces it while it completes the
    handshake (`Admission.victim`)."""
    try:
        port = int(stream.socket.getsockname()[1])
    except OSError:
        return None
    ticket = stream.ticket
    return await proof.answer(
        stream, secret, os.getpid(), port, on_vouched=lambda: setattr(ticket, "vouched", True)
    )


def attach_children(
    app: AppContext,
    connections: Connections,
    public_url: Callable[[], str] = lambda: "",
    ui_url: Callable[[], str] = lambda: "",
) -> list[ChildSpec]:
    """The attach endpoint of ``memtrio serve``: its TCP listener, which publishes the
    runtime file once it listens and withdraws it when it stops.

    ``public_url()`` and ``ui_url()`` (the dashboard's, "" without one) are asked
    when the endpoint starts listening (so start these children after the public
    listener and the dashboard). Sessions of the endpoint are counted in
    ``connections`` with the others (transport ``attach``).

    Error handling: a runtime file that cannot be written, or whose directory others
    could write (``run/`` or a directory above it), is a warning (the server serves
    on; ``memtrio mcp`` children then serve embedded); it is never fatal.
    """
    # Attached sessions are bounded by [serve] allowed_roots like every session (the grant
    # ``default``: read-write); docs/transports.md, "Grants".
    listen = replace(
        attach_listen(connections), allowed_roots=tuple(app.config.serve.allowed_roots)
    )
    secret = proof.new_secret()
    started = time.time()
    published: list[Runtime] = []

    def on_listening(host: str, port: int) -> None:
        runtime = Runtime(
            pid=os.getpid(),
            host=host,
            port=port,
            secret=secret.hex(),
            url=public_url(),
            ui=ui_url(),
            started=started,
            version=app.version,
        )
        try:
            path = publish(app.home, runtime)
        except (OSError, Untrusted) as exc:
            trace.warning("attach", "runtime_file_failed", error=f"{type(exc).__name__}: {exc}")
            return
        published.append(runtime)
        trace.event("attach", "published", path=str(path), port=port)

    spec = tcp_listener(
        app,
        listen,
        connections,
        name="attach",
        on_listening=on_listening,
        handshake=partial(admit, secret),
        shows=lambda port: proof.hello_vouch(secret, os.getpid(), port),
        attach=True,
    )
    listener = spec.start

    async def run(
        ctx: ChildContext, *, task_status: trio.TaskStatus[object] = trio.TASK_STATUS_IGNORED
    ) -> None:
        try:
            await listener(ctx, task_status=task_status)
        finally:
            while published:
                runtime = published.pop()
                if withdraw(app.home, runtime):
                    trace.event("attach", "withdrawn", port=runtime.port)

    return [
        replace(
            spec,
            start=run,
            why="the attach endpoint of memtrio mcp children; its runtime file lives as long",
        )
    ]


# How often the idle timer looks at the live sessions.
IDLE_POLL = 1.0


async def watch_idle(
    connections: Connections, seconds: float, on_idle: Callable[[], None], poll: float = IDLE_POLL
) -> None:
    """Call ``on_idle()`` once no connection has been live for ``seconds`` (counted from
    the start, and again from whenever the last one closed), then return.

    Any live connection counts as a session: attached children, TCP and WebSocket
    clients, HTTP sessions.
    """
    idle_since = trio.current_time()
    busy = False
    while True:
        now = trio.current_time()
        if connections.live:
            busy = True
        elif busy:  # first seen idle (late by at most ``poll``, never early)
            busy = False
            idle_since = now
        left = seconds if busy else seconds - (now - idle_since)
        if left <= 0:
            on_idle()
            return
        await trio.sleep(min(poll, left))


def idle_exit_child(app: AppContext, connections: Connections, seconds: float) -> ChildSpec:
    """A child that stops the server (exit 0) after ``seconds`` without a session."""

    def idle() -> None:
        trace.event("attach", "idle_exit", seconds=seconds)
        app.request_shutdown(0)

    async def run(
        ctx: ChildContext, *, task_status: trio.TaskStatus[object] = trio.TASK_STATUS_IGNORED
    ) -> None:
        task_status.started()
        with ctx.cancel_on_shutdown(trio.CancelScope()):
            await watch_idle(connections, seconds, idle)
        await ctx.shutdown.wait()

    return ChildSpec(
        "idle-exit",
        run,
        why="stops an owner nobody uses ([serve] idle_exit); permanent: it holds no state",
    )
