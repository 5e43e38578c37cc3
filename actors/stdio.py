"""The stdio transport: StdioReader and StdoutWriter actors around a Session.

- **StdioReader** reads bytes, splits lines (bounded: a line over the request
  limit is answered and skipped, never buffered whole) and hands complete lines
  to the Session. It never raises on input. EOF becomes `Closed`.
- **StdoutWriter** is the only writer of the protocol stream: whole lines,
  never interleaved, batched when several are queued.

The protocol stream is a private duplicate of the process's stdout; file
descriptor 1 itself is pointed at stderr, so nothing else (a stray print, a
child process) can ever write into the protocol.

State that must survive a restart (the reader's partial line, the writer's
line in hand, the session's negotiated version) lives in objects owned by the
transport supervisor, not in the actors.

The transport is the root's last child: it starts once every feature's actors
have (the store opened, the pools started). Until then, `EarlyAnswers` reads the
client's first lines and answers those a session answers from the features' set-up
alone (``initialize``, ``ping``, ``tools/list``, ``notifications/initialized``),
so a client is not kept waiting for ``initialize`` while the actors start. The
first other line (a tool call, say) ends it: that line and everything after it
wait, read and in order, for the transport's own reader and session. If the
application fails to start instead, they are handed, with the partial line, to
what answers the client in its place (`StdioTransport.leave`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import trio

from ..protocol import jsonrpc
from ..protocol.jsonrpc import ID_PREFIX_BYTES, recover_id
from ..protocol.messages import Closed, Inbound, Outbound, Oversized, SessionInput, Unanswered
from ..supervisors import faults, trace
from ..supervisors.context import AppContext
from ..supervisors.supervisor import (
    ONE_FOR_ONE,
    PERMANENT,
    ChildContext,
    ChildSpec,
    Mailbox,
    Supervisor,
    supervisor_child,
)
from .answers import Answer
from .session import DECODE_IN_THREAD_BYTES, Session, run_session
from .session_state import SessionState

READ_SIZE = 65536


@dataclass
class ReaderState:
    """The reader's partial input; kept across reader restarts."""

    buffer: bytearray = field(default_factory=bytearray)
    discarding: bool = False
    discarded: int = 0
    prefix: bytes = b""
    suffix: bytes = b""
    eof: bool = False
    # Items read but not yet handed to the session: a reader stopped in the
    # middle of a send leaves them to the next incarnation.
    outgoing: deque[SessionInput] = field(default_factory=deque)


@dataclass
class WriterState:
    """The line in hand of the writer; kept across writer restarts."""

    pending: bytes = b""


def _tail(kept: bytes, more: bytes) -> bytes:
    """The last `ID_PREFIX_BYTES` of ``kept + more``."""
    if len(more) >= ID_PREFIX_BYTES:
        return bytes(more[-ID_PREFIX_BYTES:])
    return (kept + more)[-ID_PREFIX_BYTES:]


class LineSplitter:
    """Splits a byte stream into lines of at most ``limit`` bytes.

    A longer line is dropped as it arrives (only its first and last
    `ID_PREFIX_BYTES` are kept, to recover its top-level id) and reported as
    `Oversized`.
    """

    def __init__(self, state: ReaderState, limit: int) -> None:
        self.state = state
        self.limit = limit

    def feed(self, data: bytes) -> list[SessionInput]:  # noqa: C901
        st = self.state
        out: list[SessionInput] = []
        lines: list[bytes] = []
        start = 0
        while True:
            nl = data.find(b"\n", start)
            if nl < 0:
                rest = data[start:]
                if st.discarding:
                    st.discarded += len(rest)
                    st.suffix = _tail(st.suffix, rest)
                else:
                    st.buffer += rest
                    if len(st.buffer) > self.limit:
                        st.discarding = True
                        st.prefix = bytes(st.buffer[:ID_PREFIX_BYTES])
                        st.suffix = bytes(st.buffer[-ID_PREFIX_BYTES:])
                        st.discarded = len(st.buffer)
                        st.buffer = bytearray()
                break
            piece = data[start:nl]
            start = nl + 1
            if st.discarding:
                st.discarded += len(piece)
                st.suffix = _tail(st.suffix, piece)
                if lines:
                    out.append(Inbound(lines))
                    lines = []
                out.append(Oversized(st.discarded, self.limit, recover_id(st.prefix, st.suffix)))
                st.discarding = False
                st.discarded = 0
                st.prefix = st.suffix = b""
                continue
            if st.buffer:
                st.buffer += piece
                line = bytes(st.buffer)
                st.buffer = bytearray()
            else:
                line = piece
            if len(line) > self.limit:
                if lines:
                    out.append(Inbound(lines))
                    lines = []
                rid = recover_id(line[:ID_PREFIX_BYTES], line[-ID_PREFIX_BYTES:])
                out.append(Oversized(len(line), self.limit, rid))
                continue
            line = line.strip()
            if line:
                lines.append(line)
        if lines:
            out.append(Inbound(lines))
        return out

    def finish(self) -> list[SessionInput]:
        """At EOF: a last line without a newline still counts."""
        st = self.state
        out: list[SessionInput] = []
        if st.discarding:
            out.append(Oversized(st.discarded, self.limit, recover_id(st.prefix, st.suffix)))
            st.discarding = False
            st.prefix = st.suffix = b""
        elif st.buffer.strip():
            out.append(Inbound([bytes(st.buffer).strip()]))
        st.buffer = bytearray()
        return out


