"""The attach model: a ``memtrio mcp`` child that relays its stdio to the ``memtrio serve``
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

The first child does not make its client wait for the owner it starts: while the
owner starts, it answers ``initialize``, ``ping`` and ``tools/list`` itself
(``early``: the answers of a Session of its own application, features set up but
no actor started, built by the command line), then replays the session to the
owner (``actors.net.relay``). If no owner can be launched after all, the session
goes on with an embedded ``memtrio mcp --no-attach`` started as this child's child
(`spawn.embedded`), to which the relay replays it the same way.

An owner that refuses to start saying why (a newer or damaged store, a full disk) is
final: the child prints that line and answers its session with it (`GaveUp`,
``Relay.refuse``), as an embedded server would meet the same store. Owners that exit
without a reason are started at most `MAX_OWNER_STARTS` times in a row, with a
backoff (`Starts`), and then the child gives up the same way.

Relaying, and carrying the session over to a new owner when this one goes away
(its calls in flight answered "not acknowledged, retry", the session replayed), is
``actors.net.relay``'s.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import msgspec
import trio

from ...protocol.messages import Closed, Inbound, Oversized, Unanswered
from . import proof, relay_lines, spawn
from . import runtime as runtime_file
from .listen import is_loopback
from .relay import ClientGone, EarlyAnswer, GaveUp, NoOwner, Owner, Relay, say

# How long the server may take to accept the probe's connection.
PROBE_TIMEOUT = 0.3
# How long a server that accepted the connection may take to prove itself and answer
# the ping: it is alive and listening, only busy (fifty children starting at once on two
# cores); giving up on it would start a second, embedded server with its own model.
BUSY_PROBE_TIMEOUT = 5.0
# How long a server whose listener closed the probe's connection unproven may take to be
# gone (then it was being killed: the runtime file is stale) before it is a live one.
EXIT_WAIT = 1.0
# A live server that closes a probe unproven is probed again this many times in all,
# this far apart (a flood displaced the connection), before the child serves embedded.
CLOSED_PROBE_TRIES = 3
CLOSED_PROBE_PAUSE = 0.1
PROBE_ID = "memtrio-attach-probe"
READ_SIZE = 65536
# How long the early answers (Relay.answer_early) wait for this child to launch the owner
# (they load this child's own features; the owner should be starting meanwhile). Longer
# when another child holds the owner lock: then they start anyway.
LAUNCH_HEAD_START = 0.1
# How long a child waits, at the end, for the embedded server it relayed to (embedded_owner).
EMBEDDED_EXIT = 30.0
# A child starts at most this many owners in a row that do not come up (each exited at
# start, or published nothing): then it gives up (`GaveUp`) and answers its client with
# the last reason. One that refused to start saying why (exit 1 or 2 with its one line: a
# newer or damaged store, a full disk, a bad configuration) is not retried at all: the
# next one would meet the same store, and so would an embedded server.
MAX_OWNER_STARTS = 3
# The pause before the second start in a row; it doubles before each next one.
START_BACKOFF = 0.5


@dataclass
class Starts:
    """The owners a child launched in a row that did not come up (see `MAX_OWNER_STARTS`)."""

    failed: int = 0
    why: str = ""

    async def before_launch(self, home: Path) -> None:
        """Wait out the backoff before the next launch; `GaveUp` when none is left."""
        if self.failed >= MAX_OWNER_STARTS:
            raise GaveUp(
                f"gave up starting the owner memtrio serve of {home} after {self.failed} "
                f"attempts: {self.why}"
            )
        if self.failed:
            await trio.sleep(START_BACKOFF * 2 ** (self.failed - 1))

    def failure(self, exc: spawn.OwnerFailed) -> None:
        """Count a launch that did not come up; `GaveUp` when it said why it refused."""
        self.failed += 1
        self.why = str(exc)
        if exc.reason:
            raise GaveUp(exc.reason)


class Declined(NoOwner):
    """A runtime file is there but is not to be used (the message says why): the child
    serves embedded, and starts no owner."""


NOT_ATTACHING = "memtrio: serving embedded, not through the memtrio serve named in {path}: {why}"


def decline(home: Path, why: str) -> None:
    """Say in one line on stderr why this child serves embedded although a runtime file exists."""
    path = runtime_file.runtime_path(home)
    print(NOT_ATTACHING.format(path=path, why=why), file=sys.stderr, flush=True)


async def find_owner(home: Path) -> Owner | None:  # noqa: C901
    """The ``memtrio serve`` of ``home`` that proves itself, connected; None if there is none.

    The runtime file is believed only if no one else could have written it
    (`runtime_file.read`), names a loopback address, holds a secret, and the
    listener there proves it holds that secret (``actors.net.proof``): until
    then the child sends it nothing but a random nonce.

    A runtime file whose process is dead (whatever else it holds, an older server's
    file without a secret included; or whose process dies within `EXIT_WAIT` of leaving the
    probe unanswered: it was killed as it was probed), whose endpoint refuses the connection,
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
    if not runtime_file.pid_alive(found.pid):
        # Stale whatever else it holds: the file of an older memtrio serve (a token, no
        # secret) or one naming another host is no reason to decline once its server is gone.
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
    try:
        answer = await probe_through_a_flood(found.host, found.port, secret, found.pid)
    except ConnectionRefusedError:
        runtime_file.remove_if_unchanged(home, raw)
        return None
    except proof.NoProof as exc:
        why = f"the listener on {found.host}:{found.port} did not prove itself: {exc}"
        if not exc.wrong:
            if await exited(found.pid):  # it was exiting (killed) as the probe connected
                runtime_file.remove_if_unchanged(home, raw)
                return None
            raise Declined(why) from None
        runtime_file.remove_if_unchanged(home, raw)
        say(f"ignoring {runtime_file.runtime_path(home)} (removed: stale): {why}")
        return None
    if answer is None:
        if await exited(found.pid):
            runtime_file.remove_if_unchanged(home, raw)
            return None
        raise Declined(f"pid {found.pid} did not answer on {found.host}:{found.port} in time")
    stream, leftover = answer
    return Owner(found.pid, stream, leftover, ui=found.ui)


