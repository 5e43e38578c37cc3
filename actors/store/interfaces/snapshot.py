"""Bulk reads for the in-memory indexes (the ranker's graph, the vector index): every row of a kind, or those changed.

The interface every store backend implements (`sqlite.snapshot`, `pg.snapshot`): arguments and
results are msgspec Structs or plain values, never rows, cursors or SQL.
"""

from __future__ import annotations

from typing import Protocol


class Snapshot(Protocol):
    """Bulk reads for the in-memory indexes (the ranker's graph, the vector index), in one transaction of the store (`StoreTx.snapshot`)."""
