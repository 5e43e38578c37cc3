"""Accepting connections: binding a listener, the descriptor budget of the process, and
the unauthenticated phase of every accepted connection.

Every network listener of ``memtrio serve`` (http, tcp, ws and the attach endpoint)
accepts through a `GatedListener`, so a connection is counted from ``accept`` on,
whichever transport it is and whether or not it ever authenticates:

- **The budget.** `Budget` derives from the process's descriptor limit
  (``RLIMIT_NOFILE``, whose soft value is first raised to the hard one) how many
  accepted sockets may be open at once, leaving headroom for the store, the logs
  and the code index. A connection over it is closed at once, so ``accept`` never
  fails with ``EMFILE`` for everyone; the attach endpoint has a reserve the public
  listener cannot take.
- **The unauthenticated phase.** Until the transport marks it authorised (the TCP
  token line, the WebSocket handshake, an HTTP request with the token), a
  connection is *pending*. Each listener has its own small pool of pending
  connections (``[serve] unauth_limit``) and a deadline (``[serve] auth_timeout``
  seconds from accept). A pending connection past its deadline is shut down; a new
  one arriving at a full pool evicts the oldest pending connection of the peer
  address that holds the most, so a flood from one address only ever displaces
  itself, and a client that sends its credentials right away always gets in.
- **Accept errors.** ``EMFILE``/``ENFILE`` (descriptors exhausted by something else)
  make the accept loop pause `ACCEPT_RETRY` seconds and retry; it never spins and
  never dies of them.

Each accepted connection is served by `run_gated`, which closes it when its
handler returns and cancels the handler when the listener shuts the connection
(evicted, past its deadline), so a pending connection's descriptor is given back
at once whatever the transport's library would otherwise wait for.
"""

from __future__ import annotations

import errno
import fcntl
import gc
import ipaddress
import itertools
import math
import os
import resource
import socket as stdlib_socket
import ssl
import struct
import termios
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import trio

from ...supervisors import trace
from ...supervisors.errors import UserError

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
# Seconds a silent newcomer to a full pool may wait on probation for its first bytes, and
# how often the waiting ones are looked at.
PROBATION = 0.25
PROBATION_TICK = 0.01
# The smallest useful budgets, whatever the descriptor limit says.
MIN_SOCKETS = 8
MIN_UNAUTH = 2
# Seconds the accept loop waits after EMFILE/ENFILE/ENOBUFS/ENOMEM before it retries.
ACCEPT_RETRY = 0.1
CAPACITY_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


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


def waiting(sock: trio.socket.SocketType) -> bool:
    """Whether bytes from the peer are waiting on ``sock`` (read nothing)."""
    try:
        raw = fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0")
    except OSError:
        return False
    return bool(struct.unpack("i", raw)[0])


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

    def admit(self, stream: trio.SocketStream, now: float, spoke: bool) -> Ticket:
        """Register ``stream`` (counted in the budget already) as a pending connection
        (``spoke``: its first bytes have arrived)."""
        peer, host = socket_peer(stream.socket)
        ticket = Ticket(next(self._ids), self, stream, peer, host, now + self.auth_timeout, now)
        ticket.spoke = spoke
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
        if self.refused <= 10 or self.refused % 1000 == 0:
            trace.event(self.name, "connection_refused", level="warning", why=why,
                        sockets=self.budget.open, count=self.refused)  # fmt: skip

    def victim(self, newcomer_spoke: bool, now: float) -> Ticket | None:
        """The pending connection a newcomer to a full pool displaces, or None.

        A newcomer whose first bytes have already arrived (a client sends its
        credentials with the connection) displaces the oldest connection that has sent
        nothing, else the oldest one not answering a request, of the peer address
        holding the most pending connections. A newcomer that has sent nothing
        displaces only a silent connection pending for `EVICT_MIN_AGE` seconds or more
        (None: it waits on probation, see `GatedListener`).
        """
        pool = [t for t in self.pending.values() if not t.busy] or list(self.pending.values())
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
        if self.evicted == 1 or self.evicted % 1000 == 0:
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
        if self.expired == 1 or self.expired % 1000 == 0:
            trace.event(self.name, "unauthenticated_expired", level="info", peer=ticket.peer,
                        total=self.expired, auth_timeout=self.auth_timeout)  # fmt: skip
        ticket.shut()

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
        }


