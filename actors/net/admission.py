"""The unauthenticated phase of accepted connections, and the descriptor budget.

- `Budget`: how many accepted sockets the process may hold, derived once from its
  descriptor limit (``RLIMIT_NOFILE``, the soft value first raised to the hard one),
  leaving headroom for the store, the logs and the code index.
- `Admission`: one listener's pool of *pending* connections (accepted, not yet
  authorised: the TCP token line, the WebSocket handshake, an HTTP request with the
  token), at most ``[serve] unauth_limit`` of them, each with a deadline of
  ``[serve] auth_timeout`` seconds from accept; which pending connection a newcomer
  displaces when the pool is full (`Admission.victim`).

``actors.net.accept`` applies them at accept.
"""

from __future__ import annotations

import gc
import ipaddress
import itertools
import math
import os
import resource
import socket as stdlib_socket
from collections import OrderedDict
from dataclasses import dataclass

import trio

from ...supervisors import trace
from .throttle import Throttle

# Descriptors a serving process keeps free for everything but accepted sockets (the
# store's connections, the code index, logs, worker pipes): an eighth of the limit,
# at least 16 and at most 256.
HEADROOM_MIN = 16
HEADROOM_MAX = 256
# The soft descriptor limit is raised to the hard one, up to this many.
RAISE_NOFILE_TO = 65536
# Sockets of the attach endpoint the public listener may never take.
ATTACH_RESERVE = 16
# Pending (unauthenticated) connections the attach endpoint holds at once: its only
# clients are `memtrio mcp` children that send their token with the connection.
ATTACH_UNAUTH_LIMIT = 8
# Seconds a silent pending connection must have waited before a silent newcomer to a full
# pool may displace it (a newcomer that already sent bytes displaces one at once).
EVICT_MIN_AGE = 0.5
# The smallest useful budgets, whatever the descriptor limit says.
MIN_SOCKETS = 8
MIN_UNAUTH = 2


def peer_key(host: object, port: object) -> str:
    """``host:port`` (``[v6]:port``) of a peer, the host in its canonical form."""
    text = str(host)
    try:
        text = str(ipaddress.ip_address(text.split("%", 1)[0]))
    except ValueError:
        pass
    return f"[{text}]:{port}" if ":" in text else f"{text}:{port}"


def socket_peer(sock: trio.socket.SocketType) -> tuple[str, str]:
    """(peer key, peer host) of a connected socket; ("unknown", "unknown") when gone."""
    try:
        address = sock.getpeername()
    except OSError:
        return "unknown", "unknown"
    if not isinstance(address, tuple):
        return str(address), str(address)
    key = peer_key(address[0], address[1])
    return key, key.rpartition(":")[0]


def raise_descriptor_limit() -> tuple[int, int]:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard one (at most `RAISE_NOFILE_TO`); the
    (soft, hard) limits in force afterwards."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ceiling = RAISE_NOFILE_TO if hard == resource.RLIM_INFINITY else min(hard, RAISE_NOFILE_TO)
    if soft != resource.RLIM_INFINITY and soft < ceiling:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (ceiling, hard))
            trace.event("net", "descriptor_limit_raised", soft=soft, to=ceiling, hard=hard)
            soft = ceiling
        except (OSError, ValueError) as exc:
            trace.warning(
                "net", "descriptor_limit_not_raised", soft=soft, hard=hard, error=str(exc)
            )
    return soft, hard


def open_descriptors() -> int:
    """How many descriptors this process has open (an estimate where /proc is missing)."""
    for folder in ("/proc/self/fd", "/dev/fd"):
        try:
            return len(os.listdir(folder))
        except OSError:
            continue
    return 64


