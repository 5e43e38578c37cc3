"""SQLite connections of the store: pragmas, transactions with busy retries, the read pool.

Every connection runs in autocommit mode (``isolation_level=None``) so that
transactions are explicit: writes use ``BEGIN IMMEDIATE ... COMMIT``, reads a
deferred ``BEGIN ... ROLLBACK`` for a consistent snapshot. The store's connections
are `SqliteConnection`s, whose `begin_write` / `begin_read` / ``commit`` /
``rollback`` are what the writer, the read pool and `direct` call: PostgreSQL's
connection (`pg.conn.PgConnection`) has the same four, in its own dialect, so the
shared code never asks which database it runs on nor spells a transaction's SQL.

Connections are used from worker threads (``trio.to_thread.run_sync``), one
thread at a time per connection, so they are opened with
``check_same_thread=False``.
"""

from __future__ import annotations

import errno
import os
import random
import sqlite3
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import trio

from ....supervisors import private
from ....supervisors.errors import UserError
from ..interfaces.errors import StoreError, StoreOperationalError
from . import errors as sqlite_errors
from . import schema

DB_NAME = "memtrio.sqlite"

# Per-connection (temp) view of the FTS5 vocabulary: document frequency per term,
# used to keep lexical queries cheap on big stores (see `lexical.plan`).
VOCAB_TABLE = "temp.memories_fts_vocab"
CREATE_VOCAB = (
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {VOCAB_TABLE} USING fts5vocab(main, 'memories_fts', 'row')"
)

# Ids bound in one ``IN (...)`` list (well under SQLite's variable limit).
SQL_CHUNK = 500
T = TypeVar("T")

# Retry of SQLITE_BUSY on BEGIN IMMEDIATE (beyond SQLite's own busy handler):
# exponential backoff from BUSY_BACKOFF_START up to BUSY_BACKOFF_MAX seconds,
# jittered, until busy_timeout has passed.
BUSY_BACKOFF_START = 0.002
# A read the event loop runs itself (`ReadPool.run` with ``inline``) is stopped
# once it has taken this much CPU time, checked every `INLINE_CHECK_STEPS` SQLite VM steps,
# and run again in a worker thread: a small indexed read skips the thread hop
# (about 0.04 ms of CPU and a thread wake-up), a large one blocks the loop no
# longer than this (measured: docs/benchmarks.md, "Knowledge graph").
INLINE_BUDGET = 0.005
INLINE_CHECK_STEPS = 1000
BUSY_BACKOFF_MAX = 0.1


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


class SqliteConnection(sqlite3.Connection):
    """A store connection (``sqlite3.connect(..., factory=SqliteConnection)``) with the
    transaction control the shared code calls (``commit`` and ``rollback`` are sqlite3's:
    with ``isolation_level=None`` they end the transaction `begin_write` or `begin_read`
    opened, and do nothing when none is open)."""

    def begin_write(self, busy_timeout_ms: int = 0) -> None:
        """``BEGIN IMMEDIATE`` (the write lock), retrying SQLITE_BUSY until the busy timeout."""
        begin_immediate(self, busy_timeout_ms)

    def begin_read(self) -> None:
        """A deferred ``BEGIN``: the snapshot starts with the first read."""
        self.execute("BEGIN")

    def errors(self) -> AbstractContextManager[None]:
        return sqlite_errors.mapped()


def db_path(home: Path, file: str = "") -> Path:
    """The store's SQLite file: ``file`` (``[store] file``, ``--memory-file``; a relative
    path is from the current directory), else `DB_NAME` in the home."""
    return Path(os.path.abspath(Path(file).expanduser())) if file else home / DB_NAME


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


# Primary SQLite result codes (extended codes carry them in the low byte).
_CORRUPT = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}
_READONLY = {sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM}


def unavailable(exc: BaseException, path: Path) -> StoreUnavailable:
    """What a failure to open or write the database at ``path`` means, and what to do."""
    if isinstance(exc, StoreUnavailable):
        return exc
    if isinstance(exc, StoreError) and isinstance(exc.__cause__, sqlite3.Error):
        exc = exc.__cause__  # the driver's error says which SQLite failure it was
    # A failed ROLLBACK after the real failure ("cannot rollback - no transaction is
    # active" after SQLITE_FULL) hides it: the first SQLite error is the one to explain.
    while isinstance(exc.__context__, sqlite3.Error):
        exc = exc.__context__
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return StoreUnavailable(
            f"the disk of the memory store {path} is full ({exc.strerror})", "free some space", path
        )
    detail = str(exc) or type(exc).__name__
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    text = detail.lower()
    if code in _CORRUPT or "malformed" in text or "not a database" in text:
        return StoreUnavailable(
            f"the memory store {path} is damaged ({detail})", "run memtrio doctor", path, True
        )
    if os.path.isdir(path):
        return StoreUnavailable(
            f"the memory store {path} is a directory, not a database",
            "move it away, or choose another home with --home or MEMTRIO_HOME",
            path,
        )
    if code in _READONLY or "readonly" in text or "read-only" in text or _read_only_fs(path):
        return StoreUnavailable(
            f"the memory store {path} is read-only ({detail})",
            "make it and its directory writable, or choose another home with --home or MEMTRIO_HOME",
            path,
        )
    if code == sqlite3.SQLITE_FULL or "disk is full" in text:
        return StoreUnavailable(
            f"the disk of the memory store {path} is full ({detail})", "free some space", path
        )
    if is_busy(exc):
        return StoreUnavailable(
            f"the memory store {path} stayed locked by another process ({detail})",
            "stop the other memtrio process, or raise [store] busy_timeout_ms",
            path,
        )
    if code == sqlite3.SQLITE_CANTOPEN or isinstance(exc, OSError):
        why = getattr(exc, "strerror", None) or detail
        return StoreUnavailable(
            f"cannot open the memory store {path} ({why})",
            "check that it and its directory are readable and writable, "
            "or choose another home with --home or MEMTRIO_HOME",
            path,
        )
    if code == sqlite3.SQLITE_IOERR:  # a write refused: a file-size limit, a failing disk
        return StoreUnavailable(
            f"cannot write the memory store {path} ({detail})",
            "free some space (or raise the file-size limit), then run memtrio doctor",
            path,
        )
    return StoreUnavailable(
        f"cannot open the memory store {path} ({detail})", "run memtrio doctor", path
    )


