"""The lines of the attach relay (``actors.net.relay``): the client's stdin split into lines
(`ClientLines`), with the session's repository added to its ``initialize``
(`InitializeRoot`), and the owner's connection read in whole lines (`ServerLines`).

A line of the client's longer than the request limit is passed on in pieces as it
arrives, never held; the server answers it. A line of the owner's is held until it is
whole (up to `SERVER_LINE_LIMIT`), so a line the owner did not finish before it went
away never reaches the client.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import trio

from ...protocol import jsonrpc

READ_SIZE = 65536
# What the first child answers itself while its owner starts (``Relay.answer_early``):
# lifecycle requests whose answers depend on the configuration alone, never on the store.
EARLY_METHODS = frozenset({"initialize", "ping", "tools/list", "notifications/initialized"})
ROOT_META = "memtrio/root"
# A server line longer than this is passed on as it arrives, not held whole.
SERVER_LINE_LIMIT = 256 * 1024 * 1024


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


# -- what the relay reads in a line ----------------------------------------------------


def replayed(line: bytes, rid: str) -> dict[str, Any] | None:
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


def answer_to(line: bytes, rid: str) -> jsonrpc.Response | None:
    """``line`` if it is the answer to the relay's request ``rid``, else None."""
    if rid.encode() not in line:
        return None
    decoded = jsonrpc.decode_line(line)
    return decoded if isinstance(decoded, jsonrpc.Response) and decoded.id == rid else None


def request_ids(line: bytes) -> list[jsonrpc.Id]:
    """The ids ``line`` must be answered under: each request's (a batch's too), the id of a
    request that is not valid when it can be read, None for a line that is not JSON; none
    for notifications and blank lines."""
    if not line.strip():
        return []
    decoded = jsonrpc.decode_line(line)
    messages: Sequence[jsonrpc.Decoded] = [decoded]
    if isinstance(decoded, jsonrpc.Batch):
        messages = [jsonrpc.decode_line(e, in_batch=True) for e in decoded.elements]
    ids: list[jsonrpc.Id] = []
    for message in messages:
        if isinstance(message, jsonrpc.Message):
            if message.has_id:
                ids.append(message.id)
        elif isinstance(message, jsonrpc.Failure):
            ids.append(message.id)
    return ids


def early_method(line: bytes) -> str | None:
    """The method of ``line`` if `Relay.answer_early` answers it (a request of
    `EARLY_METHODS`, or ``notifications/initialized``), else None."""
    decoded = jsonrpc.decode_line(line)
    if not isinstance(decoded, jsonrpc.Message) or decoded.method not in EARLY_METHODS:
        return None
    if decoded.has_id == (decoded.method == "notifications/initialized"):
        return None  # a request sent as a notification, or the other way round
    return decoded.method


def result_version(reply: bytes) -> str | None:
    """The protocol version an ``initialize`` answer negotiated; None for an error."""
    decoded = jsonrpc.decode_line(reply.strip()) if reply.strip() else None
    if not isinstance(decoded, jsonrpc.Response) or decoded.result is None:
        return None
    return protocol_version(decoded.result)


def protocol_version(result: msgspec.Raw) -> str | None:
    try:
        value = msgspec.json.decode(result)
    except (msgspec.DecodeError, RecursionError):
        return None
    version = value.get("protocolVersion") if isinstance(value, dict) else None
    return version if isinstance(version, str) else None
