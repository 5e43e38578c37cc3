"""One Streamable HTTP session: its Session actor, its router and its SSE streams.

A session is created by an ``initialize`` POST and runs under its own
supervisor (`Connections.run`): the router (started first, stopped last, so the
answers of calls that drain at shutdown still reach their streams) and the
Session actor, which reads `Inbound` bodies from its inbox and writes one
`Outbound` line per answer.

The router reads the outbox and delivers each line to its *stream*:

- the answer of a request (or the array answering a batch) goes to the stream
  of the POST that carried it;
- a server request or notification (``roots/list``, a log message) goes to the
  session's *standalone* stream, which a GET opens; it waits there until one is.

Every event of a stream gets an id unique within the session
(``<stream>-<sequence>``) and is kept in the session's *replay log*, so a client
whose connection dropped reconnects with ``Last-Event-ID`` and gets what it
missed (`HttpSession.find_event`). The log is bounded: per session by
``[http] replay_events`` and ``replay_bytes``, for the whole listener by
``replay_total_bytes`` (`ReplayBudget`); the oldest events go first, whether or
not they were delivered. A stream that lost an event this way says so: its
reader stops (`EventsLost`) and a resume before the lost event is refused. The
answer of a JSON POST never enters the log (it carries no event id to resume
from), and a session's whole log is freed when the session ends.

State that must survive a restart of the router or the Session (the streams,
the mailboxes, the `SessionState`) is owned here, outside the actors.
"""

from __future__ import annotations

import itertools
import re
import secrets
from collections import OrderedDict, deque
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import msgspec
import trio

from ...protocol import jsonrpc
from ...protocol.messages import Outbound, SessionInput
from ...supervisors import trace
from ...supervisors.config import HttpConfig
from ...supervisors.context import AppContext
from ...supervisors.grants import Grant
from ...supervisors.supervisor import PERMANENT, ChildContext, ChildSpec, Mailbox
from ..session import Session, run_session
from ..session_state import SessionState
from .connections import Connection

# The standalone (GET) stream is stream 0 of its session.
STANDALONE = 0
# Ids of cancelled requests remembered (their late answers are dropped).
CANCELLED_LIMIT = 1000
# Bytes a kept event costs besides its data (its tuple, bytes object and log entries).
EVENT_OVERHEAD = 256
# An event id as memtrio writes it: ``<stream>-<sequence>``, ASCII digits (at most 18 each).
EVENT_ID = re.compile(r"([0-9]{1,18})-([0-9]{1,18})")


class _Head(msgspec.Struct):
    """What the router reads of an outgoing message: where it goes."""

    id: int | str | None = None
    method: str | None = None


_head = msgspec.json.Decoder(_Head | list[_Head])


def new_session_id() -> str:
    """A cryptographically random session id (visible ASCII, URL-safe)."""
    return secrets.token_urlsafe(32)


class EventsLost(Exception):
    """Events of a stream after the reader's position left the replay log (the client
    was too slow, or away too long): the stream cannot go on without a gap."""


class BadEventId(ValueError):
    """A ``Last-Event-ID`` that is not of the form memtrio writes (the client's fault)."""


@dataclass(frozen=True)
class ReplayLimits:
    """Bounds of the replay logs (``[http]``, docs/configuration.md)."""

    events: int = 1000
    session_bytes: int = 8 * 1024 * 1024
    total_bytes: int = 64 * 1024 * 1024

    @classmethod
    def of(cls, config: HttpConfig) -> ReplayLimits:
        return cls(config.replay_events, config.replay_bytes, config.replay_total_bytes)


