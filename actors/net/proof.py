"""The attach endpoint's handshake: the child and the server prove to each other that they
hold the secret of ``run/serve.json``, which never travels.

::

    memtrio mcp (read S from the file)                    memtrio serve (wrote S)
    "memtrio-attach/1 hello <cn>"           ──────────▶
                                            ◀──────────   "memtrio-attach/1 server <sn> <ms>"
    checks ms = HMAC(S, server|pid|port|cn|sn)
    "memtrio-attach/1 client <mc>"          ──────────▶   checks mc = HMAC(S, client|pid|port|cn|sn)
    then newline-delimited JSON-RPC, as on the TCP transport

``cn`` and ``sn`` are fresh nonces (32 bytes, hex), HMAC is HMAC-SHA256,
``pid`` and ``port`` those the runtime file names (the server's own pid and the
port it accepted the connection on). ``sn`` is random; ``cn`` is 16 random bytes
``r`` then the first 16 bytes of HMAC(S, hello|pid|port|r) (`hello_nonce`), so the
endpoint's gate can tell a child's hello from a forged one before it spends a
task or an HMAC of its own proof on it (`hello_vouch`: a forged hello waits on
probation and never displaces a child). A hello of an older child (a nonce
random throughout) still completes the handshake; it only has no such priority.
So:

- a listener that did not read the file (another user's, one on a port taken
  over after the server died) cannot answer, and it learns only the child's nonce
  (its tag is an HMAC over its own random half, the hello role, pid and port: it
  proves nothing in a handshake, whose proofs are over both nonces and other roles):
  the child sends nothing else (no token, no ``initialize``, no memory) until
  the server has proved itself;
- a connection to the endpoint (another local user's) that cannot answer the
  server's nonce gets no session;
- an answer cannot be replayed (fresh nonces both ways), nor relayed from the
  real endpoint by a listener on another port (the port is part of it).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass

import trio

VERSION = b"memtrio-attach/1"
NONCE_BYTES = 32
SECRET_BYTES = 32
# The longest handshake line read (a real one is about 170 bytes).
LINE_LIMIT = 512
# Seconds a peer has to send its handshake line.
HANDSHAKE_TIMEOUT = 5.0


class NoProof(Exception):
    """The listener did not prove that it holds the secret; ``wrong``: it answered with a
    proof that does not verify (it is not the server that wrote the file)."""

    def __init__(self, message: str, *, wrong: bool = False) -> None:
        super().__init__(message)
        self.wrong = wrong


def new_secret() -> bytes:
    return secrets.token_bytes(SECRET_BYTES)


def parse_secret(text: str) -> bytes | None:
    """The secret written as ``text`` (hex), or None when it is not one."""
    try:
        secret = bytes.fromhex(text)
    except ValueError:
        return None
    return secret if len(secret) == SECRET_BYTES else None


def _hello_tag(secret: bytes, pid: int, port: int, random_half: bytes) -> bytes:
    message = b"|".join((VERSION, b"hello", b"%d" % pid, b"%d" % port, random_half.hex().encode()))
    return hmac.new(secret, message, hashlib.sha256).digest()[: NONCE_BYTES // 2]


def hello_nonce(secret: bytes, pid: int, port: int) -> bytes:
    """A child's nonce: 16 random bytes and the first 16 of their HMAC under ``secret``
    (bound to the endpoint's ``pid`` and ``port``), `NONCE_BYTES` in all."""
    random_half = secrets.token_bytes(NONCE_BYTES // 2)
    return random_half + _hello_tag(secret, pid, port, random_half)


def hello_vouch(secret: bytes, pid: int, port: int) -> Callable[[bytes], bool]:
    """The gate's check of a newcomer's first bytes on the attach endpoint (a
    ``actors.net.vouch.Vouch``): whether they start with the hello line of a child that
    holds ``secret`` (`hello_nonce`). Costs one HMAC for a line of the right shape,
    nothing for any other bytes."""

    def vouch(data: bytes) -> bool:
        line, newline, _ = data.partition(b"\n")
        hello = _fields(line if newline else None, b"hello", 1)
        if hello is None or len(hello[0]) != 2 * NONCE_BYTES:
            return False
        return _vouches(secret, pid, port, bytes.fromhex(hello[0].decode("ascii")))

    return vouch


def _vouches(secret: bytes, pid: int, port: int, nonce: bytes) -> bool:
    """Whether a child's ``nonce`` is a `hello_nonce` of ``secret``."""
    random_half, tag = nonce[: NONCE_BYTES // 2], nonce[NONCE_BYTES // 2 :]
    return hmac.compare_digest(tag, _hello_tag(secret, pid, port, random_half))


def mac(secret: bytes, role: bytes, pid: int, port: int, client: bytes, server: bytes) -> bytes:
    """HMAC-SHA256 of one side's proof (hex, ASCII)."""
    message = b"|".join(
        (VERSION, role, b"%d" % pid, b"%d" % port, client.hex().encode(), server.hex().encode())
    )
    return hmac.new(secret, message, hashlib.sha256).hexdigest().encode()


@dataclass
class LineReader:
    """Reads bounded lines from a stream; keeps what came after them."""

    stream: trio.abc.ReceiveStream
    rest: bytes = b""

    async def line(self) -> bytes | None:
        """The next line without its newline; None at EOF or past `LINE_LIMIT`."""
        while b"\n" not in self.rest:
            if len(self.rest) > LINE_LIMIT:
                return None
            try:
                data = await self.stream.receive_some(LINE_LIMIT)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                return None
            if not data:
                return None
            self.rest += data
        line, _, self.rest = self.rest.partition(b"\n")
        return line if len(line) <= LINE_LIMIT else None


def _fields(line: bytes | None, kind: bytes, count: int) -> list[bytes] | None:
    """The ``count`` hex fields of a ``VERSION KIND f1 ...`` line, or None."""
    if line is None:
        return None
    parts = line.strip().split(b" ")
    if len(parts) != 2 + count or parts[0] != VERSION or parts[1] != kind:
        return None
    try:
        for part in parts[2:]:
            bytes.fromhex(part.decode("ascii"))
    except (ValueError, UnicodeDecodeError):
        return None
    return parts[2:]


async def answer(
    stream: trio.abc.Stream,
    secret: bytes,
    pid: int,
    port: int,
    timeout: float = HANDSHAKE_TIMEOUT,
    on_vouched: Callable[[], None] | None = None,
) -> bytes | None:
    """The server's side: challenge the peer on ``stream`` and prove this server; the bytes
    received past the peer's proof, or None when the peer did not prove it holds ``secret``.
    ``on_vouched()`` is called once the peer's hello shows it holds ``secret`` (`hello_nonce`).

    Error handling: never raises for the peer's failures (a broken connection,
    garbage, silence past ``timeout``): they are None.
    """
    reader = LineReader(stream)
    with trio.move_on_after(timeout):
        hello = _fields(await reader.line(), b"hello", 1)
        if hello is None or len(hello[0]) != 2 * NONCE_BYTES:
            return None
        client_nonce = bytes.fromhex(hello[0].decode())
        if on_vouched is not None and _vouches(secret, pid, port, client_nonce):
            on_vouched()
        server_nonce = secrets.token_bytes(NONCE_BYTES)
        proof = mac(secret, b"server", pid, port, client_nonce, server_nonce)
        line = b" ".join((VERSION, b"server", server_nonce.hex().encode(), proof)) + b"\n"
        try:
            await stream.send_all(line)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            return None
        reply = _fields(await reader.line(), b"client", 1)
        expected = mac(secret, b"client", pid, port, client_nonce, server_nonce)
        if reply is None or not hmac.compare_digest(reply[0], expected):
            return None
        return reader.rest
    return None


async def prove(
    stream: trio.abc.Stream,
    secret: bytes,
    pid: int,
    port: int,
) -> bytes:
    """The child's side: challenge the listener on ``stream``, check its proof, then prove
    this child; the bytes received past the listener's proof.

    The caller bounds the time. Error handling: `NoProof` when the listener did not
    prove it holds ``secret`` (nothing but the child's nonce was sent to it);
    `trio.BrokenResourceError` / `OSError` of the connection propagate.
    """
    client_nonce = hello_nonce(secret, pid, port)
    await stream.send_all(b" ".join((VERSION, b"hello", client_nonce.hex().encode())) + b"\n")
    reader = LineReader(stream)
    line = await reader.line()
    fields = _fields(line, b"server", 2)
    if fields is None:
        said = "closed the connection" if line is None else "answered something else"
        raise NoProof(f"it {said} instead of proving it holds the secret")
    server_nonce = bytes.fromhex(fields[0].decode())
    expected = mac(secret, b"server", pid, port, client_nonce, server_nonce)
    if len(server_nonce) != NONCE_BYTES or not hmac.compare_digest(fields[1], expected):
        raise NoProof(
            "its proof of the secret is wrong: it is not the server that wrote the file", wrong=True
        )
    own = mac(secret, b"client", pid, port, client_nonce, server_nonce)
    await stream.send_all(b" ".join((VERSION, b"client", own)) + b"\n")
    return reader.rest
