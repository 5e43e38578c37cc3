"""Full-text search: the text index of memories, entities and observations, and its queries.

The interface every store backend implements (`sqlite.fulltext`, `pg.fulltext`): arguments and
results are msgspec Structs or plain values, never rows, cursors or SQL.
"""

from __future__ import annotations

from typing import Protocol


class FullText(Protocol):
    """Full-text search, in one transaction of the store (`StoreTx.fulltext`)."""
