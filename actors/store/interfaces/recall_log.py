"""The recall log and access counts: what was recalled, when, and how often each row was returned.

The interface every store backend implements (`sqlite.recall_log`, `pg.recall_log`): arguments and
results are msgspec Structs or plain values, never rows, cursors or SQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import msgspec


class RecallEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One line of the recall log: a recall or an inspection and what it returned.

    ``scopes``, ``ids`` and ``scores`` are the JSON texts the log stores (a list of scope
    names, of memory ids in the order returned, of their scores), kept as text so an export
    and an import carry them unchanged."""

    ts: float
    kind: str
    query: str
    scopes: str
    ids: str
    scores: str


class RecallLogReads(Protocol):
    """What a read transaction may ask of `RecallLog` (`ReadTx.recall_log`): nothing that writes."""

    def newest(self, limit: int, kind: str | None = None) -> list[RecallEntry]:
        """The last ``limit`` lines (of ``kind`` only, when given), newest first."""
        ...

    def entries(self) -> Iterator[RecallEntry]:
        """Every line, oldest first (streamed: for exports)."""
        ...


class RecallLog(RecallLogReads, Protocol):
    """The recall log and access counts, in one transaction of the store (`StoreTx.recall_log`)."""

    def count_access(self, memory_id: int, at: float) -> None:
        """One more access of memory ``memory_id`` (its ``access_count``), last at ``at``
        (its ``last_accessed_at``); nothing when it does not exist."""
        ...

    def append(self, entry: RecallEntry) -> None:
        """Add ``entry`` at the end of the log."""
        ...

    def append_new(self, entry: RecallEntry) -> bool:
        """Add ``entry`` unless the log holds a line of the same time, kind and query (an
        import of the same file again); True when added."""
        ...