class ReplayBudget:
    """The replay logs of every session of one listener, bounded together in bytes.

    Each kept event of any session has a ticket here, in the order it was kept;
    over `ReplayLimits.total_bytes` the oldest event of the listener goes first
    (the event being added is the one never dropped, so a single answer larger
    than every bound is still delivered). The SSE frames being written count too
    (`hold`): while a large answer is sent, older events make room for it, so the
    memory of streamed answers, kept and in flight, stays within the total.
    """

    def __init__(self, limits: ReplayLimits) -> None:
        self.limits = limits
        self.used = 0
        self.sending = 0  # bytes of SSE frames being written (`hold`)
        self._tickets = itertools.count(1)
        self._kept: OrderedDict[int, tuple[HttpSession, int]] = OrderedDict()

    def take(self, session: HttpSession, sequence: int, size: int) -> int:
        """Record a kept event (its ticket); drop the oldest events while over the total."""
        ticket = next(self._tickets)
        self._kept[ticket] = (session, sequence)
        self.used += size
        self._fit(keep=1)
        return ticket

    def _fit(self, keep: int) -> None:
        """Drop the oldest kept events while over the total (at least ``keep`` stay)."""
        while self.used + self.sending > self.limits.total_bytes and len(self._kept) > keep:
            _, (owner, old) = self._kept.popitem(last=False)
            owner.drop_event(old, ticketed=False)

    @contextmanager
    def hold(self, size: int) -> Iterator[None]:
        """Count ``size`` bytes being written (an SSE frame and the HTTP layer's copy of
        it) against the total while the block runs; older events make room for them."""
        self.sending += size
        try:
            self._fit(keep=0)
            yield
        finally:
            self.sending -= size

    def give_back(self, ticket: int, size: int, ticketed: bool = True) -> None:
        """An event left its session's log (``ticketed``: its ticket is still here)."""
        self.used -= size
        if ticketed:
            self._kept.pop(ticket, None)


@dataclass(eq=False)
class Stream:
    """One SSE stream of a session: the answers of one POST, or the standalone stream."""

    number: int
    # Request ids whose answers still have to come (a POST stream is done without any).
    waiting: set[jsonrpc.Id] = field(default_factory=set)
    # (sequence, JSON text) of the events kept; b"" is a priming event (no data).
    events: deque[tuple[int, bytes]] = field(default_factory=deque)
    done: bool = False
    # The response currently reading the stream (a resumed GET replaces it).
    reader: object | None = None
    # The last sequence handed to a reader (the standalone stream's backlog starts after it).
    delivered: int = 0
    # The last sequence of an event with data that left the replay log: a reader (or a
    # resume) before it would miss it.
    lost: int = 0
    # Whether its events go in the replay log: False for the answer of a JSON POST, which
    # its POST takes at once and no client can resume (its events carry no id).
    replay: bool = True
    changed: trio.Event = field(default_factory=trio.Event)

    def notify(self) -> None:
        self.changed.set()
        self.changed = trio.Event()


