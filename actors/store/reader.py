"""A read-only connection of one's own, seen through the storage interfaces: the ranker's.

The read pool hands each read any of its connections; a reader that streams a
whole table into an index, and must not hold a pool connection while it does,
keeps a `Reader` instead. `Reader.read(fn)` runs ``fn(tx)`` in
one read transaction (a consistent snapshot), in the calling thread.

Thread-safety: none; one caller at a time (the ranker serialises its uses).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from . import connections
from .backend import Backend
from .interfaces import ReadTx, StoreTx
from .interfaces.errors import StoreError

T = TypeVar("T")


class Reader:
    """One read-only connection of the store of ``backend``, opened on first use."""

    def __init__(
        self,
        backend: Backend,
        busy_timeout_ms: int,
        tuning: connections.Tuning = connections.DEFAULT_TUNING,
    ) -> None:
        self.backend = backend
        self.busy_timeout_ms = busy_timeout_ms
        self.tuning = tuning
        self.make_tx: Callable[[Any], StoreTx] = backend.tx_maker()
        self._conn: Any = None

    def open(self) -> Reader:
        """Connect now (`connections.StoreUnavailable` if the store cannot be reached)."""
        if self._conn is None:
            self._conn = self.backend.open_reader(self.busy_timeout_ms, self.tuning)
        return self

    def read(self, fn: Callable[[ReadTx], T]) -> T:
        """``fn(tx)`` in one read transaction on this reader's connection."""
        self.open()
        make_tx = self.make_tx
        return connections.run_read(self._conn, lambda conn: fn(make_tx(conn)))

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                with conn.errors():
                    conn.close()
            except (StoreError, OSError):  # a lost server
                pass
