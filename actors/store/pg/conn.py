"""One PostgreSQL connection of the store: native statements and explicit transactions.

The storage interfaces' PostgreSQL modules (`pg.memories`, `pg.graph`...) run their
statements, written in PostgreSQL's own dialect, with `PgConnection.native` /
`native_many`: ``%s`` placeholders, nothing rewritten. The connection is in
autocommit mode, so transactions are explicit, and the store's shared code (the
writer, the read pool, `direct`) opens and ends them through the same four methods
as SQLite's connections (`db.SqliteConnection`):

- `begin_write`: ``BEGIN`` plus the store's transaction-level advisory lock,
  `WRITE_LOCK`: writers of every process take turns, exactly as SQLite's one write
  lock makes them, so an op that reads then writes (the next id of a batch, a
  uniqueness check) sees no other writer in between.
- `begin_read`: a ``REPEATABLE READ READ ONLY`` transaction: one consistent
  snapshot, as a SQLite read transaction is.
- `commit` / `rollback`.

Errors are raised as the store's own (`interfaces.errors`: a refused row is
`StoreConflict`, a lock not granted in time `StoreBusy`...), the original psycopg
error chained as ``__cause__``; a lost server is `StoreConnectionLost`, whose
message says nothing was written.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import psycopg
from psycopg import pq
from psycopg.types.numeric import FloatLoader, IntLoader

from ..dsn import redact
from ..interfaces.errors import (
    StoreBusy,
    StoreConflict,
    StoreConnectionLost,
    StoreError,
    StoreOperationalError,
)
from ..schemas import RECORDS_VERSION

# Reconnection after the server went away: the first attempt at once, then
# exponential backoff between attempts (seconds); calls in between fail at once.
RECONNECT_START = 0.1
RECONNECT_MAX = 5.0
CONNECT_TIMEOUT = 5  # seconds (libpq's connect_timeout)

# pg_advisory_xact_lock keys: the write lock and the migration lock.
WRITE_LOCK = 0x6D656D74  # "memt"
MIGRATE_LOCK = 0x6D696772  # "migr"

Params = Sequence[Any] | dict[str, Any] | None

# The SQLite schema version whose records a PostgreSQL store holds (export headers say it):
# both backends hold the same records (`schemas.RECORDS_VERSION`).
SQLITE_EQUIVALENT = RECORDS_VERSION


class _NumericLoader(psycopg.adapt.Loader):
    """``numeric`` (what sum() of integers returns) as int when whole, else float, like SQLite."""

    def load(self, data: Any) -> int | float:
        text = bytes(data).decode()
        return int(text) if text.lstrip("-").isdigit() else float(text)


def _connect(url: str) -> psycopg.Connection[tuple[Any, ...]]:
    raw = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT)
    raw.adapters.register_loader("numeric", _NumericLoader)
    raw.adapters.register_loader("float4", FloatLoader)
    raw.adapters.register_loader("int2", IntLoader)
    return raw


# SQLSTATEs of a lock not granted in time: lock_not_available (``lock_timeout``), a
# deadlock, a serialization failure.
_BUSY = ("55P03", "40P01", "40001")
# A write refused because the transaction or the server is read-only (a read transaction, a
# standby): operational, as SQLite's read-only database is.
_READ_ONLY = ("25006",)


def _as_store_error(exc: psycopg.Error, url: str) -> StoreError:
    """``exc`` as the store's error (`interfaces.errors`); its text, and that of ``exc``
    (chained by the caller: tracebacks in the trace log show it), without ``url``'s
    passwords."""
    detail = " ".join(redact(str(exc), url).split()) or type(exc).__name__
    exc.args = (detail,)
    if isinstance(exc, psycopg.errors.IntegrityError):
        return StoreConflict(detail)
    if exc.sqlstate in _BUSY:
        return StoreBusy(detail)
    if isinstance(exc, psycopg.OperationalError) and (
        exc.sqlstate is None or exc.sqlstate.startswith(("08", "57P"))
    ):
        return StoreConnectionLost(
            f"the PostgreSQL store is unreachable ({detail}); this call was not acknowledged "
            "(memtrio reconnects with backoff): try again"
        )
    if isinstance(exc, psycopg.OperationalError) or exc.sqlstate in _READ_ONLY:
        return StoreOperationalError(detail)
    return StoreError(f"{type(exc).__name__}: {detail}")


class PgConnection:
    """One psycopg connection behind the store's sqlite3-shaped interface (see module doc)."""

    dialect = "postgresql"

    def __init__(
        self, raw: psycopg.Connection[tuple[Any, ...]], url: str, read_only: bool = False
    ) -> None:
        self.raw = raw
        self.url = url
        self.read_only = read_only
        self._delay = RECONNECT_START
        self._retry_at = 0.0

    @classmethod
    def open(cls, url: str, read_only: bool = False) -> PgConnection:
        return cls(_connect(url), url, read_only)

    @property
    def in_transaction(self) -> bool:
        if self.raw.closed:  # a lost connection holds no transaction any more
            return False
        return self.raw.info.transaction_status != pq.TransactionStatus.IDLE

    def revive(self) -> None:
        """Reopen a lost connection, at most once per backoff delay (`RECONNECT_START`
        doubling to `RECONNECT_MAX`); until then `StoreConnectionLost`, at once."""
        if not self.raw.closed:
            return
        now = time.monotonic()
        if now < self._retry_at:
            raise StoreConnectionLost(
                "the PostgreSQL store is unreachable; reconnecting (next attempt in "
                f"{self._retry_at - now:.1f} s); nothing was written, try again"
            )
        try:
            self.raw = _connect(self.url)
        except psycopg.Error as exc:
            self._retry_at = now + self._delay
            self._delay = min(self._delay * 2, RECONNECT_MAX)
            raise _as_store_error(exc, self.url) from exc
        self._delay, self._retry_at = RECONNECT_START, 0.0

    def _begin(self, statement: str, lock: bool) -> None:
        """BEGIN (and the write lock); a connection found lost first is reopened, once."""
        self.revive()
        try:
            try:
                self.raw.execute(statement.encode())
            except psycopg.OperationalError:
                if not self.raw.closed:
                    raise
                self.revive()  # the server restarted since our last statement: BEGIN did nothing
                self.raw.execute(statement.encode())
            if lock:
                self.raw.execute(b"SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
        except psycopg.Error as exc:
            raise self._failed(exc) from exc

    def begin_write(self, busy_timeout_ms: int = 0) -> None:
        """Open a write transaction: ``BEGIN`` and the store's write lock (`WRITE_LOCK`),
        waited for as long as it takes (``busy_timeout_ms`` is SQLite's; PostgreSQL's
        ``lock_timeout`` applies)."""
        self._begin("BEGIN", lock=True)

    def begin_read(self) -> None:
        """Open a read transaction: one consistent snapshot (``REPEATABLE READ``), read only
        on a read connection."""
        mode = "READ ONLY" if self.read_only else "READ WRITE"
        self._begin(f"BEGIN ISOLATION LEVEL REPEATABLE READ {mode}", lock=False)

    def commit(self) -> None:
        """Commit the open transaction (errors are the store's, as `native`'s)."""
        try:
            self.raw.execute(b"COMMIT")
        except psycopg.Error as exc:
            raise self._failed(exc) from exc

    def rollback(self) -> None:
        """Roll the open transaction back (nothing when none is open or the connection is lost)."""
        if not self.in_transaction:
            return
        try:
            self.raw.execute(b"ROLLBACK")
        except psycopg.Error as exc:
            raise self._failed(exc) from exc

    @property
    def closed(self) -> bool:
        return self.raw.closed

    @contextlib.contextmanager
    def errors(self) -> Iterator[None]:
        """A block whose psycopg errors are raised as the store's (`_failed`), chained."""
        try:
            yield
        except psycopg.Error as exc:
            raise self._failed(exc) from exc

    def _failed(self, exc: psycopg.Error) -> StoreError:
        """``exc`` as the store's error; a connection lost with its server (`StoreConnectionLost`:
        the server went away, or libpq was left mid-pipeline by it) is closed here, so it holds
        no transaction any more (the server rolled it back) and its next use reopens it
        (`revive`): the call fails, the writer goes on."""
        err = _as_store_error(exc, self.url)
        if isinstance(err, StoreConnectionLost) and not self.raw.closed:
            with contextlib.suppress(Exception):
                self.raw.close()
        return err

    def native(self, sql: str, params: Params = None) -> psycopg.Cursor[tuple[Any, ...]]:
        """Run ``sql`` as written, in PostgreSQL's own dialect (``%s`` placeholders, nothing
        translated): the statements of the storage interfaces' PostgreSQL modules.
        Errors are the store's (`interfaces.errors`)."""
        cur = self.raw.cursor()
        args = params if isinstance(params, dict) else tuple(params or ())
        try:
            cur.execute(sql.encode(), args)
        except psycopg.Error as exc:
            raise self._failed(exc) from exc
        return cur

    def native_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """`native` for a batch of parameter rows (``executemany``)."""
        cur = self.raw.cursor()
        try:
            cur.executemany(sql.encode(), [tuple(r) for r in rows])
        except psycopg.Error as exc:
            raise self._failed(exc) from exc

    def close(self) -> None:
        self.raw.close()
