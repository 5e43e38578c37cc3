"""What ``memtrio serve`` (and a ``memtrio mcp`` told to use a network transport) runs:
its command-line options, the listener of the chosen transport, its one listening line.

The CLI entry (``supervisors.cli``) runs the application with `network_listener`
as the root's last child; this module only chooses and builds it.
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any

import trio

from ...supervisors.config import Config, ConfigError
from ...supervisors.context import AppContext
from ...supervisors.errors import UserError
from ...supervisors.supervisor import ChildSpec

if TYPE_CHECKING:
    # The network transports' modules load when a network transport is chosen, not
    # for `memtrio mcp` on stdio (it answers `initialize` sooner: issue #42).
    from .connections import Connections
    from .listen import Listen

Announce = Callable[[str, int], None]
Asgi = Callable[[MutableMapping[str, Any], Any, Any], Awaitable[None]]


def add_serve_options(parser: argparse.ArgumentParser) -> None:
    """The listener flags of ``memtrio serve`` (the common ones are added by the caller)."""
    parser.add_argument(
        "--transport",
        choices=("http", "tcp", "ws"),
        help="http (Streamable HTTP on /mcp), tcp (newline-delimited JSON-RPC) or ws (WebSocket); "
        "default: $MEMTRIO_TRANSPORT, else [serve] transport (http)",
    )
    parser.add_argument(
        "--bind",
        metavar="HOST:PORT",
        help="address to listen on (default: [serve] bind, 127.0.0.1:7700; port 0: any free port)",
    )
    parser.add_argument("--auth-token", metavar="T", help="bearer token clients must present")
    parser.add_argument(
        "--auth-token-file", metavar="F", help="file holding the bearer token (trimmed)"
    )
    parser.add_argument("--tls-cert", metavar="C", help="PEM certificate chain (http, ws)")
    parser.add_argument("--tls-key", metavar="K", help="PEM private key of --tls-cert")
    parser.add_argument(
        "--ui",
        action="store_true",
        help="also serve the web dashboard on the http port (or MEMTRIO_UI=1); "
        "its URL, with a per-launch token, is printed on stderr",
    )
    parser.add_argument(
        "--strict-permissions",
        action="store_true",
        help="refuse to start (exit 2) when the token file or TLS key is readable by group or "
        "others, or config.toml writable by them ([serve] strict_permissions); "
        "default: a warning line",
    )
    parser.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="allow a non-loopback --bind without a token (anyone who can reach it gets in)",
    )


def env_transport(environ: Mapping[str, str] | None = None) -> str | None:
    """The transport ``MEMTRIO_TRANSPORT`` selects (None when unset); prints the
    deprecation hint for ``sse``.

    Error handling: an unknown value raises `ConfigError` (exit 2) listing the valid ones.
    """
    env = os.environ if environ is None else environ
    raw = env.get("MEMTRIO_TRANSPORT", "")
    if not raw.strip():
        return None
    from .listen import SSE_HINT, transport_name

    chosen = transport_name(raw, f"MEMTRIO_TRANSPORT={raw} (environment)")
    if raw.strip().lower() == "sse":
        print(SSE_HINT, file=sys.stderr, flush=True)
    return chosen


def listen_from_args(config: Config, args: argparse.Namespace, transport: str | None) -> Listen:
    """The listener settings of ``memtrio serve`` (flags over environment over config;
    ``transport``: already chosen by ``--transport`` or `env_transport`).

    Error handling: raises `ConfigError` (exit 2, one line), see `resolve_listen`.
    """
    from .listen import resolve_listen

    return resolve_listen(
        config,
        transport=transport,
        bind=getattr(args, "bind", None),
        token=getattr(args, "auth_token", None),
        token_file=getattr(args, "auth_token_file", None),
        tls_cert=getattr(args, "tls_cert", None),
        tls_key=getattr(args, "tls_key", None),
        insecure_no_auth=bool(getattr(args, "insecure_no_auth", False)),
        command=str(getattr(args, "command", None) or "serve"),
    )


def listening_line(url: str) -> str:
    """The one line ``memtrio serve`` prints on stderr once it listens."""
    return f"memtrio serve: listening on {url} (pid {os.getpid()})"


def announcer(listen: Listen) -> Announce:
    """Print `listening_line` once, when the listener is bound."""

    def announce(host: str, port: int) -> None:
        print(listening_line(listen.url(port)), file=sys.stderr, flush=True)

    return announce


class TransportUnavailable(UserError):
    """The chosen transport is not part of this build."""


def network_listener(
    app: AppContext,
    listen: Listen,
    connections: Connections,
    on_listening: Announce,
    extra: Asgi | None = None,
) -> ChildSpec:
    """The root's child serving ``listen.transport`` (http, tcp or ws).

    Error handling: raises `TransportUnavailable` (one line, exit 1) when the
    module of the transport cannot be imported.
    """
    if extra is not None and listen.transport != "http":
        raise ConfigError(
            f"--ui serves the dashboard on the http transport, not {listen.transport}: "
            "use --transport http, or run memtrio ui beside it"
        )
    if listen.transport == "tcp":
        from .tcp import tcp_listener

        return tcp_listener(app, listen, connections, on_listening=on_listening)
    if listen.transport == "ws":
        from .ws import ws_listener

        return ws_listener(app, listen, connections, on_listening=on_listening)
    if listen.transport != "http":
        raise ConfigError(f"unknown transport {listen.transport!r} (valid: http, tcp, ws)")
    try:
        from .http import http_listener
    except ImportError as exc:
        raise TransportUnavailable(
            f"the http transport is not available in this build ({exc}); "
            "use --transport tcp or --transport ws"
        ) from None
    if "on_listening" in inspect.signature(http_listener).parameters:
        return http_listener(app, listen, connections, on_listening=on_listening, extra=extra)  # type: ignore[call-arg]  # a build whose http_listener takes it (checked above)
    return announced(
        http_listener(app, listen, connections, extra), listen, connections, on_listening
    )


def announced(
    spec: ChildSpec, listen: Listen, connections: Connections, on_listening: Announce
) -> ChildSpec:
    """``spec``, calling ``on_listening`` once its start has reported ready (for a listener
    that does not take ``on_listening``: the port is read from ``connections.listeners``),
    and again whenever a restart reports a port other than the one told last (so the
    runtime file and the announced URL follow it)."""
    told = 0

    class _Status:
        def __init__(self, inner: trio.TaskStatus[Any]) -> None:
            self.inner = inner

        def started(self, value: object = None) -> None:
            nonlocal told
            self.inner.started(value)
            port = _bound_port(listen, connections)
            if port != told:
                told = port
                on_listening(listen.host, port)

    async def start(
        ctx: object, *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED
    ) -> None:
        await spec.start(ctx, task_status=_Status(task_status))

    return ChildSpec(
        spec.id, start, spec.restart, spec.shutdown, mailboxes=spec.mailboxes, why=spec.why
    )


def _bound_port(listen: Listen, connections: Connections) -> int:
    for record in connections.listeners:
        url = str(record.get("url", ""))
        host_port = url.split("://", 1)[-1].split("/", 1)[0]
        port = host_port.rpartition(":")[2]
        if record.get("transport") == listen.transport and port.isdigit():
            return int(port)
    return listen.port


def ui_requested(args: argparse.Namespace) -> bool:
    """``memtrio serve --ui`` or ``MEMTRIO_UI=1`` (headless by default)."""
    env = os.environ.get("MEMTRIO_UI", "").strip().lower()
    return bool(getattr(args, "ui", False)) or env in ("1", "true", "yes", "on")


def mcp_ui_requested(args: argparse.Namespace) -> bool:
    """``memtrio mcp --ui`` or ``MEMTRIO_MCP_UI=1`` (headless by default)."""
    env = os.environ.get("MEMTRIO_MCP_UI", "").strip().lower()
    return bool(getattr(args, "ui", False)) or env in ("1", "true", "yes", "on")