class GatedStream(trio.abc.HalfCloseableStream):
    """An accepted socket that gives its place back to its `Admission` when closed.

    ``socket`` is the socket (hypercorn and the WebSocket library read the peer from
    it); ``repr`` is the peer's address.
    """

    def __init__(self, stream: trio.SocketStream, ticket: Ticket) -> None:
        self.stream = stream
        self.ticket = ticket
        self.socket = stream.socket

    def __repr__(self) -> str:
        return self.ticket.peer

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.stream.wait_send_all_might_not_block()

    async def send_eof(self) -> None:
        await self.stream.send_eof()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        data = await self.stream.receive_some(max_bytes)
        if data:
            self.ticket.spoke = True
        return data

    def setsockopt(self, level: int, option: int, value: int | bytes) -> None:
        self.stream.setsockopt(level, option, value)

    def getsockopt(self, level: int, option: int, buffersize: int = 0) -> int | bytes:
        return self.stream.getsockopt(level, option, buffersize)

    async def aclose(self) -> None:
        self.ticket.admission.release(self.ticket)
        await self.stream.aclose()


Handler = Callable[[Any], Awaitable[object]]


class GatedListener:
    """A bound TCP listener whose connections are counted from accept by ``admission``
    and served by `serve` (``tls``: wrapped in TLS before the handler sees them).

    A newcomer to a full pool of pending connections that has sent nothing yet waits
    on probation (no task, no handler) for its first bytes, at most `PROBATION`
    seconds and `Admission.unauth_limit` newcomers at a time; with bytes it takes the
    place of a pending connection (`Admission.victim`), else it is closed. So a flood
    of silent connections costs the server an ``accept`` and a ``close`` each, and a
    client that speaks first, as every client of memtrio does, is never turned away.

    Error handling: the accept loop never ends for a full descriptor table (it waits
    `ACCEPT_RETRY` seconds and tries again) nor for a connection over the budget
    (closed at once).
    """

    def __init__(
        self,
        listener: trio.SocketListener,
        admission: Admission,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.listener = listener
        self.admission = admission
        self.tls = tls
        self.socket = listener.socket
        self.pauses = 0
        self.probation: deque[tuple[trio.SocketStream, float]] = deque()
        self._arrival = trio.Event()
        self._handler: Handler | None = None
        self._nursery: trio.Nursery | None = None

    async def serve(
        self,
        handler: Handler,
        handler_nursery: trio.Nursery,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Accept connections until cancelled; each admitted one is served by ``handler``
        (through `run_gated`) in ``handler_nursery``."""
        self._handler, self._nursery = handler, handler_nursery
        async with trio.open_nursery() as own:
            own.start_soon(self._watch_probation)
            task_status.started()
            while True:
                self._arrive(await self._accept())

    async def _accept(self) -> trio.SocketStream:
        while True:
            try:
                return await self.listener.accept()
            except OSError as exc:
                if exc.errno not in CAPACITY_ERRNOS:
                    raise
                self.pauses += 1
                if self.pauses == 1 or self.pauses % 100 == 0:
                    trace.warning(self.admission.name, "accept_paused", pauses=self.pauses,
                                  error=errno.errorcode.get(exc.errno or 0, str(exc)))  # fmt: skip
                await trio.sleep(ACCEPT_RETRY)

    def _arrive(self, stream: trio.SocketStream) -> None:
        admission = self.admission
        if admission.over_budget:
            admission.refuse("socket budget")
            stream.socket.close()
            return
        admission.budget.open += 1
        now = trio.current_time()
        spoke = waiting(stream.socket)
        if admission.full:
            victim = admission.victim(spoke, now)
            if victim is None:
                if len(self.probation) >= admission.unauth_limit:
                    self._leave_probation(now)
                self.probation.append((stream, now))
                admission.waiting_room = len(self.probation)
                if len(self.probation) == 1:
                    self._arrival.set()
                    self._arrival = trio.Event()
                return
            admission.evict(victim)
        self._start(stream, now, spoke)

    def _start(self, stream: trio.SocketStream, now: float, spoke: bool) -> None:
        assert self._handler is not None and self._nursery is not None
        gated = GatedStream(stream, self.admission.admit(stream, now, spoke))
        served: trio.abc.Stream = gated
        if self.tls is not None:
            served = trio.SSLStream(gated, self.tls, server_side=True, https_compatible=True)
        self._nursery.start_soon(run_gated, self._handler, served)

    def _leave_probation(self, now: float) -> None:
        """Make room on a full probation: its oldest newcomer is admitted if its bytes have
        arrived meanwhile (displacing a pending connection), else closed."""
        stream, _ = self.probation.popleft()
        if not waiting(stream.socket):
            self._turn_away(stream)
            return
        victim = self.admission.victim(True, now)
        if victim is not None:
            self.admission.evict(victim)
        self._start(stream, now, True)

    def _turn_away(self, stream: trio.SocketStream) -> None:
        self.admission.refuse("unauth_limit")
        self.admission.budget.open -= 1
        stream.socket.close()

    async def _watch_probation(self) -> None:
        """Admit the newcomers on probation whose first bytes arrived (or for whom there is
        room now), close those that stayed silent for `PROBATION` seconds."""
        admission = self.admission
        while True:
            if not self.probation:
                await self._arrival.wait()
                continue
            await trio.sleep(PROBATION_TICK)
            now = trio.current_time()
            kept: deque[tuple[trio.SocketStream, float]] = deque()
            while self.probation:
                stream, since = self.probation.popleft()
                spoke = waiting(stream.socket)
                if spoke or not admission.full:
                    victim = admission.victim(True, now) if admission.full else None
                    if victim is not None:
                        admission.evict(victim)
                    self._start(stream, now, spoke)
                elif now - since >= PROBATION:
                    self._turn_away(stream)
                else:
                    kept.append((stream, since))
            self.probation = kept
            admission.waiting_room = len(kept)

    async def aclose(self) -> None:
        while self.probation:
            self._turn_away(self.probation.popleft()[0])
        await self.listener.aclose()


def ticket_of(stream: trio.abc.Stream) -> Ticket:
    """The `Ticket` of a stream a gated listener accepted (TLS: of the stream under it)."""
    if isinstance(stream, trio.SSLStream):
        stream = stream.transport_stream
    assert isinstance(stream, GatedStream)
    return stream.ticket


async def run_gated(handler: Handler, stream: trio.abc.Stream) -> None:
    """Serve one accepted ``stream`` with ``handler``; close it afterwards.

    Cancellation: the handler is cancelled when the listener shuts the connection
    down while it is still pending (`Ticket.shut`)."""
    ticket = ticket_of(stream)
    try:
        with trio.CancelScope() as scope:
            ticket.scope = scope
            if ticket.shut_down:
                scope.cancel()
            await handler(stream)
    finally:
        ticket.scope = None
        await trio.aclose_forcefully(stream)


async def serve_gated(
    handler: Handler,
    listeners: Sequence[GatedListener],
    *,
    handler_nursery: trio.Nursery,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve every listener of ``listeners`` (`GatedListener.serve`) until cancelled."""
    async with trio.open_nursery() as nursery:
        for listener in listeners:
            await nursery.start(listener.serve, handler, handler_nursery)
        task_status.started()


def gate(
    listeners: list[trio.SocketListener],
    admission: Admission,
    tls: ssl.SSLContext | None = None,
) -> list[GatedListener]:
    """``listeners``, each counting its connections in ``admission`` (planned now)."""
    admission.plan()
    return [GatedListener(listener, admission, tls) for listener in listeners]
