"""The attach relay: a ``memtrio mcp`` child's session, relayed line by line between its stdio
and the owner of its home (the ``memtrio serve`` that ``actors.net.attach`` found or started),
and carried over to a new owner when that one goes away.

The lines of stdin go to the owner's connection (the first ``initialize`` with the
child's directory as ``params._meta["memtrio/root"]``, ``actors.net.relay_lines``),
the owner's lines to stdout. On the way the relay notes the requests in flight (by
id) and what it needs to replay the session: the ``initialize`` request, the
protocol version the owner negotiated, ``notifications/initialized``, the last
``logging/setLevel``.

The owner gone (its connection closed or broken while the client is still there):
each request it had not answered is answered here, once, with the JSON-RPC error
`NOT_ACKNOWLEDGED` ("not acknowledged, retry"; it may or may not have taken effect;
nothing acknowledged is lost, since the server answers a write only after its
commit). Then the relay finds or starts a new owner (``find``), replays the session to
it under ids of its own (`RELAY_ID`: their answers never reach the client) and relays
on. Lines the client sends meanwhile wait in the pipe and go to the new owner; the
rest of a long line cut in the middle is dropped. A child that cannot re-attach
within `REATTACH_TIMEOUT` (`EXISTING_REATTACH_TIMEOUT` with ``attach = "existing"``),
or whose owners keep going away, exits 1 with one line (`GONE`).

Before the owner answers: the first child of a home (no owner runs yet, it starts one)
answers the client's ``initialize``, ``notifications/initialized``, ``ping`` and
``tools/list`` itself while the owner starts (`Relay.answer_early`, with the answers of
a Session of its own application, features set up but no actor started), then replays
the session to the owner as to a new one. The first line it cannot answer itself (a
tool call) waits for the owner.

Ending: EOF on stdin is passed on as EOF on the connection (a half-close); the
server answers what it was sent, then closes, and the relay exits 0 once those
answers are written out. A client that closed stdout is gone too: exit 0.

Why plain trio tasks and not a supervision tree: the relay is two pumps over one
connection and a loop that replaces the connection; what must survive a lost owner
(the session to replay, the requests in flight, the lines not yet sent) lives in the
`Relay` object, not in the tasks, which are started again on the next connection.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import trio

from ...protocol import jsonrpc, mcp
from . import relay_lines
from .relay_lines import READ_SIZE, InitializeRoot, Piece, ServerLines

# Ids of the requests the relay itself sends to a new owner (the replayed session):
# their answers are not the client's and are not passed on.
RELAY_ID = "memtrio-relay/"
# How long a child whose owner went away keeps trying to find or start a new one
# (attach = "auto"), or to find one that another program restarts ("existing").
REATTACH_TIMEOUT = 30.0
EXISTING_REATTACH_TIMEOUT = 3.0
# Pause between two looks for an owner while re-attaching.
REATTACH_POLL = 0.1
# How long the new owner may take to answer the replayed initialize.
REPLAY_TIMEOUT = 10.0
# A child whose owners keep going away (more than this many within REATTACH_PERIOD
# seconds) stops trying: something kills every owner.
MAX_REATTACHES = 5
REATTACH_PERIOD = 60.0
# JSON-RPC error code of a request the owner went away before answering.
NOT_ACKNOWLEDGED = -32004
# JSON-RPC error code of every request of a session no server could be started for
# (`Relay.refuse`); its message is the reason, which says what to do.
NO_SERVER = -32005
NOT_ACKNOWLEDGED_MESSAGE = (
    "not acknowledged, retry: the memtrio server of this session (pid {pid}) went away "
    "before answering; the call may or may not have taken effect, and the session goes "
    "on with a new server"
)


@dataclass
class Owner:
    """A running ``memtrio serve`` that answered: its pid and the open connection to it."""

    pid: int
    stream: trio.SocketStream
    leftover: bytes = b""  # bytes received after the probe's answer
    ui: str = ""  # its dashboard's URL ("" without one)
    process: subprocess.Popen[bytes] | None = None  # when this child started it
    embedded: bool = False  # this child's own embedded server (no owner could be started)


class NoOwner(Exception):
    """There is no owner to attach to; the message says why."""


class GaveUp(NoOwner):
    """No owner can be started, for good: the one that was refused to start saying why (a
    newer or damaged store, a full disk), or the last of `attach.MAX_OWNER_STARTS` that
    exited at start. The message is the reason; the session is answered with it
    (`Relay.refuse`)."""


# Answers one whole line of the client's (a request of `EARLY_METHODS`) as the server's
# session would: the response line (b"" for a notification), None when it cannot.
EarlyAnswer = Callable[[bytes], Awaitable[bytes | None]]


def say(line: str) -> None:
    print(f"memtrio: {line}", file=sys.stderr, flush=True)


def _id_key(rid: object) -> tuple[str, object]:
    return (type(rid).__name__, rid)


@dataclass
class ClientSession:
    """What the relay keeps of the client's session, to replay it to a new owner."""

    initialize: bytes | None = None  # the initialize request as sent (root added)
    initialize_id: tuple[str, object] | None = None
    acknowledged: bool = False  # the owner answered initialize with a result
    protocol_version: str | None = None  # the version it negotiated
    initialized: bool = False  # the client sent notifications/initialized
    log_level: bytes | None = None  # its last logging/setLevel request


