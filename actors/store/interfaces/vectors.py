"""Stored embeddings: the vectors of memories, entities and relations, window by window.

The interface every store backend implements (`sqlite.vectors`, `pg.vectors`): arguments and
results are msgspec Structs or plain values, never rows, cursors or SQL.
"""

from __future__ import annotations

from typing import Protocol


class Vectors(Protocol):
    """Stored embeddings, in one transaction of the store (`StoreTx.vectors`)."""
