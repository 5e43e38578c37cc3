"""What a session keeps about its client and its running calls.

`SessionState` is owned by the transport's supervisor, not by the Session actor:
it survives a restart of the session, so the restarted session serves the same
client (negotiated version, client info, content shape, calls still running, lines not yet
handled). `CallState` is one running ``tools/call``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import trio

from ..protocol.content import ContentMode
from ..protocol.jsonrpc import Id
from ..supervisors.grants import Grant
from .answers import Answer


@dataclass
class CallState:
    """One running tool call: its cancel scope and where its answer goes."""

    scope: trio.CancelScope
    answer: Answer
    answered: bool = False


def _settled() -> trio.Event:
    event = trio.Event()
    event.set()
    return event


@dataclass(eq=False)
class SessionState:
    """What survives a restart of the Session actor (owned by its supervisor)."""

    name: str = "session"
    initialized: bool = False
    protocol_version: str | None = None
    client_name: str = "unknown"
    client_version: str = ""
    # Whether results may carry structuredContent (the negotiated revision has it).
    structured_ok: bool = True
    # The tool-result content shape chosen at initialize (``protocol.content``).
    content_mode: ContentMode = "json"
    # The session's repository checkout: the server's directory over stdio (embedded),
    # else the client's MCP roots or the initialize parameter (docs/transports.md);
    # None: the session writes only `global`. ``root_source`` says where it came from.
    root: Path | None = None
    root_source: str = "none"
    # What the session's token opens (``supervisors.grants``): the repositories it may
    # choose, whether it may write. None: no grant applies (stdio, the process's own client).
    grant: Grant | None = None
    # Why the repository the client's roots name was refused (outside the grant); while
    # set, tool calls answer it (None: nothing refused).
    root_refusal: str | None = None
    # The client declared the ``roots`` capability at initialize.
    roots_capable: bool = False
    # Requests we sent the client and await an answer to: id -> method (``roots/list``).
    server_requests: dict[str, str] = field(default_factory=dict)
    requests_sent: int = 0
    # Set while no ``roots/list`` answer is awaited; a tool call waits for it until
    # ``roots_deadline`` (trio time), see ``actors.session_roots``.
    roots_settled: trio.Event = field(default_factory=_settled)
    roots_deadline: float = 0.0
    # Called when the client is gone (EOF, peer closed); None: the application stops
    # (a stdio server lives as long as its one client).
    on_close: Callable[[], None] | None = None
    in_flight: dict[Id, CallState] = field(default_factory=dict)
    # Lines received but not handled yet: a crash in the middle of a batch leaves
    # the rest here for the next incarnation (none is dropped unanswered).
    pending: deque[bytes] = field(default_factory=deque)
