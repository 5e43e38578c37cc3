"""The SQLite backend: the store is one file (``memtrio.sqlite`` in the home, by default)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import connections
from ..backend import Backend, Capability
from ..interfaces import StoreTx
from . import db


class SqliteBackend(Backend):
    """The store in the SQLite file at ``path``."""

    name = "sqlite"
    capabilities = frozenset(
        {
            Capability.FILE_UPKEEP,
            Capability.WHOLE_GRAPH_READS,
            Capability.ANY_BYTES_IN_COLUMNS,
            Capability.EXACT_TERM_COUNTS,
            Capability.RANKS_BY_PROXIMITY,
        }
    )

    def __init__(self, path: Path) -> None:
        self.path = path

    def __repr__(self) -> str:
        return f"SqliteBackend({str(self.path)!r})"

    @property
    def shown(self) -> str:
        return str(self.path)

    @property
    def configured_name(self) -> str:
        return "the home's SQLite store"

    def check(self, origin: str) -> None:
        """Nothing to check: a file is opened (or refused) when it is used."""

    def tx_maker(self) -> Callable[[Any], StoreTx]:
        from .tx import tx

        return tx

    def open_writer(
        self,
        *,
        busy_timeout_ms: int,
        durability: str,
        tuning: connections.Tuning = connections.DEFAULT_TUNING,
    ) -> connections.StoreConnection:
        return db.open_write_connection(
            self.path, busy_timeout_ms=busy_timeout_ms, durability=durability, tuning=tuning
        )

    def open_read_pool(
        self,
        size: int,
        busy_timeout_ms: int,
        tuning: connections.Tuning = connections.DEFAULT_TUNING,
    ) -> connections.ReadPool:
        return db.open_read_pool(self.path, size, busy_timeout_ms, tuning)

    def open_reader(
        self, busy_timeout_ms: int, tuning: connections.Tuning = connections.DEFAULT_TUNING
    ) -> connections.StoreConnection:
        return db.connect(self.path, busy_timeout_ms=busy_timeout_ms, read_only=True, tuning=tuning)

    def same_store(self, other: Backend) -> bool:
        if not isinstance(other, SqliteBackend):
            return False
        try:
            return self.path.resolve() == other.path.resolve() or self.path.samefile(other.path)
        except OSError:
            return False
