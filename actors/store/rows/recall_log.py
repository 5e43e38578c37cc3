"""The recall log's rows, the same on both backends."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

from ..interfaces.recall_log import RecallEntry
from .sql import Rows

# The columns of a `RecallEntry`, in the order of `recall_entry` and `values`.
COLUMNS = "ts, kind, query, scopes, ids, scores"


def recall_entry(row: Sequence[Any]) -> RecallEntry:
    """A row of `COLUMNS` as a `RecallEntry`."""
    ts, kind, query, scopes, ids, scores = row
    return RecallEntry(ts=ts, kind=kind, query=query, scopes=scopes, ids=ids, scores=scores)


def values(e: RecallEntry) -> tuple[float, str, str, str, str, str]:
    """The values of `COLUMNS` for an insert of ``e``."""
    return (e.ts, e.kind, e.query, e.scopes, e.ids, e.scores)


class RecallLogBase(Rows):
    """`interfaces.recall_log.RecallLog`'s bodies; each backend names the statements."""

    COUNT_ACCESS: ClassVar[str]  # (at, memory id)
    APPEND: ClassVar[str]  # `values`
    FIND: ClassVar[str]  # (ts, kind, query): a row if that entry is logged
    NEWEST: ClassVar[str]  # (limit,)
    NEWEST_OF_KIND: ClassVar[str]  # (kind, limit)
    ENTRIES = f"SELECT {COLUMNS} FROM recall_log ORDER BY id"

    def count_access(self, memory_id: int, at: float) -> None:
        self.run(self.COUNT_ACCESS, (at, memory_id))

    def append(self, entry: RecallEntry) -> None:
        self.run(self.APPEND, values(entry))

    def append_new(self, entry: RecallEntry) -> bool:
        if self.first(self.FIND, (entry.ts, entry.kind, entry.query)) is not None:
            return False
        self.append(entry)
        return True

    def newest(self, limit: int, kind: str | None = None) -> list[RecallEntry]:
        if kind is None:
            rows = self.all(self.NEWEST, (limit,))
        else:
            rows = self.all(self.NEWEST_OF_KIND, (kind, limit))
        return [recall_entry(r) for r in rows]

    def entries(self) -> Iterator[RecallEntry]:
        for row in self.streamed(self.ENTRIES):
            yield recall_entry(row)
