"""Inter-actor messages: frozen, tagged msgspec structs, dispatched with ``match``.

A request that expects an answer is a `Request`: it carries a one-shot `Reply`
and the trace context of the call that caused it. The messages between a
transport and its session are here; each actor's own requests are declared in
its package's ``messages`` module, as subclasses of `Request`. Channels carrying these are owned by the
supervisor (see ``supervisors.supervisor.Mailbox``) and outlive any one
incarnation of the actor reading them.
"""

from __future__ import annotations

import os
from typing import Generic, TypeVar

import msgspec
import trio

T = TypeVar("T")


def new_id() -> str:
    return os.urandom(8).hex()


class TraceContext(msgspec.Struct, frozen=True):
    trace_id: str
    span_id: str

    @classmethod
    def new(cls) -> TraceContext:
        return cls(os.urandom(16).hex(), new_id())

    def child(self) -> TraceContext:
        return TraceContext(self.trace_id, new_id())


class ActorCrashed(Exception):
    """The actor serving a request died before replying."""


class Reply(Generic[T]):
    """A one-shot reply slot: set once with a value (a ``T``) or an error, awaited once.

    Not a msgspec struct on purpose: it holds a trio.Event and is never encoded.
    """

    __slots__ = ("_event", "_value", "_error")

    def __init__(self) -> None:
        self._event = trio.Event()
        self._value: T | None = None
        self._error: BaseException | None = None

    @property
    def done(self) -> bool:
        return self._event.is_set()

    def set(self, value: T) -> None:
        if not self._event.is_set():
            self._value = value
            self._event.set()

    def fail(self, error: BaseException) -> None:
        if not self._event.is_set():
            self._error = error
            self._event.set()

    async def wait(self) -> T:
        await self._event.wait()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]  # set() ran: a T


# -- transport <-> session -------------------------------------------------


class Inbound(msgspec.Struct, frozen=True, tag=True):
    """Complete lines read from a transport, in order (one read may yield many)."""

    lines: list[bytes]


class Oversized(msgspec.Struct, frozen=True, tag=True):
    """A line longer than the request limit; it was skipped, never buffered."""

    size: int
    limit: int
    id_hint: int | str | None = None


class Outbound(msgspec.Struct, frozen=True, tag=True):
    """One encoded line (ending in a newline) for the transport to write."""

    line: bytes


class Closed(msgspec.Struct, frozen=True, tag=True):
    """The peer closed its side (EOF)."""


SessionInput = Inbound | Oversized | Closed


class Unanswered(msgspec.Struct, frozen=True):
    """What a connection's client sent that was read and that no one answered, handed over to
    whatever answers the client instead: ``items`` in the order read (a `Closed` last once
    the input ended), then the start of the line being read (``partial``) or, in the
    middle of a line over the limit being skipped, ``skipping``."""

    items: tuple[SessionInput, ...] = ()
    partial: bytes = b""
    skipping: bool = False


# -- requests to actors -----------------------------------------------------


class Request(msgspec.Struct, Generic[T], frozen=True, kw_only=True, dict=False):
    """The base of every message that expects an answer (a ``T``).

    ``reply`` is the one-shot slot the actor answers in (or fails with the
    error); ``trace`` the caller's trace context, so the actor's spans join the
    caller's trace. Each actor declares its requests as tagged subclasses in its
    own ``messages`` module (they carry that actor's domain types) and
    dispatches them with ``match``.
    """

    reply: Reply[T] = msgspec.field(default_factory=Reply)
    trace: TraceContext | None = None