class HttpSession:
    """The lasting state of one HTTP session (owned by the listener, not by an actor)."""

    def __init__(
        self,
        app: AppContext,
        sid: str,
        conn: Connection,
        budget: ReplayBudget | None = None,
        *,
        grant: Grant | None = None,
    ) -> None:
        self.id = sid
        self.conn = conn
        self.inbox: Mailbox[SessionInput] = Mailbox(f"{conn.id}.inbox", 64)
        self.outbox: Mailbox[Outbound] = Mailbox(f"{conn.id}.outbox", 4096)
        self.state = SessionState(
            name=f"{conn.id}.session",
            root=None,
            root_source="none",
            on_close=conn.closed.set,
            grant=grant,
        )
        self.streams: dict[int, Stream] = {STANDALONE: Stream(STANDALONE)}
        self.by_request: dict[jsonrpc.Id, Stream] = {}
        self.budget = (
            budget if budget is not None else ReplayBudget(ReplayLimits.of(app.config.http))
        )
        self.limits = self.budget.limits
        # The replay log, oldest first: sequence -> (its stream, its size, its budget ticket).
        self.kept: OrderedDict[int, tuple[Stream, int, int]] = OrderedDict()
        self.kept_bytes = 0
        self.cancelled: dict[jsonrpc.Id, None] = {}
        self.last_active = trio.current_time()
        # Requests being answered and streams being read: a busy session never expires.
        self.busy = 0
        self.ended = False
        self._sequence = itertools.count(1)
        self._last_sequence = 0
        self._numbers = itertools.count(1)
        self.children = session_children(app, self)

    @property
    def standalone(self) -> Stream:
        return self.streams[STANDALONE]

    def touch(self) -> None:
        self.last_active = trio.current_time()

    def in_flight(self, ids: Iterable[jsonrpc.Id]) -> list[jsonrpc.Id]:
        """Those of ``ids`` that a request of this session still waits on."""
        return [rid for rid in ids if rid in self.by_request]

    def open_stream(self, ids: Iterable[jsonrpc.Id], replay: bool = True) -> Stream:
        """A new POST stream for the answers of the requests ``ids`` (``replay``: an SSE
        stream, whose events are kept for a resume)."""
        stream = Stream(next(self._numbers), replay=replay)
        stream.waiting.update(ids)
        self.streams[stream.number] = stream
        for rid in stream.waiting:
            self.by_request[rid] = stream
        return stream

    def cancel(self, rid: jsonrpc.Id) -> None:
        """The client cancelled request ``rid`` (``notifications/cancelled``): its stream
        stops waiting for it, and an answer that comes anyway is dropped."""
        stream = self.by_request.pop(rid, None)
        if stream is None:
            return
        self.cancelled[rid] = None
        while len(self.cancelled) > CANCELLED_LIMIT:
            del self.cancelled[next(iter(self.cancelled))]
        stream.waiting.discard(rid)
        if not stream.waiting:
            stream.done = True
            stream.notify()

    def prime(self, stream: Stream) -> int:
        """Add an empty event (the SSE priming event: its id lets a client resume)."""
        return self._append(stream, b"")

    def event_id(self, stream: Stream, sequence: int) -> str:
        return f"{stream.number}-{sequence}"

    def find_event(self, event_id: str) -> tuple[Stream, int] | None:
        """The stream and sequence of a ``Last-Event-ID``; None when it names no event of
        this session that can be resumed from: an unknown stream, a sequence never
        issued, or one after which events of the stream left the replay log.

        Error handling: a value that is not ``<stream>-<sequence>`` in ASCII digits
        raises `BadEventId`.
        """
        match = EVENT_ID.fullmatch(event_id.strip())
        if match is None:
            raise BadEventId(
                "Last-Event-ID must be an event id this server sent: <stream>-<sequence>, "
                "digits only"
            )
        stream = self.streams.get(int(match[1]))
        sequence = int(match[2])
        if (
            stream is None
            or not stream.replay
            or sequence > self._last_sequence
            or sequence < stream.lost
        ):
            return None
        return stream, sequence

    # -- delivery (the router) -----------------------------------------------

    def deliver(self, line: bytes) -> None:  # noqa: C901
        """Put one outgoing line on the stream it belongs to (none once the session ended)."""
        if self.ended:
            return
        data = line.strip()
        try:
            head = _head.decode(data)
        except msgspec.DecodeError:
            head = _Head(method="?")
        stream: Stream | None = None
        if isinstance(head, list):
            for element in head:
                found = self.by_request.pop(element.id, None) if element.id is not None else None
                if found is not None:
                    found.waiting.discard(element.id)
                    stream = stream or found
        elif head.method is None and head.id is not None:
            if head.id in self.cancelled:
                del self.cancelled[head.id]
                return  # the client cancelled it: it wants no answer
            stream = self.by_request.pop(head.id, None)
            if stream is not None:
                stream.waiting.discard(head.id)
        if stream is None:
            stream = self.standalone
        self._append(stream, data)
        if stream.number != STANDALONE and not stream.waiting:
            stream.done = True

    def _append(self, stream: Stream, data: bytes) -> int:
        sequence = next(self._sequence)
        self._last_sequence = sequence
        stream.events.append((sequence, data))
        if not stream.replay:  # its POST, waiting for it, takes it at once (then `forget`)
            stream.notify()
            return sequence
        size = len(data) + EVENT_OVERHEAD
        self.kept[sequence] = (stream, size, 0)
        self.kept_bytes += size
        limits = self.limits
        while (len(self.kept) > limits.events or self.kept_bytes > limits.session_bytes) and len(
            self.kept
        ) > 1:
            self.drop_event(next(iter(self.kept)))
        # Taken last: the listener-wide bound never drops the event being added.
        self.kept[sequence] = (stream, size, self.budget.take(self, sequence, size))
        stream.notify()
        return sequence

    def drop_event(self, sequence: int, ticketed: bool = True, lost: bool = True) -> None:
        """Take the event ``sequence`` (the oldest of its stream) out of the replay log.

        ``ticketed``: its budget ticket is still held (False when the budget drops it);
        ``lost``: a reader had not necessarily read it (False: it needs no resume).
        """
        entry = self.kept.pop(sequence, None)
        if entry is None:
            return
        stream, size, ticket = entry
        self.kept_bytes -= size
        self.budget.give_back(ticket, size, ticketed and ticket != 0)
        if stream.events and stream.events[0][0] == sequence:
            _, data = stream.events.popleft()
            if data and lost:
                stream.lost = max(stream.lost, sequence)
                stream.notify()  # a reader behind it stops (EventsLost)
        if stream.done and not stream.events and stream.number != STANDALONE:
            self.streams.pop(stream.number, None)

    def forget(self, stream: Stream, upto: int | None = None) -> None:
        """Take ``stream``'s events (up to sequence ``upto``) out of the replay log: they
        need no resume (a JSON answer, or a session that ended)."""
        while stream.events and (upto is None or stream.events[0][0] <= upto):
            sequence, _ = stream.events[0]
            if sequence in self.kept:
                self.drop_event(sequence, lost=False)
            else:  # a stream outside the log (a JSON answer)
                stream.events.popleft()

    async def next_events(
        self, stream: Stream, after: int, reader: object
    ) -> list[tuple[int, bytes]] | None:
        """The events of ``stream`` after sequence ``after``, waiting for one; None once the
        stream is done (or the session ended, or another reader took the stream over).

        Error handling: raises `EventsLost` when an event after ``after`` left the
        replay log before it could be read.
        """
        while True:
            if after < stream.lost:
                raise EventsLost(
                    f"events of stream {stream.number} after {after} left the replay log "
                    "([http] replay_events, replay_bytes, replay_total_bytes)"
                )
            fresh = [event for event in stream.events if event[0] > after]
            if fresh:
                if stream.reader is reader:
                    stream.delivered = max(stream.delivered, fresh[-1][0])
                return fresh
            if stream.done or self.ended or stream.reader is not reader:
                return None
            await stream.changed.wait()

    def close_stream(self, stream: Stream) -> None:
        """A POST stream fully read: forget it once its events leave the log."""
        if stream.done and not stream.events:
            self.streams.pop(stream.number, None)

    def retire(self) -> None:
        """The session was ended (DELETE, expiry): no resume can come any more, so only the
        events a reader still has to read stay until `end`."""
        for stream in list(self.streams.values()):
            self.forget(stream, None if stream.reader is None else stream.delivered)

    def end(self) -> None:
        """The session is over: every reader returns, nothing is delivered any more, and
        the replay log is freed."""
        self.ended = True
        self.by_request.clear()
        for stream in list(self.streams.values()):
            self.forget(stream)
            stream.done = True
            stream.notify()


