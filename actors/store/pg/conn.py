"""A PostgreSQL connection with the small part of sqlite3's interface the store's SQL modules use.

The store's operations are synchronous functions ``op(conn)`` run in a worker
thread (`writer.Store`), written against ``sqlite3.Connection``: ``execute``
and ``executemany`` returning a cursor (``fetchone``, ``fetchall``, iteration,
``rowcount``, ``lastrowid``), ``in_transaction``, explicit ``BEGIN`` /
``COMMIT`` / ``ROLLBACK``. `PgConnection` gives the same over one psycopg 3
connection in autocommit mode (so transactions are explicit, as in `db`), and
rewrites each statement once (`sql.translate`).

Transactions:

- ``BEGIN IMMEDIATE`` (a write) is ``BEGIN`` plus the store's transaction-level
  advisory lock, `WRITE_LOCK`: writers of every process take turns, exactly as
  SQLite's one write lock makes them, so an op that reads then writes (the next
  id of a batch, a uniqueness check) sees no other writer in between.
- ``BEGIN`` (a read) is a ``REPEATABLE READ READ ONLY`` transaction: one
  consistent snapshot, as a SQLite read transaction is.

Errors are raised as the ``sqlite3`` exceptions the store's code already
handles (`PgIntegrityError` is an ``sqlite3.IntegrityError``...), the original
psycopg error chained; a lost server is `StoreConnectionLost`, whose message
says nothing was written.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import psycopg
from psycopg import pq
from psycopg.types.numeric import FloatLoader, IntLoader

from ..dsn import redact
from .sql import translate

# Reconnection after the server went away: the first attempt at once, then
# exponential backoff between attempts (seconds); calls in between fail at once.
RECONNECT_START = 0.1
RECONNECT_MAX = 5.0
CONNECT_TIMEOUT = 5  # seconds (libpq's connect_timeout)

# pg_advisory_xact_lock keys: the write lock and the migration lock.
WRITE_LOCK = 0x6D656D74  # "memt"
MIGRATE_LOCK = 0x6D696772  # "migr"

Params = Sequence[Any] | dict[str, Any] | None

# The SQLite schema version whose records a PostgreSQL store holds (export headers say it).
SQLITE_EQUIVALENT = 6
PRAGMAS = {
    "USER_VERSION": f"SELECT {SQLITE_EQUIVALENT}",
    "DATA_VERSION": "SELECT pg_snapshot_xmax(pg_current_snapshot())::text",
}


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


class PgError(sqlite3.DatabaseError):
    """A PostgreSQL error, as the sqlite3 error the store's code already handles."""


class PgIntegrityError(sqlite3.IntegrityError):
    """A constraint of the PostgreSQL store refused a row."""


class PgOperationalError(sqlite3.OperationalError):
    """The PostgreSQL store could not run the statement (lost connection, lock timeout...)."""


class StoreConnectionLost(PgOperationalError):
    """The connection to the PostgreSQL server is gone: nothing of the transaction was
    committed; the next use of the store reconnects."""


def _as_sqlite_error(exc: psycopg.Error, url: str) -> sqlite3.DatabaseError:
    """``exc`` as the sqlite3 error the store's code handles; its text, and that of ``exc``
    (chained: tracebacks in the trace log show it), without ``url``'s passwords."""
    detail = " ".join(redact(str(exc), url).split()) or type(exc).__name__
    exc.args = (detail,)
    if isinstance(exc, psycopg.errors.IntegrityError):
        return PgIntegrityError(detail)
    if isinstance(exc, psycopg.OperationalError) and (
        exc.sqlstate is None or exc.sqlstate.startswith(("08", "57P"))
    ):
        return StoreConnectionLost(
            f"the PostgreSQL store is unreachable ({detail}); this call was not acknowledged "
            "(memtrio reconnects with backoff): try again"
        )
    if isinstance(exc, psycopg.OperationalError):
        return PgOperationalError(detail)
    return PgError(f"{type(exc).__name__}: {detail}")