class Budget:
    """The accepted sockets of one process, against what its descriptor limit allows.

    `plan` runs once, when the first listener starts (the store and the other
    actors have opened their files by then).
    """

    def __init__(self) -> None:
        self.open = 0  # accepted sockets not yet closed, every listener
        self.limit = 0  # 0: not planned yet
        self.descriptor_limit = 0
        self.refused = 0  # closed at once: over the budget

    @property
    def planned(self) -> bool:
        return self.limit > 0

    def plan(self) -> int:
        """Derive the socket budget from ``RLIMIT_NOFILE`` (once); the budget."""
        if self.planned:
            return self.limit
        # Everything allocated while starting lives as long as the server: out of the
        # collector's sight, so a flood of short-lived connections does not make each
        # full collection walk it (pauses of tens of ms for every session otherwise).
        gc.collect()
        gc.freeze()
        soft, _ = raise_descriptor_limit()
        if soft == resource.RLIM_INFINITY:
            soft = RAISE_NOFILE_TO
        used = open_descriptors()
        headroom = min(max(soft // 8, HEADROOM_MIN), HEADROOM_MAX)
        self.descriptor_limit = soft
        self.limit = max(MIN_SOCKETS, soft - used - headroom)
        trace.event("net", "socket_budget", sockets=self.limit, descriptor_limit=soft, in_use=used)
        return self.limit


@dataclass(eq=False)
class Ticket:
    """One accepted connection of a listener, from accept to close."""

    id: int
    admission: Admission
    stream: trio.SocketStream
    peer: str
    host: str
    deadline: float
    accepted: float
    pending: bool = True
    spoke: bool = False  # some bytes arrived from the peer
    # Its first bytes showed a valid token (`actors.net.vouch`; the attach endpoint: a
    # child's hello): never displaced for a newcomer while one that did not is pending.
    vouched: bool = False
    busy: int = 0  # requests being served while pending (HTTP): not shut down meanwhile
    closed: bool = False
    shut_down: bool = False  # ended by its listener (evicted, expired): nothing to answer
    # The task serving the connection (`run_gated`): cancelled when it is shut down.
    scope: trio.CancelScope | None = None

    def authorise(self) -> None:
        """The connection showed its credentials (or needs none): it leaves the pool."""
        self.admission.authorise(self)

    def shut(self) -> None:
        """End the (pending) connection: the task serving it is cancelled and closes it; the
        peer sees the connection end."""
        self.shut_down = True
        try:
            self.stream.socket.shutdown(stdlib_socket.SHUT_RDWR)
        except OSError:
            pass
        if self.scope is not None:
            self.scope.cancel()


class Admission:
    """The connections one listener accepted: its pool of pending (unauthenticated)
    connections, their deadline, and its share of the process's `Budget`.

    ``unauth_limit``: pending connections at once; ``auth_timeout``: seconds from
    accept to authorisation; ``reserve``: sockets of the budget this listener leaves
    to others (the public listener leaves `ATTACH_RESERVE` to the attach endpoint).
    """

    def __init__(
        self,
        name: str,
        budget: Budget,
        *,
        unauth_limit: int,
        auth_timeout: float,
        reserve: int = 0,
    ) -> None:
        self.name = name
        self.budget = budget
        self.configured_unauth = unauth_limit
        self.unauth_limit = unauth_limit
        self.auth_timeout = auth_timeout
        self.reserve = reserve
        self.pending: OrderedDict[int, Ticket] = OrderedDict()
        self.by_peer: dict[str, Ticket] = {}
        self.waiting_room = 0  # silent newcomers on probation (`GatedListener`)
        self.open = 0
        self.accepted = 0
        self.authorised = 0
        self.expired = 0
        self.evicted = 0
        self.refused = 0
        self.failed = 0  # connections whose handler raised (`fail`)
        self._refusal_log = Throttle()
        self._failure_log = Throttle()
        self._eviction_log = Throttle(first=1)
        self._expiry_log = Throttle(first=1)
        self._ids = itertools.count(1)
        self._changed = trio.Event()
        self._idle = True  # the deadline task waits for a pending connection

    def plan(self) -> None:
        """Fit the pending pool in the budget (planned on first use)."""
        sockets = self.budget.plan()
        share = max(MIN_UNAUTH, (sockets - self.reserve) // 4)
        self.unauth_limit = max(1, min(self.configured_unauth, share))
        if self.unauth_limit < self.configured_unauth:
            trace.warning(
                self.name,
                "unauth_limit_lowered",
                configured=self.configured_unauth,
                to=self.unauth_limit,
                descriptor_limit=self.budget.descriptor_limit,
            )

    # -- accept ----------------------------------------------------------------

    @property
    def full(self) -> bool:
        return len(self.pending) >= self.unauth_limit

    @property
    def over_budget(self) -> bool:
        return self.budget.open >= self.budget.limit - self.reserve

    def admit(
        self, stream: trio.SocketStream, now: float, spoke: bool, vouched: bool = False
    ) -> Ticket:
        """Register ``stream`` (counted in the budget already) as a pending connection
        (``spoke``: its first bytes have arrived; ``vouched``: they show a valid token)."""
        peer, host = socket_peer(stream.socket)
        ticket = Ticket(next(self._ids), self, stream, peer, host, now + self.auth_timeout, now)
        ticket.spoke = spoke
        ticket.vouched = vouched
        self.pending[ticket.id] = ticket
        self.by_peer[peer] = ticket
        self.open += 1
        self.accepted += 1
        if self._idle:
            self._wake()
        return ticket

    def refuse(self, why: str) -> None:
        """Count (and, rate-limited, log) a connection closed at accept."""
        self.refused += 1
        if why == "socket budget":
            self.budget.refused += 1
        if self._refusal_log.due():
            trace.event(self.name, "connection_refused", level="warning", why=why,
                        sockets=self.budget.open, count=self.refused)  # fmt: skip

    def victim(self, newcomer_spoke: bool, now: float) -> Ticket | None:
        """The pending connection a newcomer to a full pool displaces, or None.

        A newcomer whose first bytes have already arrived (a client sends its
        credentials with the connection) displaces the oldest connection that has sent
        nothing, else the oldest one not answering a request, of the peer address
        holding the most pending connections; a connection whose bytes showed a valid
        token (``vouched``: a client completing its handshake) only when every pending
        one did. A newcomer that has sent nothing displaces only a silent connection
        pending for `EVICT_MIN_AGE` seconds or more (None: it waits on probation, see
        `GatedListener`).
        """
        pool = [t for t in self.pending.values() if not t.busy] or list(self.pending.values())
        pool = [t for t in pool if not t.vouched] or pool
        if not pool:
            return None
        if not newcomer_spoke:
            oldest = next((t for t in pool if not t.spoke), None)
            if oldest is not None and now - oldest.accepted >= EVICT_MIN_AGE:
                return oldest
            return None
        counts: dict[str, int] = {}
        for ticket in pool:
            counts[ticket.host] = counts.get(ticket.host, 0) + 1
        top = max(counts, key=lambda host: counts[host])
        mine = [t for t in pool if t.host == top]
        return next((t for t in mine if not t.spoke), None) or next(
            (t for t in pool if not t.spoke), mine[0]
        )

    def evict(self, victim: Ticket) -> None:
        """Shut ``victim`` down to make room."""
        self._drop(victim)
        self.evicted += 1
        if self._eviction_log.due():
            trace.event(self.name, "unauthenticated_evicted", level="warning", peer=victim.peer,
                        total=self.evicted, pending_limit=self.unauth_limit)  # fmt: skip
        victim.shut()

    def _drop(self, ticket: Ticket) -> None:
        if ticket.pending:
            ticket.pending = False
            self.pending.pop(ticket.id, None)
            if self.by_peer.get(ticket.peer) is ticket:
                del self.by_peer[ticket.peer]

    # -- the transports ----------------------------------------------------------

    def authorise(self, ticket: Ticket) -> None:
        if ticket.pending and not ticket.closed:
            self._drop(ticket)
            self.authorised += 1

    def authorise_peer(self, peer: str) -> bool:
        """Authorise the pending connection of ``peer`` (a `peer_key`); whether it was pending."""
        ticket = self.by_peer.get(peer)
        if ticket is None:
            return False
        self.authorise(ticket)
        return True

    def ticket_of(self, peer: str) -> Ticket | None:
        """The pending connection of ``peer``, if any."""
        return self.by_peer.get(peer)

    def release(self, ticket: Ticket) -> None:
        """The socket was closed: give its place back (once)."""
        if ticket.closed:
            return
        ticket.closed = True
        self._drop(ticket)
        self.open -= 1
        self.budget.open -= 1

    # -- the deadline --------------------------------------------------------------

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def expire(self) -> None:
        """Shut the pending connections that outlive ``auth_timeout`` (runs until cancelled).

        A pending HTTP connection with a request being served is shut once that
        request ends (`done`)."""
        while True:
            now = trio.current_time()
            following = math.inf
            for ticket in list(self.pending.values()):  # in accept order: deadline order
                if ticket.busy:
                    continue
                if ticket.deadline > now:
                    following = ticket.deadline
                    break
                self._expire(ticket)
            self._idle = math.isinf(following)
            with trio.move_on_at(following):
                await self._changed.wait()

    def _expire(self, ticket: Ticket) -> None:
        self._drop(ticket)
        self.expired += 1
        if self._expiry_log.due():
            trace.event(self.name, "unauthenticated_expired", level="info", peer=ticket.peer,
                        total=self.expired, auth_timeout=self.auth_timeout)  # fmt: skip
        ticket.shut()

    def fail(self, ticket: Ticket, exc: Exception) -> None:
        """The handler of ``ticket``'s connection raised ``exc``: count it and log it
        (rate-limited: a flood of failing handshakes must not flood the log)."""
        self.failed += 1
        if self._failure_log.due():
            trace.event(self.name, "connection_error", level="warning", peer=ticket.peer,
                        pending=ticket.pending, shut_down=ticket.shut_down,
                        error=f"{type(exc).__name__}: {exc}"[:300], count=self.failed)  # fmt: skip

    def begin(self, ticket: Ticket) -> None:
        """A request of pending ``ticket`` is being served (HTTP)."""
        ticket.busy += 1

    def done(self, ticket: Ticket) -> None:
        """That request ended: a pending connection past its deadline is shut now."""
        ticket.busy -= 1
        if ticket.pending and not ticket.busy:
            if ticket.deadline <= trio.current_time():
                self._expire(ticket)
            else:
                self._wake()

    def snapshot(self) -> dict[str, object]:
        """What ``server_status`` shows of this listener's connections."""
        return {
            "open": self.open,
            "unauthenticated": len(self.pending),
            "on_probation": self.waiting_room,
            "unauth_limit": self.unauth_limit,
            "auth_timeout": self.auth_timeout,
            "accepted": self.accepted,
            "authorised": self.authorised,
            "expired": self.expired,
            "evicted": self.evicted,
            "refused": self.refused,
            "failed": self.failed,
        }