@dataclass
class InFlight:
    """The client's requests the owner has not answered yet, by id."""

    ids: Counter[tuple[str, object]] = field(default_factory=Counter)
    values: dict[tuple[str, object], jsonrpc.Id] = field(default_factory=dict)

    def add(self, rid: jsonrpc.Id) -> None:
        key = _id_key(rid)
        self.ids[key] += 1
        self.values[key] = rid

    def answered(self, rid: jsonrpc.Id) -> None:
        key = _id_key(rid)
        if self.ids.get(key, 0) > 0:
            self.ids[key] -= 1
            if not self.ids[key]:
                del self.ids[key]
                del self.values[key]

    def take(self) -> list[jsonrpc.Id]:
        """Every id in flight (each as often as it was sent), forgetting them."""
        taken = [self.values[key] for key, count in self.ids.items() for _ in range(count)]
        self.ids.clear()
        self.values.clear()
        return taken


class ClientGone(Exception):
    """The client closed stdout: nothing more can be answered."""


GONE = (
    "memtrio: the memtrio serve this session was attached to (pid {pid}) has gone away{why}; "
    "restart the session (the client then starts memtrio mcp again)"
)
DASHBOARD = "memtrio: dashboard at {url}"
NO_DASHBOARD = (
    "memtrio: the memtrio serve this session attached to (pid {pid}) runs without a dashboard; "
    "open one beside it with `memtrio ui`, or start it with --ui (stop it, and the next "
    "memtrio mcp --ui starts one with it)"
)


