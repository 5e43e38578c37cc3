"""The attach relay: a ``memtrio mcp`` child that relays its stdio to the ``memtrio serve``
of its home, the *owner*, starting one when none runs.

An agent client launches ``memtrio mcp`` once per session. The child loads no
model and opens no store: it finds the owner through its runtime file
(``actors.net.runtime``: believed only if no one else could have written it),
checks that it answers (`find_owner`: its pid is alive, and its attach endpoint
proves it holds the file's secret, takes the child's proof (``actors.net.proof``)
and answers a ``ping`` within `PROBE_TIMEOUT`), then relays (`Relay`): the lines
of stdin to the connection, the connection's lines to stdout. The server runs
one Session per connection, so each child is one session of the shared server.

When no owner runs (``[serve] attach = "auto"``, the default), the first child
starts one (`start_owner`, ``actors.net.spawn``): a detached ``memtrio serve
--owner`` of the home, which publishes its runtime file like any ``memtrio
serve`` and exits on its own after ``[serve] idle_exit`` without sessions; the
other children find it. With ``attach = "existing"`` a child only attaches to a
running one. A runtime file that is there but not to be used (`Declined`: written
by someone else, a busy server, ...) is one line on stderr saying why, and the
child serves embedded.

On the way, the relay adds the child's working directory to the client's
``initialize`` request, as ``params._meta["memtrio/root"]``: the session's
repository is the one the agent was started in, as it would be embedded
(`InitializeRoot`). Every other line, a malformed one included, passes unchanged,
and the server answers it (``-32700`` for bad JSON).

The owner gone (its connection closed or broken while the client is still
there): each request the client sent that the owner had not answered is
answered here, once, with the JSON-RPC error `NOT_ACKNOWLEDGED` ("not
acknowledged, retry"; it may or may not have taken effect, nothing acknowledged
is lost since the server answers a write only after its commit); then the child
finds or starts a new owner, replays the client's session to it (its
``initialize``, with the protocol version the client negotiated, the
``initialized`` notification, its log level) and relays on. Lines the client
sends meanwhile wait in the pipe and go to the new owner. A child that cannot
re-attach within `REATTACH_TIMEOUT`, or whose owners keep going away, exits 1
with one line (`GONE`).

Ending: EOF on stdin is passed on as EOF on the connection (a half-close); the
server answers what it was sent, then closes, and the relay exits 0 once those
answers are written out. A client that closed stdout is gone too: exit 0.

Why plain trio tasks and not a supervision tree: the relay is two pumps over one
connection and a loop that replaces the connection; the state that must survive
a lost owner (the session to replay, the requests in flight, the lines not yet
sent) lives in the `Relay` object, not in the tasks, which are simply started
again on the next connection.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import trio

from ...protocol import jsonrpc
from . import proof, spawn
from . import runtime as runtime_file
from .listen import is_loopback

# How long the server may take to accept the probe's connection.
PROBE_TIMEOUT = 0.3
# How long a server that accepted the connection may take to prove itself and answer
# the ping: it is alive and listening, only busy (fifty children starting at once on two
# cores); giving up on it would start a second, embedded server with its own model.
BUSY_PROBE_TIMEOUT = 5.0
PROBE_ID = "memtrio-attach-probe"
READ_SIZE = 65536
ROOT_META = "memtrio/root"
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
# A server line longer than this is passed on as it arrives, not held whole.
SERVER_LINE_LIMIT = 256 * 1024 * 1024
# JSON-RPC error code of a request the owner went away before answering.
NOT_ACKNOWLEDGED = -32004
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


class Declined(Exception):
    """A runtime file is there but is not to be used (the message says why): the child
    serves embedded, and starts no owner."""


NOT_ATTACHING = "memtrio: serving embedded, not through the memtrio serve named in {path}: {why}"


def decline(home: Path, why: str) -> None:
    """Say in one line on stderr why this child serves embedded although a runtime file exists."""
    path = runtime_file.runtime_path(home)
    print(NOT_ATTACHING.format(path=path, why=why), file=sys.stderr, flush=True)


def say(line: str) -> None:
    print(f"memtrio: {line}", file=sys.stderr, flush=True)


async def find_owner(home: Path) -> Owner | None:
    """The ``memtrio serve`` of ``home`` that proves itself, connected; None if there is none.

    The runtime file is believed only if no one else could have written it
    (`runtime_file.read`), names a loopback address, holds a secret, and the
    listener there proves it holds that secret (``actors.net.proof``): until
    then the child sends it nothing but a random nonce.

    A runtime file whose process is dead, whose endpoint refuses the connection,
    that is not a runtime file, or whose listener gave a wrong proof (the port
    was taken over; one line on stderr says so) is stale: it is removed (if it
    did not change meanwhile) and the answer is None.

    Error handling: raises `Declined` (saying why) for a file not to be believed,
    one naming another host or holding no secret, and one whose process lives but
    does not accept within `PROBE_TIMEOUT` (or accepts but does not answer within
    `BUSY_PROBE_TIMEOUT`): its file is kept (a busy server, or a pid reused by
    another program: the next server replaces it).
    """
    try:
        found, raw = runtime_file.read(home)
    except runtime_file.Untrusted as exc:
        raise Declined(f"{exc}, so someone else may have written it") from None
    if found is None:
        if raw:
            runtime_file.remove_if_unchanged(home, raw)
        return None
    if not is_loopback(found.host):
        raise Declined(f"it names {found.host!r}, not a loopback address")
    secret = proof.parse_secret(found.secret)
    if secret is None:
        raise Declined(
            "it holds no valid attach secret (an older memtrio serve wrote it, or it is damaged); "
            "restart that server"
        )
    if not runtime_file.pid_alive(found.pid):
        runtime_file.remove_if_unchanged(home, raw)
        return None
    try:
        answer = await probe(found.host, found.port, secret, found.pid)
    except ConnectionRefusedError:
        runtime_file.remove_if_unchanged(home, raw)
        return None
    except proof.NoProof as exc:
        why = f"the listener on {found.host}:{found.port} did not prove itself: {exc}"
        if not exc.wrong:
            raise Declined(why) from None
        runtime_file.remove_if_unchanged(home, raw)
        say(f"ignoring {runtime_file.runtime_path(home)} (removed: stale): {why}")
        return None
    if answer is None:
        raise Declined(f"pid {found.pid} did not answer on {found.host}:{found.port} in time")
    stream, leftover = answer
    return Owner(found.pid, stream, leftover, ui=found.ui)


async def probe(
    host: str,
    port: int,
    secret: bytes,
    pid: int,
    timeout: float = PROBE_TIMEOUT,
    busy_timeout: float = BUSY_PROBE_TIMEOUT,
) -> tuple[trio.SocketStream, bytes] | None:
    """Connect (within ``timeout``), run the handshake (``actors.net.proof``: the listener
    proves it holds ``secret`` first), then send a ``ping``; the connection and what
    followed the pong (within ``busy_timeout`` of the connection).

    None when the endpoint does not accept or answer in time, or answers something else.

    Error handling: `ConnectionRefusedError` (nothing listens there) and
    `proof.NoProof` (the listener is not the server that wrote the file) propagate;
    other failures are None.
    """
    stream: trio.SocketStream | None = None
    try:
        with trio.move_on_after(timeout):
            stream = await trio.open_tcp_stream(host, port)
        if stream is None:
            return None
        with trio.move_on_after(busy_timeout):
            buffer = await proof.prove(stream, secret, pid, port)
            ping = msgspec.json.encode({"jsonrpc": "2.0", "id": PROBE_ID, "method": "ping"})
            await stream.send_all(ping + b"\n")
            while True:
                while b"\n" in buffer:
                    line, _, buffer = buffer.partition(b"\n")
                    if _is_pong(line):
                        answered, stream = stream, None
                        return answered, buffer
                data = await stream.receive_some(READ_SIZE)
                if not data:
                    break
                buffer += data
    except (OSError, trio.BrokenResourceError) as exc:
        if _refused(exc):
            raise ConnectionRefusedError(f"nothing listens on {host}:{port}") from None
        return None
    finally:
        if stream is not None:
            await trio.aclose_forcefully(stream)
    return None


def _refused(exc: BaseException) -> bool:
    """Whether ``exc`` (or, for `trio.open_tcp_stream`, every attempt behind it) was refused."""
    if isinstance(exc, ConnectionRefusedError):
        return True
    cause = exc.__cause__
    if isinstance(cause, BaseExceptionGroup):
        return all(_refused(e) for e in cause.exceptions)
    return cause is not None and _refused(cause)


def _is_pong(line: bytes) -> bool:
    try:
        msg = msgspec.json.decode(line)
    except msgspec.DecodeError:
        return False
    return isinstance(msg, dict) and msg.get("id") == PROBE_ID and "result" in msg


async def start_owner(home: Path, launch: spawn.Launch) -> Owner | None:
    """Start the owner of ``home`` (``actors.net.spawn``) unless another child just did;
    the owner, connected (None if it published but does not answer).

    Under the home's owner lock: look again (the child that held the lock may have
    started one), else launch ``memtrio serve --owner`` and wait until it publishes.

    Error handling: `Declined` as `find_owner` (an untrusted ``run/`` included);
    `spawn.OwnerFailed` when it could not be started (the message says why).
    """
    try:
        async with spawn.owner_lock(home):
            owner = await find_owner(home)
            if owner is not None:
                return owner
            process, log_start = spawn.launch(launch)
            await spawn.wait_published(home, process, log_start)
            owner = await find_owner(home)
            if owner is not None:
                owner.process = process
                say(
                    f"started memtrio serve pid {owner.pid}, the owner of {home} "
                    f"(its log: {spawn.log_path(home)})"
                )
            return owner
    except runtime_file.Untrusted as exc:
        raise Declined(f"{exc}, so someone else may have written it") from None
    except OSError as exc:
        raise spawn.OwnerFailed(f"{type(exc).__name__}: {exc}") from None


class InitializeRoot:
    """Adds ``params._meta["memtrio/root"]`` to the client's ``initialize`` request, passing
    every other byte through unchanged.

    Lines are looked at until the ``initialize`` request has gone by; a line longer
    than ``limit`` is passed on as it arrives (`ClientLines`), never held. A root the
    client set itself is kept.
    """

    def __init__(self, root: Path, limit: int) -> None:
        self.root = str(root)
        self.lines = ClientLines(limit)
        self.done = False

    def feed(self, data: bytes) -> bytes:
        return b"".join(self.apply(piece) for piece in self.lines.feed(data))

    def finish(self) -> bytes:
        """At EOF: a last line without its newline, as it came."""
        return b"".join(self.apply(piece) for piece in self.lines.finish())

    def apply(self, piece: Piece) -> bytes:
        return self.rewrite(piece.data) if piece.whole and not self.done else piece.data

    def rewrite(self, line: bytes) -> bytes:
        """``line`` with the root added if it is the ``initialize`` request; else ``line``."""
        if b'"initialize"' not in line or not line.strip():
            return line
        try:
            msg: Any = msgspec.json.decode(line)
        except (msgspec.DecodeError, RecursionError):
            return line  # the server answers -32700
        if not isinstance(msg, dict) or msg.get("method") != "initialize":
            return line
        self.done = True
        params = msg.setdefault("params", {})
        meta = params.setdefault("_meta", {}) if isinstance(params, dict) else None
        if not isinstance(meta, dict):
            return line  # invalid params: the server says so
        meta.setdefault(ROOT_META, self.root)
        ending = line[len(line.rstrip()) :]
        return msgspec.json.encode(msg) + ending


@dataclass(frozen=True)
class Piece:
    """Bytes of the client's stream: a ``whole`` line (with its newline, unless the stream
    ended without one), or a piece of a line longer than the limit (``last``: its end)."""

    data: bytes
    whole: bool = True
    last: bool = True


class ClientLines:
    """Splits a byte stream into lines; a line longer than ``limit`` is passed on in pieces
    as it arrives, never held whole."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.buffer = bytearray()
        self.passing = False  # in the middle of a line longer than the limit

    def feed(self, data: bytes) -> list[Piece]:
        out: list[Piece] = []
        start = 0
        while (nl := data.find(b"\n", start)) >= 0:
            chunk = data[start : nl + 1]
            start = nl + 1
            if self.passing:
                out.append(Piece(chunk, whole=False, last=True))
                self.passing = False
                continue
            if self.buffer:
                self.buffer += chunk
                chunk, self.buffer = bytes(self.buffer), bytearray()
            out.append(Piece(chunk))
        rest = data[start:]
        if self.passing:
            if rest:
                out.append(Piece(rest, whole=False, last=False))
        else:
            self.buffer += rest
            if len(self.buffer) > self.limit:
                out.append(Piece(bytes(self.buffer), whole=False, last=False))
                self.buffer = bytearray()
                self.passing = True
        return out

    def finish(self) -> list[Piece]:
        """At EOF: what is left (a last line without its newline)."""
        rest, self.buffer = bytes(self.buffer), bytearray()
        if self.passing:
            self.passing = False
            return [Piece(rest, whole=False, last=True)]
        return [Piece(rest)] if rest else []


