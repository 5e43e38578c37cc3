"""The ``server_status`` tool: what this server is and how its actors are doing."""

from __future__ import annotations

import os
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from ..protocol.tools import Tool
from ..supervisors.context import AppContext, CallContext, NoActors


class StatusArgs(msgspec.Struct, forbid_unknown_fields=True):
    """No arguments."""


class ActorState(msgspec.Struct, kw_only=True):
    """One supervised child (`Supervisor.snapshot`); a supervisor lists its children."""

    id: str
    state: str
    restarts: int
    restart: str
    last_error: str | UnsetType = UNSET
    strategy: str | UnsetType = UNSET
    children: list[ActorState] | UnsetType = UNSET


class SessionInfo(msgspec.Struct):
    name: str
    root: str | None
    root_source: str | None


class ServerStatus(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """This server, its actors and the calling session; ``transports`` when it serves a network
    transport (``memtrio serve``)."""

    # forbid_unknown_fields: a new `status_sections` entry fails here until it is declared.

    name: str
    version: str
    protocol_version: str | None
    pid: int
    data_dir: str
    features: list[str]
    calls_in_flight: int
    actors: list[ActorState]
    sessions: int
    session: SessionInfo | None
    transports: dict[str, Any] | UnsetType = UNSET
    # The store's maintenance actor: runs, WAL flushes, the last run's report.
    maintenance: dict[str, Any] | UnsetType = UNSET


async def server_status(ctx: CallContext, args: StatusArgs) -> ServerStatus:
    app = ctx.app
    session = ctx.session
    record = {
        "name": "memtrio",
        "version": app.version,
        "protocol_version": session.protocol_version if session is not None else None,
        "pid": os.getpid(),
        "data_dir": str(app.home),
        "features": list(app.features),
        "calls_in_flight": app.calls_in_flight(),
        "actors": app.root.snapshot() if app.root is not None else [],
        "sessions": len(app.sessions),
        # The calling session's repository and where it came from (docs/transports.md).
        "session": {
            "name": session.name,
            "root": str(session.root) if session.root is not None else None,
            "root_source": session.root_source,
        }
        if session is not None
        else None,
        **{name: section() for name, section in app.status_sections.items()},
    }
    return msgspec.convert(record, ServerStatus)


TOOLS = [
    Tool(
        name="server_status",
        description=(
            "Version, protocol, data directory, features, calls in flight, actors' state "
            "and restarts, the session's repository (root) and its source."
        ),
        args=StatusArgs,
        handler=server_status,
        result=ServerStatus,
        group="core",
        read_only=True,
        idempotent=True,
        title="Server status",
    ),
]


class _StatusFeature:
    name = "status"

    def setup(self, app: AppContext) -> NoActors:
        app.add_tools(TOOLS)
        return NoActors()


FEATURE = _StatusFeature()