async def probe_through_a_flood(
    host: str, port: int, secret: bytes, pid: int
) -> tuple[trio.SocketStream, bytes] | None:
    """`probe`, again (at most `CLOSED_PROBE_TRIES` in all) while a live server closes the
    connection unproven: a flood on its attach endpoint can displace a child's pending
    connection (issue #37 item 11), which must not send the child to serve embedded.
    A wrong proof, or a server that is gone, is final at once."""
    for _ in range(CLOSED_PROBE_TRIES - 1):
        try:
            return await probe(host, port, secret, pid)
        except proof.NoProof as exc:
            if exc.wrong or not runtime_file.pid_alive(pid):
                raise
        await trio.sleep(CLOSED_PROBE_PAUSE)
    return await probe(host, port, secret, pid)


async def exited(pid: int, within: float = EXIT_WAIT) -> bool:
    """Whether ``pid`` is gone, or goes within ``within`` seconds: a server killed as the
    probe connected accepts, then closes the connection as it dies (its socket goes with
    it), which must not read as a live server declining to prove itself."""
    with trio.move_on_after(within):
        while runtime_file.pid_alive(pid):
            await trio.sleep(0.02)
        return True
    return False


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


async def start_owner(
    home: Path,
    launch: spawn.Launch,
    launched: trio.Event | None = None,
    starts: Starts | None = None,
) -> Owner | None:
    """Start the owner of ``home`` (``actors.net.spawn``) unless another child just did;
    the owner, connected (None if it published but does not answer).

    Under the home's owner lock: look again (the child that held the lock may have
    started one), else launch ``memtrio serve --owner`` and wait until it publishes.
    ``starts`` counts the launches in a row that did not come up (`Starts`: a backoff
    between them, and at most `MAX_OWNER_STARTS`).

    Error handling: `Declined` as `find_owner` (an untrusted ``run/`` included);
    `spawn.OwnerFailed` when it could not be started (the message says why); `GaveUp`
    when the owner refused to start saying why, or ``starts`` is spent.
    """
    starts = starts if starts is not None else Starts()
    try:
        async with spawn.owner_lock(home):
            owner = await find_owner(home)
            if owner is not None:
                starts.failed = 0
                return owner
            await starts.before_launch(home)
            process, log_start = spawn.launch(launch)
            if launched is not None:
                launched.set()
            try:
                await spawn.wait_published(home, process, log_start)
            except spawn.OwnerFailed as exc:
                starts.failure(exc)
                raise
            owner = await find_owner(home)
            if owner is None:
                starts.failure(spawn.OwnerFailed(f"memtrio serve pid {process.pid} went away"))
                return None
            starts.failed = 0
            owner.process = process
            say(
                f"started memtrio serve pid {owner.pid}, the owner of {home} "
                f"(its log: {spawn.log_path(home)})"
            )
            return owner
    except runtime_file.Untrusted as exc:
        raise Declined(f"{exc}, so someone else may have written it") from None
    except OSError as exc:
        raise spawn.OwnerFailed(spawn.os_reason(exc)) from None


