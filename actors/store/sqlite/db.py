"""SQLite connections of the store: pragmas, transactions with busy retries, its read pool.

Every connection runs in autocommit mode (``isolation_level=None``) so that
transactions are explicit: writes use ``BEGIN IMMEDIATE ... COMMIT``, reads a
deferred ``BEGIN ... ROLLBACK`` for a consistent snapshot. The store's connections
are `SqliteConnection`s, whose `begin_write` / `begin_read` / ``commit`` /
``rollback`` are what the writer, the read pool and `direct` call
(`connections.StoreConnection`): PostgreSQL's connection (`pg.conn.PgConnection`) has
the same four, in its own dialect.

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
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TypeVar

from ....supervisors import private
from ..connections import DEFAULT_TUNING, ReadPool, StoreUnavailable, Tuning
from ..interfaces.errors import StoreError
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
BUSY_BACKOFF_MAX = 0.1


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


def open_read_pool(
    path: Path, size: int, busy_timeout_ms: int, tuning: Tuning = DEFAULT_TUNING
) -> ReadPool:
    """``size`` read-only connections to the store at ``path``, and one more for the reads
    the event loop runs itself (no busy timeout: a busy database sends the read to a thread)."""
    conns = [
        connect(path, busy_timeout_ms=busy_timeout_ms, read_only=True, tuning=tuning)
        for _ in range(size)
    ]
    return ReadPool(conns, connect(path, busy_timeout_ms=0, read_only=True, tuning=tuning))
