"""The attach relay: a ``memtrio mcp`` child that relays its stdio to a running ``memtrio serve``.

An agent client launches ``memtrio mcp`` once per session. When a ``memtrio serve``
of the same home runs, the child loads no model and opens no store: it finds the
server's runtime file (``actors.net.runtime``: believed only if no one else could
have written it), checks that the server answers (`find_owner`: its pid is alive,
and its attach endpoint proves it holds the file's secret, takes the child's
proof (``actors.net.proof``) and answers a ``ping`` within `PROBE_TIMEOUT`),
then relays (`relay`): the lines of stdin to the connection, the connection's
bytes to stdout. The server runs one Session per connection, so each child is
one session of the shared server. Whenever a runtime file is there but not
used, one line on stderr says why (`decline`), and the child serves embedded.

On the way, the relay adds the child's working directory to the client's
``initialize`` request, as ``params._meta["memtrio/root"]``: the session's
repository is the one the agent was started in, as it would be embedded
(`InitializeRoot`). Every other line, a malformed one included, passes unchanged,
and the server answers it (``-32700`` for bad JSON).

Ending: EOF on stdin is passed on as EOF on the connection (a half-close); the
server answers what it was sent, then closes, and the relay exits 0 once those
answers are written out. The server gone (the connection closed or broken while
the client is still there, or the server's process dead) is exit 1 with one line
on stderr saying so: the client then starts a new ``memtrio mcp``. A client that
closed stdout is gone too: exit 0.

Why plain trio tasks and not a supervision tree: the relay is two pumps over one
connection, and neither can be restarted without losing the session (the
server's Session state is bound to the connection, and a pump stopped in the
middle of a line cannot resume it). Any failure of either ends the session, which
is what one nursery does; a supervisor would only add restarts that cannot help.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import trio

from . import proof
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


@dataclass
class Owner:
    """A running ``memtrio serve`` that answered: its pid and the open connection to it."""

    pid: int
    stream: trio.SocketStream
    leftover: bytes = b""  # bytes received after the probe's answer


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
    then the child sends it nothing but a random nonce. Each refusal is one line
    on stderr (`decline`).

    A runtime file whose process is dead, whose endpoint refuses the connection,
    that is not a runtime file, or whose listener gave a wrong proof (the port
    was taken over) is stale: it is removed (if it did not change meanwhile).
    One whose process lives but does not accept within `PROBE_TIMEOUT` (or
    accepts but does not answer within `BUSY_PROBE_TIMEOUT`) is kept (a busy
    server, or a pid reused by another program: the next server replaces it).
    """
    try:
        found, raw = runtime_file.read(home)
    except runtime_file.Untrusted as exc:
        decline(home, f"{exc}, so someone else may have written it")
        return None
    if found is None:
        if raw:
            runtime_file.remove_if_unchanged(home, raw)
        return None
    if not is_loopback(found.host):
        decline(home, f"it names {found.host!r}, not a loopback address")
        return None
    secret = proof.parse_secret(found.secret)
    if secret is None:
        decline(
            home,
            "it holds no valid attach secret (an older memtrio serve wrote it, or it is damaged); "
            "restart that server",
        )
        return None
    if not runtime_file.pid_alive(found.pid):
        runtime_file.remove_if_unchanged(home, raw)
        return None
    try:
        answer = await probe(found.host, found.port, secret, found.pid)
    except ConnectionRefusedError:
        runtime_file.remove_if_unchanged(home, raw)
        return None
    except proof.NoProof as exc:
        if exc.wrong:
            runtime_file.remove_if_unchanged(home, raw)
        decline(home, f"the listener on {found.host}:{found.port} did not prove itself: {exc}")
        return None
    if answer is None:
        decline(home, f"pid {found.pid} did not answer on {found.host}:{found.port} in time")
        return None
    stream, leftover = answer
    return Owner(found.pid, stream, leftover)


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


