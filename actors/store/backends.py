"""Which database the store is, from ``[store] url``, and its connections.

``sqlite`` (the default) is the file ``memtrio.sqlite`` in the home (`db`); a
``postgresql://`` URL is that database (`pg`, which needs psycopg: imported
only then, so a SQLite user needs no PostgreSQL driver).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from types import ModuleType

from . import db

SQLITE = "sqlite"


def _pg() -> ModuleType:
    """``pg.pool``, or `db.StoreUnavailable` saying how to install the driver."""
    try:
        from .pg import pool
    except ImportError as exc:
        raise db.StoreUnavailable(
            f"a PostgreSQL store needs the psycopg driver ({exc})",
            "install it with pip install 'memtrio[postgres]' (or psycopg[binary])",
            Path("postgresql"),
        ) from None
    return pool


def open_writer(
    path: Path,
    url: str | None,
    *,
    busy_timeout_ms: int,
    durability: str,
    tuning: db.Tuning = db.DEFAULT_TUNING,
) -> sqlite3.Connection:
    """The StoreWriter's connection, schema migrated (`db.StoreUnavailable` if it cannot be).

    ``durability`` and ``tuning`` are SQLite's (PostgreSQL has its own settings).
    """
    if url is not None and url != SQLITE:
        return _pg().open_write_connection(url)  # type: ignore[return-value]
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
        return _pg().open_read_pool(url, size)
    return db.ReadPool(path, size, busy_timeout_ms, tuning)


def open_reader(
    path: Path, url: str | None, busy_timeout_ms: int, tuning: db.Tuning = db.DEFAULT_TUNING
) -> sqlite3.Connection:
    """One read-only connection (the ranker's own)."""
    if url is not None and url != SQLITE:
        return _pg().open_reader(url)  # type: ignore[return-value]
    return db.connect(path, busy_timeout_ms=busy_timeout_ms, read_only=True, tuning=tuning)


def shown(path: Path, url: str | None) -> str:
    """Where the store is, for messages and logs (a URL without its password)."""
    if url is not None and url != SQLITE:
        from .pg.pool import redact

        return redact(url)
    return str(path)
