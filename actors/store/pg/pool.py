"""Opening the PostgreSQL store: the writer's connection (migrated), the read pool, clear errors."""

from __future__ import annotations

from pathlib import Path

import psycopg

from ..connections import ReadPool, StoreUnavailable
from ..dsn import redact, shown
from .conn import PgConnection
from .schema import migrate


def unavailable(exc: BaseException, url: str) -> StoreUnavailable:
    """What a failure to reach or use the PostgreSQL store means, and what to do.

    The driver's text is never passed on as it is: `dsn.redact` removes ``url``'s
    passwords (libpq may quote the URL, or name a host made of a password's part).
    """
    if isinstance(exc, StoreUnavailable):
        return exc
    detail = " ".join(redact(str(exc), url).split()) or type(exc).__name__
    where = shown(url)
    if isinstance(exc, psycopg.OperationalError):
        return StoreUnavailable(
            f"cannot reach the PostgreSQL store {where} ({detail})",
            "check that the server is running and the URL, user and password are right "
            "(--store, [store] url or MEMTRIO_STORE); memtrio reconnects when it is back",
            Path(where),
        )
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return StoreUnavailable(
            f"the PostgreSQL store {where} refused ({detail})",
            "run one memtrio command as the schema's owner first (it creates or upgrades the "
            "tables), and grant this role what docs/operations.md lists (Team set-up)",
            Path(where),
        )
    if isinstance(exc, psycopg.errors.UndefinedFile | psycopg.errors.FeatureNotSupported):
        return StoreUnavailable(
            f"the PostgreSQL store {where} lacks an extension ({detail})",
            "install pgvector and pg_trgm on the server (docs/operations.md, Team set-up)",
            Path(where),
        )
    return StoreUnavailable(
        f"the PostgreSQL store {where} failed ({type(exc).__name__}: {detail})",
        "run memtrio doctor",
        Path(where),
    )


def open_write_connection(url: str) -> PgConnection:
    """The writer's connection, with the schema migrated to the latest version."""
    try:
        conn = PgConnection.open(url)
    except psycopg.Error as exc:
        raise unavailable(exc, url) from None
    try:
        migrate(conn)
    except psycopg.Error as exc:
        conn.close()
        raise unavailable(exc, url) from None
    except BaseException:
        conn.close()
        raise
    return conn


def open_reader(url: str) -> PgConnection:
    """One read-only connection (`StoreUnavailable` when the server cannot be reached)."""
    try:
        return PgConnection.open(url, read_only=True)
    except psycopg.Error as exc:
        raise unavailable(exc, url) from None


def open_read_pool(url: str, size: int) -> ReadPool:
    """``size`` read connections to ``url`` (`connections.ReadPool`: reads in worker threads;
    a connection lost with its server reconnects on its next use, `PgConnection.revive`)."""
    conns: list[PgConnection] = []
    try:
        for _ in range(size):
            conns.append(PgConnection.open(url, read_only=True))
    except psycopg.Error as exc:
        for conn in conns:
            conn.close()
        raise unavailable(exc, url) from None

    return ReadPool(conns)
