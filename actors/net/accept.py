"""Accepting connections: every network listener of ``memtrio serve`` (http, tcp, ws and
the attach endpoint) accepts through a `GatedListener`, so a connection is counted
from ``accept`` on, whichever transport it is and whether or not it ever
authenticates (``actors.net.admission``: the socket budget, the pool of pending
connections and their deadline; ``actors.net.bind``: binding the address).

- **The budget.** A connection over the process's socket budget is closed at once,
  so ``accept`` never fails with ``EMFILE`` for everyone; the attach endpoint has a
  reserve the public listener cannot take.
- **The pending pool.** A newcomer to a full pool whose first bytes show a valid
  token (``actors.net.vouch``; any bytes under TLS) takes the place of a pending
  connection (`Admission.victim`); one that has sent nothing, or bytes without the
  token, waits on probation, without a task, for at most `PROBATION` seconds. A
  flood of such connections costs an ``accept`` and a ``close`` each; a client that
  sends its credentials with the connection always gets in.
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
import ssl
import struct
import termios
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import trio

from ...supervisors import trace
from .admission import Admission, Ticket
from .throttle import Throttle
from .vouch import Vouch, peek

# Seconds a silent newcomer to a full pool may wait on probation for its first bytes, and
# how often the waiting ones are looked at.
PROBATION = 0.25
PROBATION_TICK = 0.01
# Seconds the accept loop waits after EMFILE/ENFILE/ENOBUFS/ENOMEM before it retries.
ACCEPT_RETRY = 0.1
CAPACITY_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


def waiting(sock: trio.socket.SocketType) -> bool:
    """Whether bytes from the peer are waiting on ``sock`` (read nothing)."""
    try:
        raw = fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0")
    except OSError:
        return False
    return bool(struct.unpack("i", raw)[0])


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

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        data = await self.stream.receive_some(max_bytes)
        if data:
            self.ticket.spoke = True
        return data if isinstance(data, bytes) else bytes(data)

    def setsockopt(self, level: int, option: int, value: int | bytes) -> None:
        self.stream.setsockopt(level, option, value)

    def getsockopt(self, level: int, option: int, buffersize: int = 0) -> int | bytes:
        return self.stream.getsockopt(level, option, buffersize)

    async def aclose(self) -> None:
        self.ticket.admission.release(self.ticket)
        await self.stream.aclose()


Handler = Callable[[Any], Awaitable[object]]


class GatedListener(trio.abc.AsyncResource):
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
        vouch: Vouch | None = None,
    ) -> None:
        self.listener = listener
        self.admission = admission
        self.tls = tls
        # Encrypted bytes show no token: under TLS any bytes count (`actors.net.vouch`).
        self.vouch = vouch if tls is None else None
        self.socket = listener.socket
        self.pauses = 0
        self._pause_log = Throttle(first=1)
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
                if self._pause_log.due():
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
            victim = admission.victim(self._vouched(stream, spoke), now)
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
        vouched = self.vouch is not None and self._vouched(stream, spoke)
        gated = GatedStream(stream, self.admission.admit(stream, now, spoke, vouched))
        served: trio.abc.Stream = gated
        if self.tls is not None:
            served = trio.SSLStream(gated, self.tls, server_side=True, https_compatible=True)
        self._nursery.start_soon(run_gated, self._handler, served)

    def _leave_probation(self, now: float) -> None:
        """Make room on a full probation: its oldest newcomer is admitted if its bytes have
        arrived meanwhile (displacing a pending connection), else closed."""
        stream, _ = self.probation.popleft()
        if not self._vouched(stream, waiting(stream.socket)):
            self._turn_away(stream)
            return
        victim = self.admission.victim(True, now)
        if victim is not None:
            self.admission.evict(victim)
        self._start(stream, now, True)

    def _vouched(self, stream: trio.SocketStream, spoke: bool) -> bool:
        """Whether ``stream`` may take a pending connection's place: its first bytes have
        arrived and (with a `vouch`) show a valid token."""
        if not spoke:
            return False
        return self.vouch is None or self.vouch(peek(stream.socket))

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
                if self._vouched(stream, spoke) or not admission.full:
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

    Error handling: whatever the handler raises (a TLS handshake whose socket the
    gate shut meanwhile raises ``ClosedResourceError``, a library's bug in a
    transport's handshake or framing, an ``OSError`` of a connection that went
    away) ends this connection only: it is counted (`Admission.fail`, rate-limited
    log) and never reaches the listener, whose nursery would otherwise die with it
    and take every live session and the port down.

    Cancellation: the handler is cancelled when the listener shuts the connection
    down while it is still pending (`Ticket.shut`); a cancellation of the listener
    itself propagates."""
    ticket = ticket_of(stream)
    try:
        with trio.CancelScope() as scope:
            ticket.scope = scope
            if ticket.shut_down:
                scope.cancel()
            await handler(stream)
    except Exception as exc:  # ExceptionGroup included; Cancelled is a BaseException
        ticket.admission.fail(ticket, exc)
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
    vouch: Vouch | None = None,
) -> list[GatedListener]:
    """``listeners``, each counting its connections in ``admission`` (planned now);
    ``vouch``: what a newcomer's first bytes must show to displace a pending one."""
    admission.plan()
    return [GatedListener(listener, admission, tls, vouch) for listener in listeners]