class ServerLines:
    """The owner's connection, read in whole lines (a line longer than `SERVER_LINE_LIMIT`
    in pieces): a line the owner did not finish before it went away is never written out."""

    def __init__(self, stream: trio.SocketStream, leftover: bytes) -> None:
        self.stream = stream
        self.buffer = bytearray(leftover)
        self.passing = False  # in the middle of a line longer than the limit
        self.eof = False

    async def next(self) -> tuple[bytes, bool] | None:
        """The next line and whether it is whole; None when the connection ended."""
        while True:
            nl = self.buffer.find(b"\n")
            if nl >= 0:
                line = bytes(self.buffer[: nl + 1])
                del self.buffer[: nl + 1]
                whole = not self.passing
                self.passing = False
                return line, whole
            if self.buffer and (self.passing or len(self.buffer) > SERVER_LINE_LIMIT):
                self.passing = True
                piece = bytes(self.buffer)
                self.buffer.clear()
                return piece, False
            if self.eof:
                return None
            try:
                data = await self.stream.receive_some(READ_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                data = b""
            if not data:
                self.eof = True
                continue
            self.buffer += data


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
    when it goes away (see the module docstring)."""

    def __init__(
        self,
        home: Path,
        root: Path,
        proto_in: int,
        proto_out: int,
        limit: int,
        *,
        mode: str = "existing",
        launch: spawn.Launch | None = None,
        ui: bool = False,
    ) -> None:
        self.home = home
        self.mode = mode
        self.launch = launch
        self.ui = ui
        self.stdin = trio.lowlevel.FdStream(proto_in)
        self.stdout = trio.lowlevel.FdStream(proto_out)
        self.rewriter = InitializeRoot(root, limit)
        self.root = root
        self.limit = limit
        self.outbox: deque[Piece] = deque()  # read from the client, not yet sent
        self.dropping = False  # skipping the rest of a long line cut by a lost owner
        self.mid_line = False  # the last bytes sent were a piece of a long line, not its end
        self.stdin_eof = False
        self.session = ClientSession()
        self.in_flight = InFlight()
        self.reattached: deque[float] = deque()
        self.shown_ui: set[str] = set()
        self.replays = 0
        self.processes: list[subprocess.Popen[bytes]] = []  # owners this child started

    # -- the client's side ------------------------------------------------------------------

    def note_client_line(self, line: bytes) -> None:
        """Track a whole line of the client's on its way to the owner."""
        decoded = jsonrpc.decode_line(line)
        messages: Sequence[jsonrpc.Decoded] = (
            [jsonrpc.decode_line(e, in_batch=True) for e in decoded.elements]
            if isinstance(decoded, jsonrpc.Batch)
            else [decoded]
        )
        for message in messages:
            if isinstance(message, jsonrpc.Message):
                if message.has_id:
                    self.in_flight.add(message.id)
                    if message.method == "initialize":
                        self.session.initialize = line
                        self.session.initialize_id = _id_key(message.id)
                        self.session.acknowledged = False
                    elif message.method == "logging/setLevel":
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
            if isinstance(response.id, str) and response.id.startswith(RELAY_ID):
                return False
            self.in_flight.answered(response.id)
            if (
                self.session.initialize_id == _id_key(response.id)
                and response.result is not None
                and not self.session.acknowledged
            ):
                self.session.acknowledged = True
                self.session.protocol_version = _protocol_version(response.result)
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
        """Relay until the client ends the session; the exit code."""
        try:
            return await self._run(owner)
        except ClientGone:
            return 0
        finally:
            for process in self.processes:
                process.poll()  # reap an owner of ours that exited

    async def _run(self, owner: Owner) -> int:
        self.show_dashboard(owner)
        lines = ServerLines(owner.stream, owner.leftover)
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
        timeout = REATTACH_TIMEOUT if self.mode == "auto" else EXISTING_REATTACH_TIMEOUT
        with trio.move_on_after(timeout):
            while True:
                owner: Owner | None = None
                try:
                    owner = await find_owner(self.home)
                    if owner is None and self.mode == "auto" and self.launch is not None:
                        owner = await start_owner(self.home, self.launch)
                except (Declined, spawn.OwnerFailed) as exc:
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
        if self.mode != "auto" and not why:
            why = " and no other memtrio serve of this home runs"
        print(GONE.format(pid=gone, why=why), file=sys.stderr, flush=True)
        return None

    async def replay(self, owner: Owner, lines: ServerLines) -> bool:
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
        request = _replayed(session.initialize, f"{RELAY_ID}initialize-{self.replays}")
        if request is None:
            return True
        if session.protocol_version:
            request["params"]["protocolVersion"] = session.protocol_version
        try:
            await owner.stream.send_all(msgspec.json.encode(request) + b"\n")
            with trio.move_on_after(REPLAY_TIMEOUT):
                while (got := await lines.next()) is not None:
                    line, whole = got
                    if whole and _answers(line, request["id"]):
                        break
                    if not whole or self.note_server_line(line):
                        await self.write_out(line)
                else:
                    return False  # gone again
            if session.initialized:
                note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
                await owner.stream.send_all(msgspec.json.encode(note) + b"\n")
            if session.log_level is not None:
                level = _replayed(session.log_level, f"{RELAY_ID}set-level-{self.replays}")
                if level is not None:
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


def _replayed(line: bytes, rid: str) -> dict[str, Any] | None:
    """The request of ``line`` under the relay's id ``rid``; None if it cannot be."""
    try:
        msg = msgspec.json.decode(line)
    except (msgspec.DecodeError, RecursionError):
        return None
    if not isinstance(msg, dict) or not isinstance(msg.get("params", {}), dict):
        return None
    msg["id"] = rid
    msg.setdefault("params", {})
    return msg


def _answers(line: bytes, rid: str) -> bool:
    """Whether ``line`` is the answer to the relay's request ``rid``."""
    if rid.encode() not in line:
        return False
    decoded = jsonrpc.decode_line(line)
    return isinstance(decoded, jsonrpc.Response) and decoded.id == rid


def _protocol_version(result: msgspec.Raw) -> str | None:
    try:
        value = msgspec.json.decode(result)
    except (msgspec.DecodeError, RecursionError):
        return None
    version = value.get("protocolVersion") if isinstance(value, dict) else None
    return version if isinstance(version, str) else None


def attach(
    home: Path,
    root: Path,
    proto_in: int,
    proto_out: int,
    limit: int,
    *,
    mode: str = "existing",
    launch: spawn.Launch | None = None,
    ui: bool = False,
) -> int | None:
    """Serve this session through the owner of ``home``: the exit code; None when there is
    none to attach to (then serve embedded).

    ``mode`` is ``[serve] attach``: ``auto`` starts the owner (``launch``) when none
    runs, ``existing`` attaches only to a running one. ``root`` is the session's
    repository (the working directory); ``proto_in`` and ``proto_out`` are the
    protocol's file descriptors (``actors.stdio.protect_stdout``). ``ui``: say where
    the owner's dashboard is.
    """

    async def main() -> int | None:
        try:
            owner = await find_owner(home)
            if owner is None and mode == "auto" and launch is not None:
                owner = await start_owner(home, launch)
        except Declined as exc:
            decline(home, str(exc))
            return None
        except spawn.OwnerFailed as exc:
            say(f"serving embedded: the owner memtrio serve of {home} could not be started: {exc}")
            return None
        if owner is None:
            return None
        say(f"attaching to memtrio serve pid {owner.pid}")
        relay = Relay(home, root, proto_in, proto_out, limit, mode=mode, launch=launch, ui=ui)
        if owner.process is not None:
            relay.processes.append(owner.process)
        return await relay.run(owner)

    return trio.run(main)
