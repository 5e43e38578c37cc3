"""``memtrio ui``: the dashboard of a home on a loopback port (headless: it prints its URL),
what ``memtrio serve --ui`` adds to the server's HTTP listener, and the dashboard of
``memtrio mcp --ui`` (on the owner, or in an embedded server: `dashboard_child`)."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Awaitable, Callable
from functools import partial
from urllib.parse import quote

import trio

from ...supervisors.commands import add_common, add_secrets_option
from ...supervisors.context import AppContext, AppRunner
from ...supervisors.supervisor import ChildContext, ChildSpec
from ..net.bind import SamePort
from ..net.http import hypercorn_config, serve_asgi
from ..net.listen import Listen, resolve_listen
from ..net.serving import mcp_ui_requested, ui_requested  # noqa: F401 - re-exported
from .asgi import UiApp
from .guard import Guard, new_token

DEFAULT_BIND = "127.0.0.1:0"


def dashboard(app: AppContext, listen: Listen) -> UiApp:
    """The dashboard over ``app``, with its own new per-launch token (in memory only).

    Never the configured bearer token (``listen.token``, the MCP credential of
    ``memtrio serve``): the dashboard's URL is printed, and what it carries opens
    the dashboard only. A configured token only lets the dashboard answer on a
    non-loopback Host (``Guard.configured``).
    """
    guard = Guard(
        token=new_token(),
        configured=listen.token is not None,
        allowed_origins=listen.allowed_origins,
    )
    return UiApp(app, guard)


def dashboard_url(listen: Listen, port: int, ui: UiApp) -> str:
    """Where to open the dashboard: the listener's address with the dashboard's own
    per-launch token in the query (never the MCP bearer token)."""
    scheme = "https" if listen.tls else "http"
    host = f"[{listen.host}]" if ":" in listen.host else listen.host
    return f"{scheme}://{host}:{port}/?token={quote(ui.guard.token, safe='')}"


async def serve_dashboard(
    listen: Listen,
    ui: UiApp,
    until: Callable[[], Awaitable[object]],
    on_url: Callable[[str], None],
    port: SamePort | None = None,
) -> None:
    """Bind ``listen`` (through ``port``: the port of an earlier incarnation, see
    `SamePort`), serve the dashboard ``ui`` there, call ``on_url(url)`` once it listens,
    and stop when ``until()`` returns.

    Error handling: an address that cannot be bound raises `ListenError` (`open_listeners`).
    """
    port = port or SamePort(listen.host, listen.port, listen.bind_hint)
    listeners = await port.open()
    stopping = trio.Event()
    async with trio.open_nursery() as nursery:
        serve = partial(
            serve_asgi, ui, hypercorn_config(listen), listeners, shutdown_trigger=stopping.wait
        )
        await nursery.start(serve)
        on_url(dashboard_url(listen, listeners[0].socket.getsockname()[1], ui))
        await until()
        stopping.set()


def dashboard_child(app: AppContext, on_url: Callable[[str], None]) -> ChildSpec:
    """The dashboard on a free loopback port of its own, as a child of the root (``memtrio
    mcp --ui``: on the owner, or in an embedded server); ``on_url(url)`` once it listens.

    Error handling: failing to bind raises, so the supervisor sees the child fail to start.
    """
    listen = resolve_listen(app.config, transport="http", bind=DEFAULT_BIND)
    ui = dashboard(app, listen)
    port = SamePort(listen.host, listen.port, listen.bind_hint)  # kept across restarts

    async def start(
        ctx: ChildContext, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        def listening(url: str) -> None:
            on_url(url)
            task_status.started()

        await serve_dashboard(listen, ui, ctx.shutdown.wait, listening, port)

    return ChildSpec(
        "dashboard",
        start,
        why="the dashboard of memtrio mcp --ui; permanent: it holds no state (a restart "
        "binds its port again; a new one, were it taken, is republished by the attach "
        "endpoint after it)",
    )


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "ui", help="a local web dashboard of the memories, graph, code index and server"
    )
    add_common(parser)
    add_secrets_option(parser)  # the dashboard's edits (update) are screened too
    parser.add_argument(
        "--bind",
        metavar="HOST:PORT",
        default=DEFAULT_BIND,
        help="address to listen on (default 127.0.0.1:0: a free loopback port); "
        "another host needs --auth-token-file or MEMTRIO_AUTH_TOKEN",
    )
    parser.add_argument(
        "--auth-token-file",
        metavar="F",
        help="a token file, which allows a non-loopback --bind; the dashboard itself is "
        "opened with its per-launch token, printed in its URL",
    )
    parser.add_argument(
        "--strict-permissions",
        action="store_true",
        help="refuse to start (exit 2) when the token file or TLS key is readable by group or "
        "others ([serve] strict_permissions)",
    )
    parser.set_defaults(func=cmd_ui)


def cmd_ui(args: argparse.Namespace, run: AppRunner) -> int:
    """Run the application and serve the dashboard until SIGINT/SIGTERM.

    Prints ``memtrio ui: http://127.0.0.1:PORT/?token=...`` on stderr once it listens;
    the dashboard's repository is the current directory.

    Error handling: a non-loopback ``--bind`` without a token, and an address that
    cannot be bound (in use, not of this machine, privileged, unknown host) exit 2 with
    one line naming the address and what to do.
    """

    async def body(app: AppContext) -> int:
        listen = resolve_listen(
            app.config,
            transport="http",
            bind=args.bind,
            token_file=args.auth_token_file,
            command="ui",
        )
        ui = dashboard(app, listen)

        async def signalled() -> None:
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for _ in signals:
                    break

        def say(url: str) -> None:
            print(f"memtrio ui: {url}", file=sys.stderr, flush=True)

        await serve_dashboard(listen, ui, signalled, say)
        return 0

    return run(args, body)
