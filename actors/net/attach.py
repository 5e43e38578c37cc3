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

Relaying, and carrying the session over to a new owner when this one goes away
(its calls in flight answered "not acknowledged, retry", the session replayed), is
``actors.net.relay``'s.
"""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec
import trio

from . import proof, spawn
from . import runtime as runtime_file
from .listen import is_loopback
from .relay import NoOwner, Owner, Relay, say

# How long the server may take to accept the probe's connection.
PROBE_TIMEOUT = 0.3
# How long a server that accepted the connection may take to prove itself and answer
# the ping: it is alive and listening, only busy (fifty children starting at once on two
# cores); giving up on it would start a second, embedded server with its own model.
BUSY_PROBE_TIMEOUT = 5.0
PROBE_ID = "memtrio-attach-probe"
READ_SIZE = 65536


class Declined(NoOwner):
    """A runtime file is there but is not to be used (the message says why): the child
    serves embedded, and starts no owner."""


NOT_ATTACHING = "memtrio: serving embedded, not through the memtrio serve named in {path}: {why}"


def decline(home: Path, why: str) -> None:
    """Say in one line on stderr why this child serves embedded although a runtime file exists."""
    path = runtime_file.runtime_path(home)
    print(NOT_ATTACHING.format(path=path, why=why), file=sys.stderr, flush=True)


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

    starts = mode == "auto" and launch is not None

    async def find() -> Owner | None:
        owner = await find_owner(home)
        if owner is None and starts and launch is not None:
            try:
                owner = await start_owner(home, launch)
            except spawn.OwnerFailed as exc:
                why = f"the owner memtrio serve of {home} could not be started: {exc}"
                raise NoOwner(why) from None
        return owner

    async def main() -> int | None:
        try:
            owner = await find()
        except Declined as exc:
            decline(home, str(exc))
            return None
        except NoOwner as exc:
            say(f"serving embedded: {exc}")
            return None
        if owner is None:
            return None
        say(f"attaching to memtrio serve pid {owner.pid}")
        relay = Relay(find, root, proto_in, proto_out, limit, starts=starts, ui=ui)
        if owner.process is not None:
            relay.processes.append(owner.process)
        return await relay.run(owner)

    return trio.run(main)