def _read_only_fs(path: Path) -> bool:
    try:
        return bool(os.statvfs(path.parent).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def connect(
    path: Path,
    *,
    busy_timeout_ms: int = 30000,
    durability: str = "async",
    read_only: bool = False,
    tuning: Tuning = DEFAULT_TUNING,
) -> SqliteConnection:
    """Open one connection with the store's pragmas (WAL, foreign keys, busy timeout,
    synchronous by ``durability``, page cache and mmap by ``tuning``, temp tables in memory).

    A missing database is created private (``0600``; SQLite gives its ``-wal``
    and ``-shm`` files the same mode), with ``auto_vacuum=INCREMENTAL`` (an
    existing database keeps its mode: switching needs a ``VACUUM``, see
    docs/memory.md). Error handling: a database that cannot be opened raises
    `StoreUnavailable`, which says why and what to do.
    """
    try:
        private.make_dir(path.parent)
        if not read_only:
            private.create_file(path)
        return _connect(path, busy_timeout_ms, durability, read_only, tuning)
    except (sqlite3.Error, OSError) as exc:
        raise unavailable(exc, path) from None


def _connect(
    path: Path, busy_timeout_ms: int, durability: str, read_only: bool, tuning: Tuning
) -> SqliteConnection:
    conn = sqlite3.connect(
        str(path),
        isolation_level=None,
        check_same_thread=False,
        timeout=busy_timeout_ms / 1000,
        factory=SqliteConnection,
    )
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        conn.execute(f"PRAGMA cache_size = {-1024 * int(tuning.cache_size_mb)}")
        conn.execute(f"PRAGMA mmap_size = {1024 * 1024 * int(tuning.mmap_size_mb)}")
        conn.execute("PRAGMA temp_store = MEMORY")
        if not read_only:
            if conn.execute("PRAGMA page_count").fetchone()[0] == 0:
                # Only a database without tables can take it (the first migration follows).
                conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
            mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
            if mode.lower() != "wal":
                _with_busy_retry(lambda: conn.execute("PRAGMA journal_mode = WAL"), busy_timeout_ms)
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute(f"PRAGMA synchronous = {'FULL' if durability == 'sync' else 'NORMAL'}")
        if read_only:
            _with_busy_retry(
                lambda: conn.execute(CREATE_VOCAB), busy_timeout_ms
            )  # a temp table: before query_only
            conn.execute("PRAGMA query_only = ON")
    except BaseException:
        conn.close()
        raise
    return conn


def is_busy(exc: BaseException) -> bool:
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _with_busy_retry(fn: Callable[[], T], busy_timeout_ms: int) -> T:
    deadline = time.monotonic() + busy_timeout_ms / 1000
    delay = BUSY_BACKOFF_START
    while True:
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(delay * (0.5 + random.random()))
        delay = min(delay * 2, BUSY_BACKOFF_MAX)


def begin_immediate(conn: sqlite3.Connection, busy_timeout_ms: int) -> None:
    """Take the write lock, retrying SQLITE_BUSY with backoff until the busy timeout."""
    _with_busy_retry(lambda: conn.execute("BEGIN IMMEDIATE"), busy_timeout_ms)


def rollback_quietly(conn: StoreConnection) -> None:
    """End the open transaction, if any, without its changes (either backend's connection)."""
    if conn.in_transaction:
        conn.rollback()


def open_write_connection(
    path: Path, *, busy_timeout_ms: int, durability: str, tuning: Tuning = DEFAULT_TUNING
) -> SqliteConnection:
    """The writer's connection, with the schema migrated to the latest version."""
    conn = connect(path, busy_timeout_ms=busy_timeout_ms, durability=durability, tuning=tuning)
    try:
        _with_busy_retry(lambda: schema.migrate(conn), busy_timeout_ms)
    except sqlite3.Error as exc:
        conn.close()
        raise unavailable(exc, path) from None
    except BaseException:
        conn.close()
        raise
    return conn


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
        self, path: Path, size: int, busy_timeout_ms: int, tuning: Tuning = DEFAULT_TUNING
    ) -> None:
        conns = [
            connect(path, busy_timeout_ms=busy_timeout_ms, read_only=True, tuning=tuning)
            for _ in range(size)
        ]
        self._setup(conns, connect(path, busy_timeout_ms=0, read_only=True, tuning=tuning))

    @classmethod
    def over(cls, conns: Sequence[StoreConnection]) -> ReadPool:
        """A pool of other connections (the PostgreSQL store's), without inline reads."""
        pool = cls.__new__(cls)
        pool._setup(conns, None)
        return pool

    def _setup(self, conns: Sequence[StoreConnection], inline: SqliteConnection | None) -> None:
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