def attach(  # noqa: C901
    home: Path,
    root: Path,
    proto_in: int,
    proto_out: int,
    limit: int,
    *,
    mode: str = "existing",
    launch: spawn.Launch | None = None,
    ui: bool = False,
    early: Callable[[], EarlyAnswer] | None = None,
) -> int | None:
    """Serve this session through the owner of ``home``: the exit code; None when there is
    none to attach to (then serve embedded).

    ``mode`` is ``[serve] attach``: ``auto`` starts the owner (``launch``) when none
    runs, ``existing`` attaches only to a running one. ``root`` is the session's
    repository (the working directory); ``proto_in`` and ``proto_out`` are the
    protocol's file descriptors (``actors.stdio.protect_stdout``). ``ui``: say where
    the owner's dashboard is. ``early()``: what answers the client while the owner
    this child starts is not there yet (see the module docstring); called once the
    owner has been launched, so the two start side by side.
    """

    starts = mode == "auto" and launch is not None
    launches = Starts()

    async def find() -> Owner | None:
        owner = await find_owner(home)
        if owner is None and starts and launch is not None:
            try:
                owner = await start_owner(home, launch, starts=launches)
            except spawn.OwnerFailed as exc:
                why = f"the owner memtrio serve of {home} could not be started: {exc}"
                raise NoOwner(why) from None
        return owner

    async def main() -> int | None:
        # The relay's streams close their descriptors when it is dropped: it gets copies,
        # so the embedded server still has the protocol's when there is no owner after all
        # (they are closed before it starts: Relay.close).
        relay = Relay(find, root, os.dup(proto_in), os.dup(proto_out), limit, starts=starts, ui=ui)
        try:
            return await relay_session(relay)
        finally:
            relay.close()

    async def relay_session(relay: Relay) -> int | None:  # noqa: C901
        try:
            owner = await find_owner(home)
            if owner is None and starts and launch is not None:
                if early is None:
                    owner = await find()
                else:
                    try:  # Declined before anything is read from the client
                        spawn.check_run(home)
                    except runtime_file.Untrusted as exc:
                        raise Declined(f"{exc}, so someone else may have written it") from None
                    except OSError as exc:
                        raise NoOwner(spawn.os_reason(exc)) from None
                    owner = await start_answering(home, relay, launch, early, launches)
        except ClientGone:
            return 0  # the client closed stdout while answered early: nothing to serve
        except Declined as exc:
            decline(home, str(exc))
            owner = None
        except GaveUp as exc:
            # The owner said why it cannot start; an embedded server would meet the same.
            say(str(exc))
            return await relay.refuse(str(exc))
        except NoOwner as exc:
            say(f"serving embedded: {exc}")
            owner = None
        embedded: subprocess.Popen[bytes] | None = None
        if owner is None:
            if launch is None or not (relay.outbox or relay.session.initialize or relay.stdin_eof):
                return None  # nothing read from the client yet: serve embedded here
            owner = embedded_owner(launch)
            embedded = owner.process
        else:
            say(f"attaching to memtrio serve pid {owner.pid}")
        if owner.process is not None:
            relay.processes.append(owner.process)
        try:
            return await relay.run(owner)
        finally:
            if embedded is not None:
                await trio.to_thread.run_sync(_reap, embedded)

    return trio.run(main)


