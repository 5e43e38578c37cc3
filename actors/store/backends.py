"""Which database the store is, from ``[store] url``, and its connections.

``sqlite`` (the default) is the file ``memtrio.sqlite`` in the home (`db`); a
``postgresql://`` URL is that database (`pg`, which needs psycopg: imported
only then, so a SQLite user needs no PostgreSQL driver). Before a URL is used
it is checked (`dsn.check`) and its passwords registered (`dsn.register`), so
that no message or log line shows them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from . import db, dsn
from .interfaces import StoreTx
from .messages import Change

SQLITE = "sqlite"
STORE_ORIGIN = "the store URL (--store, [store] url or MEMTRIO_STORE)"


class DriverMissing(db.StoreUnavailable):
    """A PostgreSQL store was asked for, and the psycopg driver cannot be imported: exit
    code 2, as for any configuration that a restart will not fix."""

    code = 2


def _driver_missing(exc: ImportError) -> DriverMissing:
    return DriverMissing(
        f"a PostgreSQL store needs the psycopg driver, which cannot be imported here ({exc})",
        "pip install 'memtrio[postgres]'",
        Path("postgresql"),
    )


def _pg(url: str, origin: str = STORE_ORIGIN) -> ModuleType:
    """``pg.pool`` for ``url``, checked and its passwords registered (`dsn`).

    Error handling: `DriverMissing` saying how to install the driver; `ConfigError`
    for a URL libpq would misread (neither quotes the URL).
    """
    try:
        from .pg import pool
    except ImportError as exc:
        raise _driver_missing(exc) from None
    dsn.register(url)
    dsn.check(url, origin)
    return pool


def tx_factory(url: str | None) -> Callable[[Any], StoreTx]:
    """How a connection of the store at ``url`` is seen through the storage interfaces: the
    backend is chosen here, once, where the store is opened (`interfaces.StoreTx`)."""
    if url is not None and url != SQLITE:
        try:
            from .pg.tx import tx as pg_tx  # psycopg: PostgreSQL stores only
        except ImportError as exc:
            raise _driver_missing(exc) from None

        return pg_tx
    from .sqlite.tx import tx as sqlite_tx

    return sqlite_tx


# How a committed write tells the store's other processes what changed:
# ``announce(conn, origin, changes, (mark before, mark after))``, run inside the write
# transaction (the marks: `Snapshot.change_mark` before and after the write).
Announce = Callable[[Any, str, Sequence[Change], tuple[int, int]], None]


def announcer(url: str | None) -> Announce | None:
    """The backend's way of telling other processes of a write (PostgreSQL: ``NOTIFY``,
    `pg.notify`), or None (SQLite: other processes find the change mark moved, `coherence`)."""
    return _pg_announce if url is not None and url != SQLITE else None


def _pg_announce(conn: Any, origin: str, changes: Sequence[Change], marks: tuple[int, int]) -> None:
    from .pg.notify import announce  # psycopg: imported once a PostgreSQL store is open

    announce(conn, origin, changes, marks)


def check_url(url: str, origin: str) -> None:
    """`DriverMissing` or `ConfigError` (exit code 2) unless ``url`` is a PostgreSQL URL
    memtrio can use; ``origin`` names where it came from (a flag)."""
    _pg(url, origin)


def open_writer(
    path: Path,
    url: str | None,
    *,
    busy_timeout_ms: int,
    durability: str,
    tuning: db.Tuning = db.DEFAULT_TUNING,
) -> db.StoreConnection:
    """The StoreWriter's connection, schema migrated (`db.StoreUnavailable` if it cannot be).

    ``durability`` and ``tuning`` are SQLite's (PostgreSQL has its own settings).
    """
    if url is not None and url != SQLITE:
        conn: db.StoreConnection = _pg(url).open_write_connection(url)
        return conn
    return db.open_write_connection(
        path, busy_timeout_ms=busy_timeout_ms, durability=durability, tuning=tuning
    )


def open_read_pool(
    path: Path,
    url: str | None,
    size: int,
    busy_timeout_ms: int,
    tuning: db.Tuning = db.DEFAULT_TUNING,
) -> db.ReadPool:
    if url is not None and url != SQLITE:
        pool: db.ReadPool = _pg(url).open_read_pool(url, size)
        return pool
    return db.ReadPool(path, size, busy_timeout_ms, tuning)


def open_reader(
    path: Path, url: str | None, busy_timeout_ms: int, tuning: db.Tuning = db.DEFAULT_TUNING
) -> db.StoreConnection:
    """One read-only connection (the ranker's own)."""
    if url is not None and url != SQLITE:
        conn: db.StoreConnection = _pg(url).open_reader(url)
        return conn
    return db.connect(path, busy_timeout_ms=busy_timeout_ms, read_only=True, tuning=tuning)


def shown(path: Path, url: str | None) -> str:
    """Where the store is, for messages and logs (a URL without its password)."""
    if url is not None and url != SQLITE:
        return dsn.shown(url)
    return str(path)
