"""The PostgreSQL backend: the store is a database on a server, named by its URL.

Nothing here imports the driver (psycopg) at import time: each opener imports it, and
says how to install it when it is missing (`DriverMissing`, exit code 2).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from .. import connections, dsn
from ..backend import Announce, Backend, Capability, DriverMissing, Listen
from ..interfaces import StoreTx
from ..messages import Change

STORE_ORIGIN = "the store URL (--store, [store] url or MEMTRIO_STORE)"


def driver_missing(exc: ImportError) -> DriverMissing:
    return DriverMissing(
        f"a PostgreSQL store needs the psycopg driver, which cannot be imported here ({exc})",
        "pip install 'memtrio[postgres]'",
        Path("postgresql"),
    )


class PgBackend(Backend):
    """The store in the PostgreSQL database at ``url``."""

    name = "postgresql"
    capabilities = frozenset({Capability.ANNOUNCES_WRITES, Capability.STORED_VECTOR_INDEX})

    def __init__(self, url: str) -> None:
        self.url = url

    def __repr__(self) -> str:
        return f"PgBackend({self.shown!r})"

    @property
    def shown(self) -> str:
        return dsn.shown(self.url)

    def _pool(self, origin: str = STORE_ORIGIN) -> ModuleType:
        """``pg.pool``, the URL checked and its passwords registered (`dsn`).

        Error handling: `DriverMissing` saying how to install the driver; `ConfigError`
        for a URL libpq would misread (neither quotes the URL).
        """
        try:
            from . import pool
        except ImportError as exc:
            raise driver_missing(exc) from None
        dsn.register(self.url)
        dsn.check(self.url, origin)
        return pool

    def register_secrets(self) -> None:
        dsn.register(self.url)

    def check(self, origin: str) -> None:
        self._pool(origin)

    def tx_maker(self) -> Callable[[Any], StoreTx]:
        try:
            from .tx import tx  # psycopg: PostgreSQL stores only
        except ImportError as exc:
            raise driver_missing(exc) from None
        return tx

    def open_writer(
        self,
        *,
        busy_timeout_ms: int,
        durability: str,
        tuning: connections.Tuning = connections.DEFAULT_TUNING,
    ) -> connections.StoreConnection:
        conn: connections.StoreConnection = self._pool().open_write_connection(self.url)
        return conn

    def open_read_pool(
        self,
        size: int,
        busy_timeout_ms: int,
        tuning: connections.Tuning = connections.DEFAULT_TUNING,
    ) -> connections.ReadPool:
        pool: connections.ReadPool = self._pool().open_read_pool(self.url, size)
        return pool

    def open_reader(
        self, busy_timeout_ms: int, tuning: connections.Tuning = connections.DEFAULT_TUNING
    ) -> connections.StoreConnection:
        conn: connections.StoreConnection = self._pool().open_reader(self.url)
        return conn

    def same_store(self, other: Backend) -> bool:
        return isinstance(other, PgBackend) and other.url == self.url

    def announcer(self) -> Announce | None:
        return _announce

    def change_listener(self) -> Listen | None:
        try:
            from .notify import serve_change_listener  # psycopg: PostgreSQL stores only
        except ImportError:  # the store says how to install the driver when it opens
            return None
        url = self.url

        async def listen(ctx: Any, store: Any, *, task_status: Any) -> None:
            await serve_change_listener(ctx, store, url, task_status=task_status)

        return listen


def _announce(conn: Any, origin: str, changes: Sequence[Change], marks: tuple[int, int]) -> None:
    from .notify import announce  # psycopg: imported once a PostgreSQL store is open

    announce(conn, origin, changes, marks)
