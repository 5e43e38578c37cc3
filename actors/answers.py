"""Where the session's answers go: `Answer` (the one answer to one request) and
`BatchAnswers` (the answers of one JSON-RPC batch, sent as one array); and
`decode_params`, which answers a request whose params do not decode.

Error handling: an answer once taken is never lost nor sent twice (see
`Answer._deliver`).
"""

from __future__ import annotations

import contextlib
from typing import TypeVar

import msgspec
import trio

from ..protocol import jsonrpc
from ..protocol.jsonrpc import Id
from ..protocol.messages import Outbound
from ..supervisors.supervisor import Mailbox

T = TypeVar("T")


class BatchAnswers:
    """The answers of one JSON-RPC batch, sent as one array once all are in.

    Element ``i`` is answered with a line or with nothing (a notification, a stray
    response, a call the client cancelled); the array keeps the batch's order and
    leaves out the elements answered with nothing. If none has an answer, nothing
    is sent (JSON-RPC: never an empty array).
    """

    def __init__(self, size: int) -> None:
        self.parts: list[bytes | None] = [None] * size
        self.left = size

    def fill(self, index: int, line: bytes | None) -> bytes | None:
        """Record one answer; the array line once the last one is in, else None."""
        self.parts[index] = line
        self.left -= 1
        if self.left:
            return None
        parts = [part.rstrip(b"\n") for part in self.parts if part is not None]
        self.parts = []
        return b"[" + b",".join(parts) + b"]\n" if parts else None


class Answer:
    """Where the one answer to one request goes: the outbox, or its slot in a batch.

    Used once: `send` a response line or `skip` (no response); later uses are
    ignored, so a request can never be answered twice. ``held`` marks an answer a
    running tool call owns.
    """

    __slots__ = ("outbox", "batch", "index", "used", "held")

    def __init__(
        self, outbox: Mailbox[Outbound], batch: BatchAnswers | None = None, index: int = 0
    ) -> None:
        self.outbox = outbox
        self.batch = batch
        self.index = index
        self.used = False
        self.held = False

    def _take(self, line: bytes | None) -> bytes | None:
        if self.used:
            return None
        self.used = True
        if self.batch is None:
            return line
        return self.batch.fill(self.index, line)

    async def send(self, line: bytes) -> None:
        await self._deliver(self._take(line))

    async def skip(self) -> None:
        await self._deliver(self._take(None))

    async def _deliver(self, out: bytes | None) -> None:
        """Send ``out`` (the answer, or a completed batch array) to the outbox.

        Error handling: once taken, an answer is never lost. If the send is
        interrupted (the session crashing or stopping cancels it), the line is
        handed over without waiting instead; the outbox outlives the session.
        """
        if out is None:
            return
        try:
            await self.outbox.send(Outbound(out))
        except BaseException:
            with contextlib.suppress(
                trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError
            ):
                self.outbox.send_nowait(Outbound(out))
            raise

    def send_nowait(self, line: bytes | None) -> None:
        """Answer (``None``: skip) without waiting; dropped if the outbox is full or gone."""
        out = self._take(line)
        if out is not None:
            try:
                self.outbox.send_nowait(Outbound(out))
            except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
                pass

    async def error(self, rid: Id, code: int, message: str, data: object = None) -> None:
        await self.send(jsonrpc.error_response(rid, code, message, data))

    async def result(self, rid: Id, result: object) -> None:
        await self.send(jsonrpc.result_response(rid, result))


async def decode_params(
    msg: jsonrpc.Message, decoder: msgspec.json.Decoder[T], answer: Answer
) -> T | None:
    """``msg``'s params decoded by ``decoder`` (none given: ``{}``); None once a bad
    one has been answered -32602."""
    try:
        return decoder.decode(msg.params or b"{}")
    except msgspec.DecodeError as exc:
        await answer.error(msg.id, jsonrpc.INVALID_PARAMS, f"Invalid params: {exc}")
        return None
