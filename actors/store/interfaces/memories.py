"""Memories: insert (with their scopes, entities, relations), read, update, delete, list, count.

The interface every store backend implements (`sqlite.memories`, `pg.memories`): arguments and
results are msgspec Structs or plain values, never rows, cursors or SQL.
"""

from __future__ import annotations

from typing import Protocol


class Memories(Protocol):
    """Memories, in one transaction of the store (`StoreTx.memories`)."""