class Cursor:
    """The rows of one statement, with sqlite3's ``lastrowid`` and ``rowcount``."""

    def __init__(self, cur: psycopg.Cursor[tuple[Any, ...]], returning: bool) -> None:
        self._cur = cur
        self.lastrowid: int | None = None
        self.rowcount = cur.rowcount
        if returning:
            rows = cur.fetchall() if cur.description else []
            self.lastrowid = rows[-1][0] if rows else None

    @property
    def description(self) -> Any:
        return self._cur.description

    def fetchone(self) -> tuple[Any, ...] | None:
        return self._cur.fetchone() if self._cur.description else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self._cur.fetchall() if self._cur.description else []

    def fetchmany(self, size: int) -> list[tuple[Any, ...]]:
        return self._cur.fetchmany(size) if self._cur.description else []

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self.fetchall())


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
            raise _as_sqlite_error(exc, self.url) from exc
        self._delay, self._retry_at = RECONNECT_START, 0.0

    def _begin(self, statement: str, lock: bool) -> Cursor:
        """BEGIN (and the write lock); a connection found lost first is reopened, once."""
        self.revive()
        try:
            self.raw.execute(statement)
        except psycopg.OperationalError:
            if not self.raw.closed:
                raise
            self.revive()  # the server restarted since our last statement: BEGIN did nothing
            self.raw.execute(statement)
        if lock:
            self.raw.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
        return Cursor(self.raw.cursor(), False)

    @property
    def closed(self) -> bool:
        return self.raw.closed

    def _failed(self, exc: psycopg.Error) -> sqlite3.DatabaseError:
        """``exc`` as the store's error; a connection lost with its server (`StoreConnectionLost`:
        the server went away, or libpq was left mid-pipeline by it) is closed here, so it holds
        no transaction any more (the server rolled it back) and its next use reopens it
        (`revive`): the call fails, the writer goes on."""
        err = _as_sqlite_error(exc, self.url)
        if isinstance(err, StoreConnectionLost) and not self.raw.closed:
            with contextlib.suppress(Exception):
                self.raw.close()
        return err

    def execute(self, sql: str, params: Params = None) -> Cursor:
        """Run one statement (see the module doc); errors are sqlite3's (`PgError` and kin)."""
        try:
            return self._execute(sql, params)
        except psycopg.Error as exc:
            raise self._failed(exc) from exc

    def _execute(self, sql: str, params: Params) -> Cursor:
        word = sql.strip().upper()
        if word == "BEGIN IMMEDIATE":
            return self._begin("BEGIN", lock=True)
        if word == "BEGIN":
            mode = "READ ONLY" if self.read_only else "READ WRITE"
            return self._begin(f"BEGIN ISOLATION LEVEL REPEATABLE READ {mode}", lock=False)
        if word.startswith("PRAGMA"):
            return self._pragma(word)
        text, returning = translate(sql)
        cur = self.raw.cursor()
        args = params if isinstance(params, dict) else tuple(params or ())
        cur.execute(text.encode(), args)
        return Cursor(cur, returning)

    def _pragma(self, word: str) -> Cursor:
        """The PRAGMAs shared code reads: ``user_version`` (the SQLite schema version whose
        records the store holds) and ``data_version`` (a value that moves when anyone commits)."""
        name = word.removeprefix("PRAGMA").strip()
        if name not in PRAGMAS:
            raise psycopg.NotSupportedError(f"PRAGMA {name} has no PostgreSQL equivalent")
        cur = self.raw.cursor()
        cur.execute(PRAGMAS[name].encode())
        return Cursor(cur, False)

    def native(self, sql: str, params: Params = None) -> psycopg.Cursor[tuple[Any, ...]]:
        """Run ``sql`` as written, in PostgreSQL's own dialect (``%s`` placeholders, nothing
        translated): the statements of the storage interfaces' PostgreSQL modules.
        Errors are the store's (`PgError` and kin), as `execute`'s."""
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

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> Cursor:
        text, _ = translate(sql)
        text = text.removesuffix(" RETURNING id")
        cur = self.raw.cursor()
        try:
            cur.executemany(text.encode(), [tuple(r) for r in rows])
        except psycopg.Error as exc:
            raise self._failed(exc) from exc
        return Cursor(cur, False)

    def close(self) -> None:
        self.raw.close()
