"""A connection of the store, of either backend, and what the shared code does with one:
its transaction control (`StoreConnection`), its memory options (`Tuning`), the error of a
store that cannot be opened (`StoreUnavailable`), a read transaction (`run_read`) and the
read pool (`ReadPool`).

Each backend opens its own connections (`sqlite.db`, `pg.conn`); the writer, the read pool,
`reader` and `direct` only call the four methods of `StoreConnection` (``begin_write``,
``begin_read``, ``commit``, ``rollback``), so they never ask which database they run on nor
spell a transaction's SQL.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import trio

from ...supervisors.errors import UserError
from .interfaces.errors import StoreError, StoreOperationalError

T = TypeVar("T")

# A read the event loop runs itself (`ReadPool.run` with ``inline``) is stopped
# once it has taken this much CPU time, checked every `INLINE_CHECK_STEPS` SQLite VM steps,
# and run again in a worker thread: a small indexed read skips the thread hop
# (about 0.04 ms of CPU and a thread wake-up), a large one blocks the loop no
# longer than this (measured: docs/benchmarks.md, "Knowledge graph").
INLINE_BUDGET = 0.005
INLINE_CHECK_STEPS = 1000


class StoreConnection(Protocol):
    """A connection of the store, of either backend: its transaction control."""

    @property
    def in_transaction(self) -> bool: ...

    def begin_write(self, busy_timeout_ms: int = 0) -> None: ...

    def begin_read(self) -> None: ...

    def commit(self) -> None: ...

    def rollback(self) -> None: ...

    def close(self) -> None: ...

    def errors(self) -> AbstractContextManager[None]:
        """A block whose driver errors are raised as the store's (`interfaces.errors`),
        the driver's error chained as ``__cause__``."""
        ...


class InlineConnection(StoreConnection, Protocol):
    """A connection whose reads can be interrupted from within (SQLite's progress handler):
    the one a read pool runs reads on the event loop with."""

    def set_progress_handler(
        self, progress_handler: Callable[[], int | None] | None, n: int, /
    ) -> None: ...


@dataclass(frozen=True)
class Tuning:
    """Per-connection memory options (``[store] cache_size_mb``, ``mmap_size_mb``).

    memtrio opens several connections (the writer, the read pool, the ranker's,
    the maintenance actor's), each with its own page cache and mapping, so these
    are per connection (docs/memory.md, "Storage and concurrency").
    """

    cache_size_mb: int = 8
    mmap_size_mb: int = 0


DEFAULT_TUNING = Tuning()


class StoreUnavailable(UserError):
    """The database cannot be opened or used: damaged, read-only, locked, on a full disk.

    ``problem`` says what is wrong, ``remedy`` what to do; the message is both.
    ``damaged``: the file is not a database or its pages are corrupt.
    """

    def __init__(self, problem: str, remedy: str, path: Path, damaged: bool = False) -> None:
        self.problem, self.remedy, self.path, self.damaged = problem, remedy, path, damaged
        super().__init__(f"{problem}: {remedy}")


def rollback_quietly(conn: StoreConnection) -> None:
    """End the open transaction, if any, without its changes (either backend's connection)."""
    if conn.in_transaction:
        conn.rollback()


def run_read(conn: StoreConnection, op: Callable[[Any], T]) -> T:
    """Run ``op`` in one read transaction (a consistent snapshot); ``conn`` is a store
    connection of either backend (`SqliteConnection`, `pg.conn.PgConnection`).

    Error handling: the driver's errors are raised as the store's (`interfaces.errors`)."""
    with conn.errors():
        conn.begin_read()
        try:
            return op(conn)
        finally:
            rollback_quietly(conn)


class PoolClosed(RuntimeError):
    """The read pool was closed (the store is stopping or restarting)."""


class ReadPool:
    """A few read-only connections; each read runs in a worker thread, or on the
    event loop itself when it asks to and fits the budget.

    Cancellation: a read already running in its thread finishes (the caller
    waits for it), so a connection is never returned mid-statement. Closing
    the pool closes the idle connections at once and the busy ones when their
    read ends; reads still waiting for a connection fail with `PoolClosed`.

    ``inline`` reads use one more connection, only ever from the trio thread
    and never across an await, with no busy timeout: a read that takes longer
    than `INLINE_BUDGET`, or finds the database busy, is interrupted, rolled
    back and run again from the start in a thread (reads change nothing, so
    running one again is safe).
    """

    def __init__(
        self, conns: Sequence[StoreConnection], inline: InlineConnection | None = None
    ) -> None:
        """A pool over ``conns`` (each backend opens its own: `sqlite.db.open_read_pool`,
        `pg.pool.open_read_pool`), with ``inline`` the connection of the reads the loop
        runs itself (SQLite's; without one, every read runs in a thread)."""
        self._conns = list(conns)
        self._inline = inline
        self._free_send, self._free_recv = trio.open_memory_channel[StoreConnection](len(conns))
        for conn in self._conns:
            self._free_send.send_nowait(conn)
        self.limiter = trio.CapacityLimiter(len(conns))
        self.closed = False

    async def run(self, op: Callable[[Any], T], inline: bool = False) -> T:
        """``op(conn)`` in one read transaction: in a thread, or first on the loop with ``inline``."""
        if inline and not self.closed and self._inline is not None:
            await trio.lowlevel.checkpoint_if_cancelled()
            done, value = self._run_inline(op)
            if done:
                return value  # type: ignore[return-value]  # done: value is op's T
        try:
            conn = await self._free_recv.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise PoolClosed("the store's read pool is closed (stopping or restarting)") from None
        try:
            return await trio.to_thread.run_sync(run_read, conn, op, limiter=self.limiter)
        finally:
            if self.closed:
                _close_quietly(conn)
            else:
                self._free_send.send_nowait(conn)

    def _run_inline(self, op: Callable[[Any], T]) -> tuple[bool, T | None]:
        """(True, ``op``'s value), or (False, None) when it was over budget or the database busy."""
        conn = self._inline
        assert conn is not None
        # CPU time of this thread: being preempted on a busy machine is not the read's cost.
        deadline = time.thread_time() + INLINE_BUDGET
        conn.set_progress_handler(lambda: time.thread_time() > deadline, INLINE_CHECK_STEPS)
        try:
            return True, run_read(conn, op)
        except StoreOperationalError:  # interrupted, or busy: the thread's run will tell
            return False, None
        finally:
            conn.set_progress_handler(None, 0)

    def close(self) -> None:
        """Close idle connections now, busy ones when they come back (call from the trio thread)."""
        self.closed = True
        if self._inline is not None:
            _close_quietly(self._inline)
        while True:
            try:
                _close_quietly(self._free_recv.receive_nowait())
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                break
        self._free_send.close()
        self._free_recv.close()


def _close_quietly(conn: StoreConnection) -> None:
    try:
        with conn.errors():
            conn.close()
    except StoreError:
        pass
