"""The knowledge graph: entities, the directed relations between them, their observations.

The interface every store backend implements (`sqlite.graph`, `pg.graph`): arguments and
results are msgspec Structs or plain values, never rows, cursors or SQL.
"""

from __future__ import annotations

from typing import Protocol


class Graph(Protocol):
    """The knowledge graph, in one transaction of the store (`StoreTx.graph`)."""