class InitializeRoot:
    """Adds ``params._meta["memtrio/root"]`` to the client's ``initialize`` request, passing
    every other byte through unchanged.

    Lines are looked at until the ``initialize`` request has gone by; after that,
    and for a line longer than ``limit`` (passed on as it arrives, never held), the
    bytes flow through untouched. A root the client set itself is kept.
    """

    def __init__(self, root: Path, limit: int) -> None:
        self.root = str(root)
        self.limit = limit
        self.done = False
        self.buffer = bytearray()
        self.passing = False  # in the middle of a line longer than the limit

    def feed(self, data: bytes) -> bytes:
        if self.done:
            return data
        out = bytearray()
        start = 0
        while not self.done:
            nl = data.find(b"\n", start)
            if nl < 0:
                break
            piece = data[start : nl + 1]
            start = nl + 1
            if self.passing:
                out += piece
                self.passing = False
                continue
            self.buffer += piece
            out += self.rewrite(bytes(self.buffer))
            self.buffer = bytearray()
        rest = data[start:]
        if self.done:
            out += rest
        elif self.passing:
            out += rest
        else:
            self.buffer += rest
            if len(self.buffer) > self.limit:
                out += self.buffer
                self.buffer = bytearray()
                self.passing = True
        return bytes(out)

    def finish(self) -> bytes:
        """At EOF: a last line without its newline, as it came."""
        rest, self.buffer = bytes(self.buffer), bytearray()
        return self.rewrite(rest) if rest.strip() else rest

    def rewrite(self, line: bytes) -> bytes:
        """``line`` with the root added if it is the ``initialize`` request; else ``line``."""
        if b'"initialize"' not in line:
            return line
        try:
            msg: Any = msgspec.json.decode(line)
        except msgspec.DecodeError:
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


GONE = (
    "memtrio: the memtrio serve this session was attached to (pid {pid}) has gone away; "
    "restart the session (the client then starts memtrio mcp again)"
)


async def relay(owner: Owner, proto_in: int, proto_out: int, root: Path, limit: int) -> int:
    """Relay stdio (``proto_in``/``proto_out``) to ``owner`` until either side ends; the exit code.

    0 when the client closed stdin and every answer was written out, or closed
    stdout; 1 (with the `GONE` line on stderr) when the server went away first.
    """
    stdin = trio.lowlevel.FdStream(proto_in)
    stdout = trio.lowlevel.FdStream(proto_out)
    rewriter = InitializeRoot(root, limit)
    stdin_done = False
    client_gone = False
    stream = owner.stream

    async def upstream() -> None:
        nonlocal stdin_done
        while True:
            try:
                data = await stdin.receive_some(READ_SIZE)
            except (trio.BrokenResourceError, OSError):
                data = b""
            if not data:
                tail = rewriter.finish()
                stdin_done = True
                try:
                    if tail:
                        await stream.send_all(tail)
                    await stream.send_eof()
                except (trio.BrokenResourceError, OSError):
                    pass  # the downstream pump sees the server gone
                return
            chunk = rewriter.feed(data)
            if chunk:
                try:
                    await stream.send_all(chunk)
                except (trio.BrokenResourceError, OSError):
                    return  # the downstream pump sees the server gone

    async def downstream(cancel: trio.CancelScope) -> None:
        nonlocal client_gone
        pending = owner.leftover
        while True:
            if pending:
                try:
                    await stdout.send_all(pending)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    client_gone = True
                    break
            try:
                pending = await stream.receive_some(READ_SIZE)
            except (trio.BrokenResourceError, OSError):
                pending = b""
            if not pending:
                break
        cancel.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(upstream)
        nursery.start_soon(downstream, nursery.cancel_scope)
    await trio.aclose_forcefully(stream)
    if client_gone:
        return 0
    if stdin_done and runtime_file.pid_alive(owner.pid):
        return 0
    print(GONE.format(pid=owner.pid), file=sys.stderr, flush=True)
    return 1


def attach(home: Path, root: Path, proto_in: int, proto_out: int, limit: int) -> int | None:
    """Serve this session through the ``memtrio serve`` of ``home`` if one answers: the exit
    code; None when there is none (then serve embedded).

    ``root`` is the session's repository (the working directory); ``proto_in`` and
    ``proto_out`` are the protocol's file descriptors (``actors.stdio.protect_stdout``).
    """

    async def main() -> int | None:
        owner = await find_owner(home)
        if owner is None:
            return None
        print(f"memtrio: attaching to memtrio serve pid {owner.pid}", file=sys.stderr, flush=True)
        return await relay(owner, proto_in, proto_out, root, limit)

    return trio.run(main)
