"""The live connections of a serving process: the limit, the table ``server_status``
shows, and the isolation of each connection.

Each connection (a TCP or WebSocket connection, an HTTP session) runs its own
supervisor (``one_for_one`` over its reader, Session and writer, see
``actors.stdio.transport_children``) inside `Connections.run`, which never lets a
failure out: a connection whose supervisor gives up is logged and closed, the
server and every other session go on.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import trio

from ...supervisors import trace
from ...supervisors.supervisor import ONE_FOR_ONE, ChildSpec, Escalation, Supervisor
from .admission import ATTACH_RESERVE, ATTACH_UNAUTH_LIMIT, Admission, Budget
from .throttle import Throttle

# A connection's actors restarting faster than this are broken: the connection closes.
CONNECTION_MAX_RESTARTS = 5
CONNECTION_PERIOD = 10.0
# Refusals logged per transport and reason: the first ones, then one in so many.


@dataclass
class Connection:
    """One live connection, as ``server_status`` shows it."""

    id: str
    transport: str
    peer: str
    opened: float = field(default_factory=time.time)
    # Set to end the connection (the peer went away, the session ended, the server stops).
    closed: trio.Event = field(default_factory=trio.Event)
    supervisor: Supervisor | None = None

    def describe(self) -> dict[str, object]:
        row: dict[str, object] = {
            "id": self.id,
            "transport": self.transport,
            "peer": self.peer,
            "open_seconds": round(time.time() - self.opened, 1),
        }
        if self.supervisor is not None:
            row["actors"] = self.supervisor.snapshot()
        return row


class Connections:
    """The table of live connections of every transport of one process, and the
    accepted sockets behind them (`Budget`, one `Admission` per listener)."""

    def __init__(self, limit: int) -> None:
        self.configured_limit = limit
        self.limit = limit
        self.budget = Budget()
        self.admissions: dict[str, Admission] = {}
        self.live: dict[str, Connection] = {}
        self.listeners: list[dict[str, object]] = []
        self.accepted = 0
        self.refused = 0
        self.failed = 0
        self._refusals: dict[tuple[str, str], Throttle] = {}
        self._ids = itertools.count(1)

    def admission(
        self, name: str, *, unauth_limit: int, auth_timeout: float, attach: bool = False
    ) -> Admission:
        """The `Admission` of listener ``name`` (made once; its pool fitted to the budget).

        ``attach``: the attach endpoint, whose pool is `ATTACH_UNAUTH_LIMIT` and which may
        use the `ATTACH_RESERVE` every other listener leaves free. Planning also lowers
        ``limit`` (``[serve] max_connections``) to what the descriptor limit allows.
        """
        found = self.admissions.get(name)
        if found is not None:
            return found
        admission = Admission(
            name,
            self.budget,
            unauth_limit=min(unauth_limit, ATTACH_UNAUTH_LIMIT) if attach else unauth_limit,
            auth_timeout=auth_timeout,
            reserve=0 if attach else ATTACH_RESERVE,
        )
        admission.plan()
        self.admissions[name] = admission
        self._fit_limit()
        return admission

    def _fit_limit(self) -> None:
        """Authorised connections get what the pending pools and the reserve leave."""
        pools = sum(a.unauth_limit for a in self.admissions.values())
        room = max(1, self.budget.limit - pools - ATTACH_RESERVE)
        limit = min(self.configured_limit, room)
        if limit < self.limit:
            trace.warning(
                "net",
                "max_connections_lowered",
                configured=self.configured_limit,
                to=limit,
                descriptor_limit=self.budget.descriptor_limit,
            )
        self.limit = limit

    @property
    def full(self) -> bool:
        return len(self.live) >= self.limit

    def refuse(self, transport: str, peer: str, why: str) -> None:
        """Count and log a connection turned away (the transport answers it).

        The log is rate-limited per transport and reason (`Throttle`: the first ten,
        then a line every ten seconds with the count): a flood of refused connections
        must not flood the log and stderr too."""
        self.refused += 1
        key = (transport, why.split(":", 1)[0][:40])
        throttle = self._refusals.setdefault(key, Throttle())
        if throttle.due():
            trace.event("net", "connection_refused", level="warning", transport=transport,
                        peer=peer, why=why, count=throttle.count)  # fmt: skip

    def open(self, transport: str, peer: str) -> Connection:
        """Register a new connection (the caller checked `full`)."""
        conn = Connection(f"{transport}-{next(self._ids)}", transport, peer)
        self.live[conn.id] = conn
        self.accepted += 1
        trace.event("net", "connection_opened", id=conn.id, transport=transport, peer=peer)
        return conn

    def close(self, conn: Connection) -> None:
        conn.closed.set()
        if self.live.pop(conn.id, None) is not None:
            trace.event(
                "net", "connection_closed", id=conn.id, seconds=round(time.time() - conn.opened, 3)
            )

    async def run(self, conn: Connection, children: Sequence[ChildSpec]) -> None:
        """Run ``conn``'s actors under their own supervisor until ``conn.closed`` is set.

        Error handling: a supervisor that gives up (or any other failure) is logged
        and ends this connection only; nothing propagates but cancellation.
        """
        sup = Supervisor(
            conn.id,
            children,
            ONE_FOR_ONE,
            max_restarts=CONNECTION_MAX_RESTARTS,
            period=CONNECTION_PERIOD,
        )
        conn.supervisor = sup
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(sup.run)
                await conn.closed.wait()
                with trio.CancelScope(shield=True):
                    await sup.stop()
                nursery.cancel_scope.cancel()
        except (Escalation, Exception, BaseExceptionGroup) as exc:
            if isinstance(exc, BaseExceptionGroup) and exc.subgroup(trio.Cancelled) is not None:
                raise
            self.failed += 1
            trace.record(
                "net",
                "connection_failed",
                level="error",
                id=conn.id,
                error=f"{type(exc).__name__}: {exc}",
            )
        finally:
            self.close(conn)

    @contextmanager
    def listening(
        self,
        status_sections: MutableMapping[str, Callable[[], object]],
        label: str,
        url: str,
    ) -> Iterator[dict[str, object]]:
        """Show a bound listener (``label``: its transport as ``server_status`` names it, e.g.
        ``tcp``, ``ws``, ``attach``) in ``server_status`` while the block runs."""
        record: dict[str, object] = {"transport": label, "url": url}
        self.listeners.append(record)
        status_sections["transports"] = self.snapshot
        trace.event(label, "listening", url=url)
        try:
            yield record
        finally:
            self.listeners.remove(record)

    def snapshot(self) -> dict[str, object]:
        """What ``server_status`` shows under ``transports``."""
        return {
            "listeners": list(self.listeners),
            "connections": len(self.live),
            "max_connections": self.limit,
            "accepted": self.accepted,
            "refused": self.refused,
            "failed": self.failed,
            "live": [c.describe() for c in self.live.values()],
            "sockets": {
                "open": self.budget.open,
                "limit": self.budget.limit,
                "descriptor_limit": self.budget.descriptor_limit,
                "refused": self.budget.refused,
                "listeners": {name: a.snapshot() for name, a in self.admissions.items()},
            },
        }


def on_close_of(conn: Connection) -> Callable[[], None]:
    """The callback a connection's Session and writer call when the peer is gone."""
    return conn.closed.set