async def run_router(
    ctx: ChildContext,
    *,
    session: HttpSession,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Child start function of the router: outbox lines -> the streams they belong to.

    Stopping: the lines already queued (the answers of calls that drained) are
    delivered before it exits.
    """
    receive = session.outbox.receive_channel
    task_status.started()
    with ctx.cancel_on_shutdown(trio.CancelScope()):
        async for out in receive:
            session.deliver(out.line)
            # The line delivered is no longer this task's: an idle session must not keep
            # its last answer (megabytes, outside the replay log's bounds) until the next.
            del out
    while True:
        try:
            session.deliver(receive.receive_nowait().line)
        except (trio.WouldBlock, trio.EndOfChannel):
            break


def session_children(app: AppContext, session: HttpSession) -> list[ChildSpec]:
    """The router and Session specs of one HTTP session (started in that order)."""
    grace = app.config.server.shutdown_grace

    async def router(
        ctx: ChildContext, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        await run_router(ctx, session=session, task_status=task_status)

    async def mcp_session(
        ctx: ChildContext, *, task_status: trio.TaskStatus[Session] = trio.TASK_STATUS_IGNORED
    ) -> None:
        await run_session(
            ctx,
            app=app,
            state=session.state,
            inbox=session.inbox,
            outbox=session.outbox,
            task_status=task_status,
        )

    trace.event(session.conn.id, "http_session", session=session.id[:8])
    return [
        ChildSpec(
            f"{session.conn.id}.router",
            router,
            PERMANENT,
            shutdown=2.0,
            why="delivers answers to the streams; the streams and the outbox survive a restart",
        ),
        ChildSpec(
            f"{session.conn.id}.session",
            mcp_session,
            PERMANENT,
            shutdown=grace + 2.0,
            why="answers the client; its negotiated state survives a restart",
        ),
    ]
