"""The store backends the end-to-end suites run over, and a way to look inside either.

A test marked `both_stores` (``[every_transport, both_stores]``) runs over every
transport on SQLite and once more over stdio on PostgreSQL (the transports do
not depend on the store, so repeating them would only cost time). The storage
contract suite (tests/test_storage_contract*.py) drives every storage interface
on both backends, so an end-to-end test is marked only where the PostgreSQL path
differs: transactions across processes, NOTIFY, reconnection, migration, and
one smoke path per tool family; the rest run on SQLite
(``pytest.mark.stores("sqlite")`` where the module's mark says both). The PostgreSQL server is a private ``pgserver`` (PostgreSQL 18 with
``vector`` and ``pg_trgm``) started once per test session in a temporary
directory (in memory where the system has ``/dev/shm``); each home gets a database of its
own (``CREATE DATABASE``, a copy of a template at the latest schema), as each SQLite home
has its own file, so tests and servers stay independent. ``MEMTRIO_TEST_STORES=sqlite`` skips the PostgreSQL runs.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
import shutil
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from memtrio.actors.chaos import pg as chaos_pg
from memtrio.actors.store.direct import Direct

STORES = ("sqlite", "postgresql")
both_stores = pytest.mark.stores(*STORES)
"""A module's mark: its tests run on SQLite (every transport) and on PostgreSQL (stdio)."""

_selected: list[str] = []  # a PostgreSQL URL a test names itself (`selected_store`)
_serving: list[PgServer] = []  # the server of the running module's PostgreSQL runs


def store_url(home: Path | None = None) -> str | None:
    """The PostgreSQL URL of ``home``'s store in the running test (None: SQLite).

    As a SQLite store is a file in its home, each home gets a database of its
    own (created at first use): servers of different homes never share a store.
    """
    if _selected:
        return _selected[-1]
    if not _serving or home is None:
        return None
    return _serving[-1].database_for(Path(home))


def store_env(home: Path) -> dict[str, str]:
    """The environment that points a server of ``home`` at its store."""
    url = store_url(home)
    return {"MEMTRIO_STORE": url} if url else {}


class PgServer(chaos_pg.PgServer):
    """The session's private PostgreSQL server; `database_for` gives each home its database."""

    def __init__(self) -> None:
        super().__init__(parent=memory_directory())
        self.homes: dict[str, str] = {}
        self._template: str | None = None  # `migrated_database`'s template, once made
        self.skip_fsync()

    def skip_fsync(self) -> None:
        """No fsync for the tests' throwaway server (set at reload, kept across `start`).

        What a test can do to PostgreSQL (kill a backend, stop or kill the server)
        loses nothing without fsync: each commit's WAL is still written to the kernel
        at commit (``synchronous_commit`` stays on); only a crash of the machine
        would lose it, and the data directory is deleted at the end anyway. It saves
        the flushes of every commit, ``CREATE DATABASE`` and the shutdown checkpoint
        (about 30 s of the suite's teardown on two busy cores).
        """
        import psycopg

        with psycopg.connect(self.uri, autocommit=True) as conn:
            for setting in ("fsync", "full_page_writes"):
                conn.execute(f"ALTER SYSTEM SET {setting} = off")
            conn.execute("SELECT pg_reload_conf()")

    def migrated_database(self) -> str:
        """A new database at the latest schema: a copy (``CREATE DATABASE ... TEMPLATE``) of
        one this server migrated once, instead of running every migration again (about a
        second on two busy cores). Opening it migrates nothing; for tests of the storage
        interfaces, not of migration (`database` gives an empty one)."""
        import psycopg

        if self._template is None:
            url = self.database()
            Direct(Path(), url).close()  # opening migrates; closed: a template has no session
            self._template = urlsplit(url).path.lstrip("/")
        name = f"memtrio_test_{os.getpid()}_{next(_copies)}_{secrets.token_hex(3)}"
        with psycopg.connect(self.uri, autocommit=True) as raw:
            raw.execute(f"CREATE DATABASE {name} TEMPLATE {self._template} STRATEGY = FILE_COPY")
        return chaos_pg.with_database(self.uri, name)

    def drop(self, url: str) -> None:
        """Drop ``url``'s database (its sessions closed first), giving its files back."""
        chaos_pg.drop_database(self.uri, url)

    def drop_homes(self) -> None:
        """Drop the databases `database_for` made (their servers have ended)."""
        while self.homes:
            self.drop(self.homes.popitem()[1])

    def database_for(self, home: Path) -> str:
        """The database of ``home`` (made at its first use, at the latest schema as any
        store is once a server has opened it: `migrated_database`)."""
        key = str(home.resolve())
        if key not in self.homes:
            self.homes[key] = self.migrated_database()
        return self.homes[key]


