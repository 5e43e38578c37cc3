"""The recall log's rows, the same on both backends."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..interfaces.recall_log import RecallEntry

# The columns of a `RecallEntry`, in the order of `recall_entry` and `values`.
COLUMNS = "ts, kind, query, scopes, ids, scores"


def recall_entry(row: Sequence[Any]) -> RecallEntry:
    """A row of `COLUMNS` as a `RecallEntry`."""
    ts, kind, query, scopes, ids, scores = row
    return RecallEntry(ts=ts, kind=kind, query=query, scopes=scopes, ids=ids, scores=scores)


def values(e: RecallEntry) -> tuple[float, str, str, str, str, str]:
    """The values of `COLUMNS` for an insert of ``e``."""
    return (e.ts, e.kind, e.query, e.scopes, e.ids, e.scores)
