"""Whether a newcomer's first bytes carry a valid token, read without consuming them.

The gate (``actors.net.accept``) lets a newcomer to a full pool of pending connections
take the place of a pending one only when its first bytes show a valid token: the
``Authorization: Bearer`` header of an HTTP request or WebSocket handshake, or the
first line of a TCP connection. Bytes without one (a request without the token, headers
that never end) wait on probation like silence. Otherwise a flood whose connections
each send a request without the token at once displaces a pending connection with
every reconnection, and the churn (thousands of connections a second) keeps a real
client's new connection waiting for seconds.

The bytes are read with ``MSG_PEEK``: the transport reads them again. Under TLS they
are encrypted, so a TLS listener has no vouch (any bytes count, as before). The token
is compared as the transports compare it (`BearerAuth`, constant time).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable

import trio

from .auth import BearerAuth

# How much of a newcomer's first bytes is looked at: a request's headers fit.
PEEK = 8192

Vouch = Callable[[bytes], bool]
"""Whether the first bytes of a connection carry a valid token."""


def peek(sock: trio.socket.SocketType) -> bytes:
    """The bytes waiting on ``sock``, left there (at most `PEEK`)."""
    try:
        with socket.socket(fileno=os.dup(sock.fileno())) as dup:
            return dup.recv(PEEK, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except OSError:
        return b""


def first_line(auth: BearerAuth) -> Vouch | None:
    """TCP: the first line is the token (None: auth is off, every newcomer is welcome)."""
    if not auth.required:
        return None

    def vouch(data: bytes) -> bool:
        line, newline, _ = data.partition(b"\n")
        return bool(newline) and auth.grant_for_line(line) is not None

    return vouch


def authorization_header(auth: BearerAuth) -> Vouch | None:
    """HTTP and WebSocket: the request's ``Authorization`` header (None: auth is off)."""
    if not auth.required:
        return None

    def vouch(data: bytes) -> bool:
        head = data.split(b"\r\n\r\n", 1)[0]
        for line in head.split(b"\r\n")[1:]:
            name, colon, value = line.partition(b":")
            if colon and name.strip().lower() == b"authorization":
                return auth.grant_for_header(value.strip()) is not None
        return False

    return vouch