_copies = itertools.count(1)

MEMORY_FS = Path("/dev/shm")
"""Linux's shared-memory file system (tmpfs), where there is one."""


def memory_directory() -> Path | None:
    """Where the session's PostgreSQL server keeps its data: in memory when the system has
    a writable `MEMORY_FS`, else (None) the temporary directory. Every test database is
    about 10 MB in some 300 files: on a disk, creating them and removing the data directory
    at the end (a minute per thousand megabytes on two busy cores) cost more than the tests
    that use them; in memory, next to nothing."""
    if MEMORY_FS.is_dir() and os.access(MEMORY_FS, os.W_OK | os.X_OK):
        return MEMORY_FS
    return None


def new_sqlite_store(path: Path, template: Path) -> None:
    """A new SQLite store at ``path``: a copy of ``template``, a store at the latest schema
    made once (`sqlite_template`), as `PgServer.migrated_database` is on PostgreSQL."""
    shutil.copy(template, path)


def sqlite_template(directory: Path) -> Path:
    """A new, empty SQLite store at the latest schema in ``directory`` (closed, so its file
    alone is the whole store): the template of `new_sqlite_store`."""
    path = directory / "memtrio.sqlite"
    Direct(path).close()
    assert sorted(p.name for p in directory.iterdir()) == ["memtrio.sqlite"]
    return path


@contextlib.contextmanager
def selected_store(url: str) -> Iterator[str]:
    """`rows` and the servers of the block use ``url``, whatever their home."""
    _selected.append(url)
    try:
        yield url
    finally:
        _selected.pop()


@contextlib.contextmanager
def serving(server: PgServer) -> Iterator[PgServer]:
    """Each home of the block has its store on ``server`` (`store_url`)."""
    _serving.append(server)
    try:
        yield server
    finally:
        _serving.pop()


@contextlib.contextmanager
def connect(home: Path) -> Iterator[Any]:
    """A DB-API connection to ``home``'s store in the running test (SQLite: its file)."""
    url = store_url(home)
    if url is None:
        conn = sqlite3.connect(home / "memtrio.sqlite")
        try:
            yield conn
        finally:
            conn.close()
        return
    import psycopg

    pg = psycopg.connect(url, autocommit=True)
    try:
        yield _TestSql(pg)
    finally:
        pg.close()


class _TestSql:
    """The tests' own PostgreSQL connection, taking the tests' SQL as they write it for
    both stores (``?`` placeholders, outside quotes, as ``%s``). Test code only: the
    store itself runs PostgreSQL's own statements and rewrites none (`pg.conn`)."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.raw.execute(placeholders(sql), tuple(params))

    def commit(self) -> None:
        """Nothing: each statement commits (autocommit), as sqlite3's ``commit`` would."""


def placeholders(sql: str) -> str:
    """A test's statement, written with ``?`` for both stores, with PostgreSQL's ``%s``."""
    parts = sql.replace("%", "%%").split("'")
    return "'".join(p.replace("?", "%s") if i % 2 == 0 else p for i, p in enumerate(parts))


def sql(conn: Any, statement: str, *params: Any) -> Any:
    """Run a test's setup ``statement`` (written with ``?`` in SQL both stores take) on a
    store connection of either backend (PostgreSQL: `PgConnection.native`); its cursor."""
    native = getattr(conn, "native", None)
    if native is None:
        return conn.execute(statement, params)
    return native(placeholders(statement), params)


def rows(home: Path, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """``sql`` (SQLite spelling, as the store's shared SQL) on the running test's store."""
    with connect(home) as conn:
        return [tuple(r) for r in conn.execute(sql, params).fetchall()]


def tables(home: Path) -> list[str]:
    """The store's tables (not the SQLite full-text index's shadow tables)."""
    if store_url(home) is None:
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


def raw(op: Any) -> Any:
    """A function of the raw connection (a test's PRAGMA or setup SQL) as a function of the
    store's transaction: the tests look under the storage interfaces on purpose."""
    return lambda tx: op(tx.conn)