class Relay:
    """One client's session, relayed to the owner of its home and re-attached to a new one
    when it goes away (see the module docstring).

    ``find()`` is a new owner, connected, or None while there is none yet (it raises
    `NoOwner`, saying why, when there will be none); ``starts``: whether ``find``
    starts an owner when none runs (``attach = "auto"``), else it only looks.
    """

    def __init__(
        self,
        find: Callable[[], Awaitable[Owner | None]],
        root: Path,
        proto_in: int,
        proto_out: int,
        limit: int,
        *,
        starts: bool = False,
        ui: bool = False,
    ) -> None:
        self.find = find
        self.starts = starts
        self.ui = ui
        self.stdin = trio.lowlevel.FdStream(proto_in)
        self.stdout = trio.lowlevel.FdStream(proto_out)
        self.rewriter = InitializeRoot(root, limit)
        self.outbox: deque[Piece] = deque()  # read from the client, not yet sent
        self.dropping = False  # skipping the rest of a long line cut by a lost owner
        self.mid_line = False  # the last bytes sent were a piece of a long line, not its end
        self.stdin_eof = False
        self.session = ClientSession()
        self.in_flight = InFlight()
        self.reattached: deque[float] = deque()
        self.shown_ui: set[str] = set()
        self.relay_ids: set[str | int | None] = set()  # the relay's own requests, unanswered
        self.replays = 0
        self.processes: list[subprocess.Popen[bytes]] = []  # owners this child started
        self._stop_waiting: Callable[[], None] | None = None  # see answer_early

    # -- the client's side ------------------------------------------------------------------

    def note_client_line(self, line: bytes) -> None:
        """Track a whole line of the client's on its way to the owner."""
        decoded = jsonrpc.decode_line(line)
        messages: Sequence[jsonrpc.Decoded] = [decoded]
        if isinstance(decoded, jsonrpc.Batch):
            version = self.session.protocol_version if self.session.acknowledged else None
            if mcp.batch_refusal(version) is not None:
                return  # the owner refuses it whole, with one answer of id null
            messages = [jsonrpc.decode_line(e, in_batch=True) for e in decoded.elements]
        for message in messages:
            if isinstance(message, jsonrpc.Message):
                if message.has_id:
                    self.in_flight.add(message.id)
                    if message.method == "initialize" and message is decoded:
                        self.session.initialize = line
                        self.session.initialize_id = _id_key(message.id)
                        self.session.acknowledged = False
                    elif message.method == "logging/setLevel" and message is decoded:
                        self.session.log_level = line
                elif message.method == "notifications/initialized":
                    self.session.initialized = True
            elif isinstance(message, jsonrpc.Failure) and message.id is not None:
                self.in_flight.add(message.id)  # the server answers it with that id

    def next_to_send(self) -> bytes | None:
        """The next bytes of the outbox for the owner (tracked as sent), or None if empty."""
        while self.outbox:
            piece = self.outbox.popleft()
            if self.dropping:
                self.dropping = not piece.last
                continue
            self.mid_line = not piece.last
            if not piece.whole:
                return piece.data
            data = piece.data if self.rewriter.done else self.rewriter.rewrite(piece.data)
            if data.strip():
                self.note_client_line(data)
            return data
        return None

    async def upstream(self, stream: trio.SocketStream) -> bool:
        """Send the client's lines to the owner until stdin ends (then half-close); False
        when the owner's connection broke."""
        while True:
            data = self.next_to_send()
            if data is not None:
                try:
                    await stream.send_all(data)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    return False
                continue
            if self.stdin_eof:
                try:
                    await stream.send_eof()
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    return False
                return True
            try:
                chunk = await self.stdin.receive_some(READ_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                chunk = b""
            if chunk:
                self.outbox.extend(self.rewriter.lines.feed(chunk))
            else:
                self.stdin_eof = True
                self.outbox.extend(self.rewriter.lines.finish())

    async def answer_early(self, answer: EarlyAnswer, ready: trio.Event) -> None:  # noqa: C901
        """Until ``ready`` is set (the owner is connected, or will not be): read the client's
        lines and answer those of `EARLY_METHODS` with ``answer``, noting the session to
        replay to the owner; stop at the first other line (it stays in the outbox, for the
        owner), a piece of a long line, or EOF.

        Cancellation: ``ready`` interrupts only the wait for more input, never a line in
        hand, so every line read is either answered here or left for the owner.
        """
        while True:
            while self.outbox:
                piece = self.outbox[0]
                if not piece.whole:
                    return
                if not piece.data.strip():
                    self.outbox.popleft()
                    continue
                method = relay_lines.early_method(piece.data)
                if method is None or (method == "initialize" and self.rewriter.done):
                    return  # not answerable here (a second initialize: the owner's)
                line = self.rewriter.rewrite(piece.data) if method == "initialize" else piece.data
                reply = await answer(line)
                if reply is None:  # this child could not answer it: the owner will
                    self.rewriter.done = False
                    return
                self.outbox.popleft()
                if method == "initialize":
                    self.session.initialize = line
                    version = relay_lines.result_version(reply)
                    self.session.acknowledged = version is not None
                    self.session.protocol_version = version
                    self.rewriter.done = version is not None
                elif method == "notifications/initialized":
                    self.session.initialized = True
                if reply:
                    await self.write_out(reply)
            if self.stdin_eof or ready.is_set():
                return
            chunk = b""
            with trio.CancelScope() as waiting:
                self._stop_waiting = waiting.cancel
                if ready.is_set():
                    return
                chunk = await self.stdin.receive_some(READ_SIZE)
                if chunk:
                    self.outbox.extend(self.rewriter.lines.feed(chunk))
                else:
                    self.stdin_eof = True
                    self.outbox.extend(self.rewriter.lines.finish())
            self._stop_waiting = None
            if waiting.cancelled_caught:
                return

    def owner_ready(self) -> None:
        """Stop `answer_early`'s wait for input (the owner is there, or will not be)."""
        if self._stop_waiting is not None:
            self._stop_waiting()

    # -- the owner's side -------------------------------------------------------------------

    async def write_out(self, data: bytes) -> None:
        try:
            await self.stdout.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            raise ClientGone from None

    def note_server_line(self, line: bytes) -> bool:
        """Track a whole line of the owner's; whether it is for the client (not an answer to
        one of the relay's own requests)."""
        if b'"id"' not in line:
            return True  # a notification
        decoded = jsonrpc.decode_line(line)
        responses = (
            [jsonrpc.decode_line(e, in_batch=True) for e in decoded.elements]
            if isinstance(decoded, jsonrpc.Batch)
            else [decoded]
        )
        for response in responses:
            if not isinstance(response, jsonrpc.Response):
                continue
            if response.id in self.relay_ids:
                self.relay_ids.discard(response.id)
                return False
            self.in_flight.answered(response.id)
            if (
                self.session.initialize_id == _id_key(response.id)
                and response.result is not None
                and not self.session.acknowledged
            ):
                self.session.acknowledged = True
                self.session.protocol_version = relay_lines.protocol_version(response.result)
        return True

    async def downstream(self, lines: ServerLines) -> None:
        """Write the owner's lines out until its connection ends."""
        while (got := await lines.next()) is not None:
            line, whole = got
            if not whole or self.note_server_line(line):
                await self.write_out(line)

    # -- one connection -------------------------------------------------------------------

    async def pump(self, owner: Owner, lines: ServerLines) -> bool:
        """Relay over ``owner``'s connection until it ends; whether it ended as the client
        asked (stdin closed and every answer written out).

        Error handling: `ClientGone` when the client closed stdout.
        """
        sent_eof = False

        async def up(cancel: trio.CancelScope) -> None:
            nonlocal sent_eof
            ok = await self.upstream(owner.stream)
            sent_eof = ok
            if not ok:
                # The downstream pump sees the connection end; do not wait on it forever.
                await trio.sleep(1.0)
                cancel.cancel()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(up, nursery.cancel_scope)
            await self.downstream(lines)
            nursery.cancel_scope.cancel()
        if lines.passing:
            await self.write_out(b"\n")  # end a line the owner did not finish
        return sent_eof and not self.in_flight.ids

    async def answer_in_flight(self, pid: int) -> None:
        """Answer each request the owner did not, once, with `NOT_ACKNOWLEDGED`."""
        message = NOT_ACKNOWLEDGED_MESSAGE.format(pid=pid)
        for rid in self.in_flight.take():
            data = {"retry": True, "reason": "the server went away"}
            await self.write_out(jsonrpc.error_response(rid, NOT_ACKNOWLEDGED, message, data))

    # -- the loop ---------------------------------------------------------------------------

    async def run(self, owner: Owner) -> int:
        """Relay until the client ends the session; the exit code.

        Error handling: when no new owner can be started (`GaveUp`), one line says why
        and the rest of the session is answered with it (`refuse`).
        """
        try:
            return await self._run(owner)
        except ClientGone:
            return 0
        except GaveUp as exc:
            say(str(exc))
            return await self.refuse(str(exc))
        finally:
            for process in self.processes:
                process.poll()  # reap an owner of ours that exited

    async def refuse(self, reason: str) -> int:
        """Answer every request of the client (those read already, then each line of stdin
        until EOF) with the JSON-RPC error `NO_SERVER` whose message is ``reason``: no server
        can serve this session, and the client learns why at once instead of waiting on a
        call that nobody will answer. Exit code 1 (0 if the client closed stdout).
        """
        try:
            for rid in self.in_flight.take():
                await self.write_out(jsonrpc.error_response(rid, NO_SERVER, reason))
            while True:
                while self.outbox:
                    piece = self.outbox.popleft()
                    if piece.whole:
                        ids = relay_lines.request_ids(piece.data)
                    else:  # a line longer than the limit: one answer, at its end
                        ids = [None] if piece.last else []
                    for rid in ids:
                        await self.write_out(jsonrpc.error_response(rid, NO_SERVER, reason))
                if self.stdin_eof:
                    return 1
                try:
                    chunk = await self.stdin.receive_some(READ_SIZE)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    chunk = b""
                if chunk:
                    self.outbox.extend(self.rewriter.lines.feed(chunk))
                else:
                    self.stdin_eof = True
                    self.outbox.extend(self.rewriter.lines.finish())
        except ClientGone:
            return 0

    def close(self) -> None:
        """Close the relay's ends of stdin and stdout (copies of the protocol's descriptors).

        Closing them restores the blocking mode trio changed on the descriptions they share
        with the protocol's descriptors: done now, before an embedded server in this process
        makes them non-blocking again, and not whenever the garbage collector gets to it
        (then its event loop would block in a read of stdin and answer nothing).
        """
        self.stdin.close()
        self.stdout.close()

    async def _run(self, owner: Owner) -> int:
        self.show_dashboard(owner)
        lines = ServerLines(owner.stream, owner.leftover)
        if self.session.acknowledged and not await self.replay(owner, lines):
            # The session answered early (answer_early) did not reach this owner.
            await trio.aclose_forcefully(owner.stream)
            found = await self.reattach(owner.pid)
            if found is None:
                return 1
            owner, lines = found
            self.show_dashboard(owner)
        while True:
            done = await self.pump(owner, lines)
            await trio.aclose_forcefully(owner.stream)
            if owner.process is not None:
                owner.process.poll()
            if done:
                return 0
            await self.answer_in_flight(owner.pid)
            if self.stdin_eof and not self.outbox:
                return 0  # the client is done: nothing to re-attach for
            if self.mid_line:
                self.dropping = True  # the rest of a long line cut in the middle
                self.mid_line = False
            found = await self.reattach(owner.pid)
            if found is None:
                return 1
            owner, lines = found
            self.show_dashboard(owner)

    async def reattach(self, gone: int) -> tuple[Owner, ServerLines] | None:
        """Find or start a new owner and replay the session to it; None (after the `GONE`
        line) when there is none within `REATTACH_TIMEOUT`."""
        now = trio.current_time()
        while self.reattached and now - self.reattached[0] > REATTACH_PERIOD:
            self.reattached.popleft()
        if len(self.reattached) >= MAX_REATTACHES:
            why = f" ({MAX_REATTACHES} times within {REATTACH_PERIOD:g} s: something stops them)"
            print(GONE.format(pid=gone, why=why), file=sys.stderr, flush=True)
            return None
        self.reattached.append(now)
        say(f"the memtrio serve of this session (pid {gone}) went away; attaching to a new one")
        why = ""
        timeout = REATTACH_TIMEOUT if self.starts else EXISTING_REATTACH_TIMEOUT
        with trio.move_on_after(timeout):
            while True:
                owner: Owner | None = None
                try:
                    owner = await self.find()
                except GaveUp:
                    raise
                except NoOwner as exc:
                    why = f": {exc}"
                if owner is not None:
                    if owner.process is not None:
                        self.processes.append(owner.process)
                    lines = ServerLines(owner.stream, owner.leftover)
                    if await self.replay(owner, lines):
                        say(f"re-attached to memtrio serve pid {owner.pid}")
                        return owner, lines
                    await trio.aclose_forcefully(owner.stream)
                await trio.sleep(REATTACH_POLL)
        if not self.starts and not why:
            why = " and no other memtrio serve of this home runs"
        print(GONE.format(pid=gone, why=why), file=sys.stderr, flush=True)
        return None

    async def replay(self, owner: Owner, lines: ServerLines) -> bool:  # noqa: C901
        """Replay the client's session to a new owner; whether it took it.

        The ``initialize`` (with the protocol version the first owner negotiated, under a
        relay id whose answer the client does not see), ``notifications/initialized``
        and the last ``logging/setLevel``. A session whose ``initialize`` was never
        answered has nothing to replay: the client sends it again.
        """
        session = self.session
        if session.initialize is None or not session.acknowledged:
            self.rewriter.done = False  # the client's next initialize gets its root again
            return True
        self.replays += 1
        rid = f"{RELAY_ID}initialize-{self.replays}"
        request = relay_lines.replayed(session.initialize, rid)
        if request is None:
            return True
        if session.protocol_version:
            request["params"]["protocolVersion"] = session.protocol_version
        answer: jsonrpc.Response | None = None
        try:
            await owner.stream.send_all(msgspec.json.encode(request) + b"\n")
            with trio.move_on_after(REPLAY_TIMEOUT):
                while (got := await lines.next()) is not None:
                    line, whole = got
                    if whole and (answer := relay_lines.answer_to(line, rid)) is not None:
                        break
                    if not whole or self.note_server_line(line):
                        await self.write_out(line)
            if answer is None:
                return False  # gone again, or no answer in time
            if answer.error is not None and not owner.embedded:  # that one said why itself
                refused = bytes(answer.error)[:300].decode(errors="replace")
                say(f"memtrio serve pid {owner.pid} refused the session's initialize: {refused}")
            if session.initialized:
                note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
                await owner.stream.send_all(msgspec.json.encode(note) + b"\n")
            level_id = f"{RELAY_ID}set-level-{self.replays}"
            level = relay_lines.replayed(session.log_level, level_id) if session.log_level else None
            if level is not None:
                self.relay_ids.add(level_id)
                await owner.stream.send_all(msgspec.json.encode(level) + b"\n")
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            return False
        return True

    def show_dashboard(self, owner: Owner) -> None:
        """With ``--ui``: the owner's dashboard URL (or that it has none), once each."""
        if not self.ui:
            return
        line = DASHBOARD.format(url=owner.ui) if owner.ui else NO_DASHBOARD.format(pid=owner.pid)
        if line not in self.shown_ui:
            self.shown_ui.add(line)
            print(line, file=sys.stderr, flush=True)