async def start_answering(
    home: Path,
    relay: Relay,
    how: spawn.Launch,
    early: Callable[[], EarlyAnswer],
    starts: Starts | None = None,
) -> Owner | None:
    """Start the owner of ``home`` (`start_owner`) while ``relay`` answers the client early
    (``Relay.answer_early`` with the answers of ``early()``, built once the owner has been
    launched); the owner, connected.

    Error handling: as `start_owner`, an `OwnerFailed` raised as `NoOwner` (`GaveUp` as
    itself); `ClientGone` when the client closed stdout meanwhile.
    """
    ready, launched = trio.Event(), trio.Event()
    found: list[Owner | None] = [None]
    failed: list[BaseException] = []

    async def starting() -> None:
        try:
            found[0] = await start_owner(home, how, launched, starts)
        except (NoOwner, spawn.OwnerFailed) as exc:
            failed.append(exc)
        finally:
            launched.set()
            ready.set()
            relay.owner_ready()

    async def answering() -> None:
        with trio.move_on_after(LAUNCH_HEAD_START):
            await launched.wait()  # the owner starts first, then this child's own setup
        if ready.is_set():
            return
        try:
            answer = early()
        except Exception as exc:  # noqa: BLE001 - the owner answers instead, a moment later
            say(f"not answering before the owner is up: {exc}")
            return
        try:
            await relay.answer_early(answer, ready)
        except ClientGone:
            gone.append(True)
            nursery.cancel_scope.cancel()

    gone: list[bool] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(starting)
        nursery.start_soon(answering)
    if gone:
        raise ClientGone
    if failed:
        exc = failed[0]
        if isinstance(exc, spawn.OwnerFailed):
            why = f"the owner memtrio serve of {home} could not be started: {exc}"
            raise NoOwner(why) from None
        raise exc
    return found[0]


def embedded_owner(launch: spawn.Launch) -> Owner:
    """An embedded ``memtrio mcp --no-attach`` (`spawn.embedded`) to relay a session to that
    began here (answered early) and found no owner."""
    process, end = spawn.embedded(launch)
    say(f"serving embedded in pid {process.pid}")
    stream = trio.SocketStream(trio.socket.from_stdlib_socket(end))
    return Owner(process.pid, stream, process=process, embedded=True)


def refuse(
    proto_in: int, proto_out: int, limit: int, reason: str, unanswered: Unanswered | None = None
) -> int:
    """Answer the session on ``proto_in``/``proto_out`` (this function's to close) with the
    JSON-RPC error ``relay.NO_SERVER`` saying ``reason``, each request until EOF
    (`Relay.refuse`): a ``memtrio mcp`` that attaches by default and cannot serve (no owner,
    and the embedded server could not start either); exit code 1. ``unanswered``: what
    the embedded server read from the client and did not answer (answered first)."""

    async def nobody() -> Owner | None:
        return None

    async def main() -> int:
        relay = Relay(nobody, Path(os.sep), proto_in, proto_out, limit)  # no initialize to root
        if unanswered is not None:
            take_over(relay, unanswered)
        try:
            return await relay.refuse(reason)
        finally:
            relay.close()

    return trio.run(main)


def take_over(relay: Relay, unanswered: Unanswered) -> None:
    """Let ``relay`` read the client's stdin on from where another reader of it left off
    (``unanswered``): the requests it read in full are in flight, in the order read (so
    `Relay.refuse` answers them first), its partial line is the relay's."""
    for item in unanswered.items:
        match item:
            case Inbound(lines=lines):
                for line in lines:
                    for rid in relay_lines.request_ids(line):
                        relay.in_flight.add(rid)
            case Oversized(id_hint=rid):
                relay.in_flight.add(rid)
            case Closed():
                relay.stdin_eof = True
    relay.rewriter.lines.buffer += unanswered.partial
    relay.rewriter.lines.passing = unanswered.skipping


def _reap(process: subprocess.Popen[bytes]) -> None:
    """Wait for the embedded server (at EOF it finishes its calls and exits), at most
    `EMBEDDED_EXIT`; then kill it."""
    try:
        process.wait(timeout=EMBEDDED_EXIT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
