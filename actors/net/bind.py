"""Binding a listener's address, and the one line that says why it cannot be bound.

Every listener of ``memtrio serve`` (http, tcp, ws, the attach endpoint) and ``memtrio
ui`` binds through `open_listeners`: an address in use, not of this machine, a
privileged port or an unknown host is a `ListenError`, one line naming the address
and what to do, exit code 2 (never a supervisor's "gave up" line).

A listener restarted by its supervisor binds again through its `SamePort`, so it
comes back on the port it had (the one the system chose for port 0), which
``run/serve.json``, the announced URL and every client already know.
"""

from __future__ import annotations

import errno
import socket as stdlib_socket

import trio

from ...supervisors import trace
from ...supervisors.errors import UserError


class ListenError(UserError):
    """The listener cannot bind its address (in use, not an address of this machine, a
    privileged port, an unknown host): one line, exit code 2."""

    code = 2


def bind_message(host: str, port: int, exc: OSError, flag: str = "--bind") -> str:
    """The one line that says why ``host:port`` cannot be bound and what to do.

    ``flag`` is how the user sets the address (``--bind``, ``[serve] bind``); empty
    for a listener whose address is not the user's choice (the attach endpoint).
    """
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    code = exc.errno
    if not flag:
        why = exc.strerror or str(exc) or type(exc).__name__
        return (
            f"cannot listen on {where} (the attach endpoint of memtrio mcp children, a free "
            f"loopback port): {why[0].lower()}{why[1:]}; check that the loopback interface "
            "(127.0.0.1) is up and that this process may open more files (ulimit -n)"
        )
    if isinstance(exc, stdlib_socket.gaierror) or code in (
        stdlib_socket.EAI_NONAME,
        stdlib_socket.EAI_AGAIN,
    ):
        return (
            f"cannot listen on {where}: the host {host!r} is not known here "
            f"({exc.strerror or exc}); use an IP address of this machine in {flag} "
            "(127.0.0.1 for this machine only, 0.0.0.0 for every interface)"
        )
    if code == errno.EADDRINUSE:
        return (
            f"cannot listen on {where}: the address is already in use (another memtrio serve, "
            f"or another program, listens there); stop it or choose another port with {flag} "
            "(port 0: any free port)"
        )
    if code == errno.EADDRNOTAVAIL:
        return (
            f"cannot listen on {where}: {host} is not an address of this machine; use one of "
            f"its addresses in {flag} (127.0.0.1 for this machine only, 0.0.0.0 for every "
            "interface)"
        )
    if code in (errno.EACCES, errno.EPERM):
        return (
            f"cannot listen on {where}: permission denied (ports below 1024 are privileged); "
            f"choose a port from 1024 up with {flag}"
        )
    why = exc.strerror or str(exc) or type(exc).__name__
    return (
        f"cannot listen on {where}: {why[0].lower()}{why[1:]}; choose another address with {flag}"
    )


async def open_listeners(host: str, port: int, flag: str = "--bind") -> list[trio.SocketListener]:
    """The bound TCP listeners of ``host:port``.

    Error handling: raises `ListenError` (one line naming the address and what to
    do, exit 2) when the address cannot be bound or resolved.
    """
    try:
        return await trio.open_tcp_listeners(port, host=host)
    except OSError as exc:
        raise ListenError(bind_message(host, port, exc, flag)) from None


class SamePort:
    """The port of one listener across its incarnations (a supervisor restarts it).

    The first `open` binds ``port`` as asked (0: a port the system chooses) and
    remembers the port bound; a later one binds that port again, so a listener
    given ``--bind 127.0.0.1:0`` does not come back elsewhere while the runtime
    file and its clients name the old port. Only if that port was taken meanwhile
    (by another program) does it bind what was asked, and its caller publishes the
    new port (``on_listening``).
    """

    def __init__(self, host: str, port: int, flag: str = "--bind") -> None:
        self.host = host
        self.asked = port
        self.flag = flag
        self.port = 0  # the port bound last; 0 before the first `open`

    async def open(self) -> list[trio.SocketListener]:
        """The bound listeners (`open_listeners`), on the port of the last incarnation if any.

        Error handling: `ListenError` as `open_listeners`, for the port asked.
        """
        if self.port and self.port != self.asked:
            try:
                listeners = await trio.open_tcp_listeners(self.port, host=self.host)
            except OSError as exc:
                trace.warning("net", "port_not_kept", port=self.port, error=str(exc))
            else:
                trace.event("net", "port_kept", port=self.port)
                return listeners
        listeners = await open_listeners(self.host, self.asked, self.flag)
        self.port = int(listeners[0].socket.getsockname()[1])
        return listeners
