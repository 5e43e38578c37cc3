"""The store backends the end-to-end suites run over, and a way to look inside either.

A module marked ``pytestmark = [every_transport, both_stores]`` runs each test
over every transport on SQLite and once more over stdio on PostgreSQL (the
transports do not depend on the store, so repeating them would only cost
time). The PostgreSQL server is a private ``pgserver`` (PostgreSQL 18 with
``vector`` and ``pg_trgm``) started once per test session in a temporary
directory; each test gets a database of its own (``CREATE DATABASE``), so tests
stay independent. ``MEMTRIO_TEST_STORES=sqlite`` skips the PostgreSQL runs.
"""

from __future__ import annotations

import contextlib
import itertools
import shutil
import sqlite3
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

STORES = ("sqlite", "postgresql")
both_stores = pytest.mark.stores(*STORES)
"""A module's mark: its tests run on SQLite (every transport) and on PostgreSQL (stdio)."""

_current: list[str | None] = [None]  # the PostgreSQL URL of the running test, or None
_numbers = itertools.count(1)


def store_url() -> str | None:
    """The running test's PostgreSQL URL (None: SQLite)."""
    return _current[-1]


def store_env() -> dict[str, str]:
    """The environment that points a server at the running test's store."""
    url = store_url()
    return {"MEMTRIO_STORE": url} if url else {}


class PgServer:
    """One private PostgreSQL server for the session; `database` makes a fresh database."""

    def __init__(self) -> None:
        import pgserver

        # Not under pytest's private temporary directory: as root, pgserver runs the
        # server as its own user, which must reach the data directory.
        self.base = Path(tempfile.mkdtemp(prefix="memtrio-pg-"))
        self.base.chmod(0o755)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.server = pgserver.get_server(self.base, cleanup_mode="stop")
        self.uri = self.server.get_uri()

    def database(self) -> str:
        """A new empty database; its URL."""
        import psycopg

        name = f"memtrio_test_{next(_numbers)}"
        with psycopg.connect(self.uri, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name}")
            conn.execute(f"CREATE DATABASE {name}")
        return self.uri.replace("/postgres?", f"/{name}?", 1)

    def stop(self) -> None:
        """Stop the server, keeping its data (`start` brings it back on the same socket)."""
        self.server.cleanup()

    def start(self) -> None:
        import pgserver

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.server = pgserver.get_server(self.base, cleanup_mode="stop")

    def close(self) -> None:
        self.server.cleanup()
        shutil.rmtree(self.base, ignore_errors=True)


@contextlib.contextmanager
def selected_store(url: str | None) -> Iterator[str | None]:
    _current.append(url)
    try:
        yield url
    finally:
        _current.pop()


@contextlib.contextmanager
def connect(home: Path) -> Iterator[Any]:
    """A DB-API connection to the running test's store (SQLite: ``home``'s file)."""
    url = store_url()
    if url is None:
        conn = sqlite3.connect(home / "memtrio.sqlite")
        try:
            yield conn
        finally:
            conn.close()
        return
    from memtrio.actors.store.pg.conn import PgConnection

    pg = PgConnection.open(url)
    try:
        yield pg
    finally:
        pg.close()


def rows(home: Path, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """``sql`` (SQLite spelling, as the store's shared SQL) on the running test's store."""
    with connect(home) as conn:
        return [tuple(r) for r in conn.execute(sql, params).fetchall()]


def tables(home: Path) -> list[str]:
    """The store's tables (not the SQLite full-text index's shadow tables)."""
    if store_url() is None:
        sql = (
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'memories_fts%'"
        )
    else:
        sql = "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
    return [r[0] for r in rows(home, sql)]


def snapshot(home: Path) -> dict[str, list[Any]]:
    """Every row of every table: a refusal must leave this unchanged."""
    with connect(home) as conn:
        return {
            t: sorted((tuple(r) for r in conn.execute(f"SELECT * FROM {t}").fetchall()), key=repr)
            for t in tables(home)
        }
