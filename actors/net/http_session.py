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
(``<stream>-<sequence>``) and is kept (the last `EVENT_LOG_LIMIT` of the
session), so a client whose connection dropped reconnects with
``Last-Event-ID`` and gets what it missed (`HttpSession.resume`).

State that must survive a restart of the router or the Session (the streams,
the mailboxes, the `SessionState`) is owned here, outside the actors.
"""

from __future__ import annotations

import itertools
import secrets
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

import msgspec
import trio

from ...protocol import jsonrpc
from ...protocol.messages import Outbound, SessionInput
from ...supervisors import trace
from ...supervisors.context import AppContext
from ...supervisors.grants import Grant
from ...supervisors.supervisor import PERMANENT, ChildContext, ChildSpec, Mailbox
from ..session import Session, run_session
from ..session_state import SessionState
from .connections import Connection

# Events kept per session for resumption (the oldest go first).
EVENT_LOG_LIMIT = 1000
# The standalone (GET) stream is stream 0 of its session.
STANDALONE = 0
# Ids of cancelled requests remembered (their late answers are dropped).
CANCELLED_LIMIT = 1000


class _Head(msgspec.Struct):
    """What the router reads of an outgoing message: where it goes."""

    id: int | str | None = None
    method: str | None = None


_head = msgspec.json.Decoder(_Head | list[_Head])


def new_session_id() -> str:
    """A cryptographically random session id (visible ASCII, URL-safe)."""
    return secrets.token_urlsafe(32)


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
    changed: trio.Event = field(default_factory=trio.Event)

    def notify(self) -> None:
        self.changed.set()
        self.changed = trio.Event()


class HttpSession:
    """The lasting state of one HTTP session (owned by the listener, not by an actor)."""

    def __init__(
        self, app: AppContext, sid: str, conn: Connection, *, grant: Grant | None = None
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
        self.kept: deque[tuple[Stream, int]] = deque()
        self.cancelled: dict[jsonrpc.Id, None] = {}
        self.last_active = trio.current_time()
        # Requests being answered and streams being read: a busy session never expires.
        self.busy = 0
        self.ended = False
        self._sequence = itertools.count(1)
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

    def open_stream(self, ids: Iterable[jsonrpc.Id]) -> Stream:
        """A new POST stream for the answers of the requests ``ids``."""
        stream = Stream(next(self._numbers))
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
        """The stream and sequence of a ``Last-Event-ID``, None when it is not one of ours."""
        number, sep, sequence = event_id.strip().partition("-")
        if not sep or not number.isdigit() or not sequence.isdigit():
            return None
        stream = self.streams.get(int(number))
        if stream is None:
            return None
        return stream, int(sequence)

    # -- delivery (the router) -----------------------------------------------

    def deliver(self, line: bytes) -> None:
        """Put one outgoing line on the stream it belongs to."""
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
        stream.events.append((sequence, data))
        self.kept.append((stream, sequence))
        while len(self.kept) > EVENT_LOG_LIMIT:
            old, old_sequence = self.kept.popleft()
            if old.events and old.events[0][0] == old_sequence:
                old.events.popleft()
            if old.done and not old.events and old.number != STANDALONE:
                self.streams.pop(old.number, None)
        stream.notify()
        return sequence

    async def next_events(
        self, stream: Stream, after: int, reader: object
    ) -> list[tuple[int, bytes]] | None:
        """The events of ``stream`` after sequence ``after``, waiting for one; None once the
        stream is done (or the session ended, or another reader took the stream over)."""
        while True:
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

    def end(self) -> None:
        """The session is over: every reader returns, nothing is delivered any more."""
        self.ended = True
        self.by_request.clear()
        for stream in self.streams.values():
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
