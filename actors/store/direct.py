"""The store opened in the calling thread, without its actors: for one-shot commands and the
storage contract suite.

`Direct.write(fn)` runs ``fn(tx)`` in one write transaction (``BEGIN IMMEDIATE`` on SQLite,
the write lock on PostgreSQL) and commits it; `Direct.read(fn)` runs ``fn(tx)`` in one
read transaction on a read-only connection. ``tx`` is the transaction seen through the
storage interfaces (`interfaces.StoreTx`), exactly as the StoreWriter and the read pool
give it: the backend is chosen once, here, from the URL (`backends.load`), or given.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from . import backends, connections
from .backend import Backend
from .interfaces import ReadTx, StoreTx
from .interfaces.errors import StoreError
from .writer import Written

T = TypeVar("T")


class Direct:
    """One write connection and one read connection of the store at ``path`` / ``url``
    (or of ``backend``, when given: ``path`` and ``url`` are then not looked at)."""

    def __init__(
        self,
        path: Path = Path(),
        url: str | None = None,
        *,
        busy_timeout_ms: int = 5000,
        durability: str = "full",
        backend: Backend | None = None,
    ) -> None:
        self.backend: Backend = backend if backend is not None else backends.load(url, path)
        self.busy_timeout_ms = busy_timeout_ms
        self.make_tx: Callable[[Any], StoreTx] = self.backend.tx_maker()
        self._writer: Any = self.backend.open_writer(
            busy_timeout_ms=busy_timeout_ms, durability=durability
        )
        self._reader: Any = None

    def write(self, fn: Callable[[StoreTx], T]) -> T:
        """``fn(tx)`` in one write transaction, committed; rolled back if ``fn`` raises.
        A `writer.Written` result gives its ``value``."""
        conn = self._writer
        with conn.errors():
            conn.begin_write(self.busy_timeout_ms)
            try:
                result = fn(self.make_tx(conn))
                conn.commit()
            except BaseException:
                connections.rollback_quietly(conn)
                raise
        return result.value if isinstance(result, Written) else result

    def read(self, fn: Callable[[ReadTx], T]) -> T:
        """``fn(tx)`` in one read transaction (a consistent snapshot) on a read-only connection."""
        if self._reader is None:
            self._reader = self.backend.open_reader(self.busy_timeout_ms)
        make_tx = self.make_tx
        return connections.run_read(self._reader, lambda conn: fn(make_tx(conn)))

    def close(self) -> None:
        for conn in (self._reader, self._writer):
            if conn is not None:
                try:
                    with conn.errors():
                        conn.close()
                except (StoreError, OSError):  # closing twice, or a lost server
                    pass
        self._reader = self._writer = None

    def __enter__(self) -> Direct:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