async def run_reader(
    ctx: ChildContext,
    *,
    stream: trio.abc.ReceiveStream,
    inbox: Mailbox[SessionInput],
    state: ReaderState,
    limit: int,
    name: str = "stdio.reader",
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Child start function of a reader actor (any byte stream, one line per message)."""
    splitter = LineSplitter(state, limit)
    task_status.started()
    if state.eof:
        with ctx.cancel_on_shutdown(trio.CancelScope()):
            await _hand_over(state, inbox)
        await ctx.shutdown.wait()
        return
    with ctx.cancel_on_shutdown(trio.CancelScope()):
        while True:
            await _hand_over(state, inbox)  # what a stopped incarnation left
            if faults.ACTIVE:
                await faults.hit("stdio.read")
            try:
                data = await stream.receive_some(READ_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                trace.event(
                    name, "read_failed", level="warning", error=f"{type(exc).__name__}: {exc}"
                )
                data = b""
            if not data:
                state.eof = True
                state.outgoing.extend([*splitter.finish(), Closed()])
                await _hand_over(state, inbox)
                break
            state.outgoing.extend(splitter.feed(bytes(data)))  # bytes(b) is b: no copy
            await _hand_over(state, inbox)
    await ctx.shutdown.wait()


async def _hand_over(state: ReaderState, inbox: Mailbox[SessionInput]) -> None:
    """Send the queued items in order; an item leaves the queue only once sent."""
    while state.outgoing:
        await inbox.send(state.outgoing[0])
        state.outgoing.popleft()


async def run_writer(  # noqa: C901
    ctx: ChildContext,
    *,
    stream: trio.abc.SendStream,
    outbox: Mailbox[Outbound],
    state: WriterState,
    on_peer_gone: Callable[[], None] | None = None,
    name: str = "stdio.writer",
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Child start function of a writer actor: whole lines, in order, batched.

    Error handling: if the peer closed the stream, the writer reports it through
    ``on_peer_gone`` (the application then stops) and discards further output.
    """
    receive = outbox.receive_channel
    task_status.started()

    async def write(data: bytes) -> bool:
        state.pending = data
        if faults.ACTIVE:
            await faults.hit("stdio.write")
        try:
            await stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            trace.event(name, "peer_gone", level="info", error=f"{type(exc).__name__}: {exc}")
            state.pending = b""
            if on_peer_gone is not None:
                on_peer_gone()
            return False
        state.pending = b""
        return True

    alive = True
    if state.pending:
        alive = await write(state.pending)
    with ctx.cancel_on_shutdown(trio.CancelScope()):
        while True:
            first = await receive.receive()
            chunks = [first.line]
            while len(chunks) < 4096:
                try:
                    chunks.append(receive.receive_nowait().line)
                except trio.WouldBlock:
                    break
            if alive:
                alive = await write(b"".join(chunks))
    # Stopping: flush what is queued, then exit.
    with trio.CancelScope(shield=True), trio.move_on_after(5):
        chunks = []
        while True:
            try:
                chunks.append(receive.receive_nowait().line)
            except (trio.WouldBlock, trio.EndOfChannel):
                break
        if chunks and alive:
            await write(b"".join(chunks))


def transport_children(
    app: AppContext,
    in_stream: trio.abc.ReceiveStream,
    out_stream: trio.abc.SendStream,
    name: str = "stdio",
    *,
    session_state: SessionState | None = None,
    on_peer_gone: Callable[[], None] | None = None,
    early: EarlyAnswers | None = None,
) -> list[ChildSpec]:
    """Writer, Session and Reader specs (started in that order, stopped in reverse) of one
    line-framed connection.

    ``session_state`` defaults to a session whose repository is the server's
    directory and whose end stops the application (stdio); ``on_peer_gone``
    (default: stop the application) is called when the writer finds the peer gone.
    ``early``: what answered the connection before these actors start (its session
    state, its outbox and the input it read and left are theirs); the writer
    starts once it has stopped.
    """
    inbox: Mailbox[SessionInput] = Mailbox(f"{name}.inbox", 64)
    outbox: Mailbox[Outbound] = early.outbox if early else Mailbox(f"{name}.outbox", 4096)
    reader_state = early.reader_state if early else ReaderState()
    writer_state = WriterState()
    if early is not None:
        session_state = early.session_state
    elif session_state is None:
        session_state = SessionState(name=f"{name}.session", root=app.cwd, root_source="cwd")
    peer_gone = on_peer_gone if on_peer_gone is not None else (lambda: app.request_shutdown(0))
    limit = app.config.server.request_limit
    grace = app.config.server.shutdown_grace

    async def writer(
        ctx: ChildContext, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        if early is not None:
            await early.stop()  # the protocol stream has one writer at a time
        await run_writer(
            ctx,
            stream=out_stream,
            outbox=outbox,
            state=writer_state,
            on_peer_gone=peer_gone,
            name=f"{name}.writer",
            task_status=task_status,
        )

    async def session(
        ctx: ChildContext, *, task_status: trio.TaskStatus[Session] = trio.TASK_STATUS_IGNORED
    ) -> None:
        await run_session(
            ctx, app=app, state=session_state, inbox=inbox, outbox=outbox, task_status=task_status
        )

    async def reader(
        ctx: ChildContext, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        await run_reader(
            ctx,
            stream=in_stream,
            inbox=inbox,
            state=reader_state,
            limit=limit,
            name=f"{name}.reader",
            task_status=task_status,
        )

    return [
        ChildSpec(
            f"{name}.writer",
            writer,
            PERMANENT,
            shutdown=10.0,
            why="the only writer of the protocol stream; its line in hand survives a restart",
        ),
        ChildSpec(
            f"{name}.session",
            session,
            PERMANENT,
            shutdown=grace + 2.0,
            why="answers the client; its negotiated state survives a restart",
        ),
        ChildSpec(
            f"{name}.reader",
            reader,
            PERMANENT,
            shutdown=1.0,
            why="its partial line survives a restart, so no input is lost",
        ),
    ]


def transport_supervisor(children: list[ChildSpec], name: str = "stdio") -> Supervisor:
    """The supervisor of one transport's actors (``children``: see `transport_children`)."""
    # one_for_one: the three actors share no state with each other except the
    # supervisor-owned mailboxes and states, so one may restart alone. Intensity
    # 5 in 10 s: a transport failing faster than that is broken for good.
    return Supervisor(
        f"{name}-transport",
        children,
        ONE_FOR_ONE,
        max_restarts=5,
        period=10.0,
    )


# A result larger than the pipe (64 KiB by default on Linux) goes out in pieces,
# each waiting for the client to read the last: a larger pipe takes a page of
# results in one write (Linux only; 1 MiB is the unprivileged limit).
PIPE_SIZE = 1 << 20


def protect_stdout() -> tuple[int, int]:
    """Duplicate stdin/stdout for the protocol; point fds 0/1 at /dev/null and stderr.

    A pipe to the client is enlarged to `PIPE_SIZE` where the system allows it.
    """
    proto_in = os.dup(0)
    proto_out = os.dup(1)
    if sys.platform == "linux":
        with contextlib.suppress(OSError):  # not a pipe, or over the system's limit
            fcntl.fcntl(proto_out, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return proto_in, proto_out


# What a session answers from the features' set-up alone, before any actor runs.
EARLY_METHODS = frozenset({"initialize", "ping", "tools/list", "notifications/initialized"})


class EarlyAnswers:
    """Answers a connection's first lines while the application's actors start.

    `run` (started by the composition root once the features are set up, before
    the root supervisor starts their actors) reads the input as the reader does
    (into the reader's `ReaderState`) and answers each line whose method is in
    `EARLY_METHODS` with a `Session` on the connection's own `SessionState` (so
    the negotiated version and client carry over to the transport's session),
    writing the answers itself. It ends at the first other line, at EOF, or when
    `stop` is called: what it read and did not answer stays queued in the reader's
    state, in order, for the reader to hand to the session once the transport
    runs. No line is lost or answered twice: a line is taken off the queue once
    answered, and reading is the only step that `stop` interrupts.
    """

    def __init__(
        self,
        app: AppContext,
        in_stream: trio.abc.ReceiveStream,
        out_stream: trio.abc.SendStream,
        name: str = "stdio",
    ) -> None:
        self.app = app
        self.in_stream = in_stream
        self.out_stream = out_stream
        self.name = name
        self.reader_state = ReaderState()
        self.session_state = SessionState(name=f"{name}.session", root=app.cwd, root_source="cwd")
        self.outbox: Mailbox[Outbound] = Mailbox(f"{name}.outbox", 4096)
        self._scope = trio.CancelScope()
        self._running = False
        self._taken_over = False
        self._done = trio.Event()

    async def run(self) -> None:
        """Answer the early lines until the first line that needs the actors, EOF or `stop`."""
        if self._scope.cancel_called:
            self._done.set()
            return
        self._running = True
        try:
            with self._scope:
                await self._serve()
        finally:
            self._done.set()

    async def stop(self) -> None:
        """End `run` (if it runs) and wait until it has: then the transport's actors own the
        connection."""
        self._taken_over = True
        self._scope.cancel()
        if self._running:
            await self._done.wait()

    def unanswered(self) -> Unanswered | None:
        """What it read and did not answer, in order, the partial line included: for what
        answers the client instead when the application fails to start. None once the
        transport's actors took the connection over (what it read is theirs)."""
        if self._taken_over:
            return None
        state = self.reader_state
        return Unanswered(tuple(state.outgoing), bytes(state.buffer), state.discarding)

    async def _serve(self) -> None:
        state = self.reader_state
        splitter = LineSplitter(state, self.app.config.server.request_limit)
        session = Session(self.app, self.session_state, self.outbox)
        while True:
            try:
                data = await self.in_stream.receive_some(READ_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                return  # the reader meets the same failure and reports it
            with trio.CancelScope(shield=True):
                if data:
                    state.outgoing.extend(splitter.feed(bytes(data)))
                else:
                    state.eof = True
                    state.outgoing.extend([*splitter.finish(), Closed()])
                go_on = await self._answer_queued(session)
                if not await self._flush() or not go_on or state.eof:
                    return

    async def _answer_queued(self, session: Session) -> bool:
        """Answer the queued lines from the front while they are early ones; False once one is
        not (it and the rest stay queued)."""
        queue = self.reader_state.outgoing
        while queue:
            item = queue[0]
            if not isinstance(item, Inbound):
                return False
            lines = list(item.lines)
            while lines:
                taken, go_on = await self._answer(session, lines[0])
                if taken:
                    lines.pop(0)
                if not go_on:
                    if lines:
                        queue[0] = Inbound(lines)
                    else:
                        queue.popleft()
                    return False
            queue.popleft()
        return True

    async def _answer(self, session: Session, line: bytes) -> tuple[bool, bool]:
        """Serve ``line`` if it is an early one: (whether it was answered, whether to go on)."""
        if len(line) > DECODE_IN_THREAD_BYTES:
            return False, False
        msg = jsonrpc.decode_line(line)
        if not isinstance(msg, jsonrpc.Message) or msg.method not in EARLY_METHODS:
            return False, False
        try:
            await session.handle_message(msg, Answer(self.outbox))
        except Exception as exc:  # noqa: BLE001 - answered -32603 by the session; logged
            trace.failure(self.session_state.name, "early_answer_failed", exc, method=msg.method)
            return True, False
        return True, True

    async def _flush(self) -> bool:
        """Write the queued answers; False if the client is gone (the application then stops)."""
        chunks: list[bytes] = []
        while True:
            try:
                chunks.append(self.outbox.receive_channel.receive_nowait().line)
            except trio.WouldBlock:
                break
        if not chunks:
            return True
        try:
            await self.out_stream.send_all(b"".join(chunks))
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            trace.event(
                f"{self.name}.writer",
                "peer_gone",
                level="info",
                error=f"{type(exc).__name__}: {exc}",
            )
            self.app.request_shutdown(0)
            return False
        return True


class StdioTransport:
    """One MCP session on the file descriptors ``proto_in``/``proto_out`` (see
    `protect_stdout`): `child`, the root's last child, and `answer_early`, which
    answers ``initialize`` while the children before it start (`EarlyAnswers`)."""

    def __init__(self, app: AppContext, proto_in: int, proto_out: int) -> None:
        self.streams = (trio.lowlevel.FdStream(proto_in), trio.lowlevel.FdStream(proto_out))
        self.early = EarlyAnswers(app, *self.streams)
        # Built once, so a restart of the transport (rest_for_one after a store crash)
        # keeps the session and its input.
        self.specs = transport_children(
            app, self.early.in_stream, self.early.out_stream, early=self.early
        )

    def child(self) -> ChildSpec:
        return supervisor_child(
            lambda: transport_supervisor(self.specs),
            "transport",
            why="the stdio client connection",
        )

    async def answer_early(self) -> None:
        await self.early.run()

    def leave(self) -> Unanswered | None:
        """The application did not start: close the transport's descriptors (the caller
        answers the client on copies of them: ``actors.net.attach.refuse``) and return what
        the client sent that no one answered (`EarlyAnswers.unanswered`)."""

        async def close() -> None:  # now: collected later, they would make the copies blocking
            for stream in self.streams:
                await stream.aclose()

        trio.run(close)  # the application's own trio.run has returned
        return self.early.unanswered()
