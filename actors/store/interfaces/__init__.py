"""The storage interfaces: what the rest of memtrio may ask of the store, by concept.

A unit of work is a function of one `StoreTx` (a transaction of the store), run by
`writer.Store.write` (one write transaction on the StoreWriter) or `writer.Store.read`
(one read transaction on the read pool). Each concept is a `typing.Protocol` of its own
module here; each backend implements every one of them in its own dialect
(`sqlite.*` for SQLite, `pg.*` for PostgreSQL), and the backend is chosen once, where
the store is opened (`backends.load`: a `backend.Backend` with its capabilities). Nothing outside ``actors/store`` writes SQL,
holds a connection or asks which database it runs on.
"""

from __future__ import annotations

from typing import Protocol

from .anchors import Anchors
from .browse import Browse
from .fulltext import FullText
from .graph import Graph
from .marks import IdMarks
from .memories import Memories
from .recall_log import RecallLog
from .scopes import Scopes
from .snapshot import Snapshot
from .upkeep import Upkeep
from .vectors import Vectors

__all__ = [
    "StoreTx",
    "Anchors",
    "Browse",
    "FullText",
    "Graph",
    "IdMarks",
    "Memories",
    "RecallLog",
    "Scopes",
    "Snapshot",
    "Upkeep",
    "Vectors",
]


class StoreTx(Protocol):
    """One transaction of the store, read or write, seen through the storage interfaces."""

    @property
    def backend(self) -> str:
        """The backend's name, ``sqlite`` or ``postgresql`` (for messages and the trace;
        never to branch on: `backend.Backend.has` says what a backend can do)."""
        ...

    @property
    def memories(self) -> Memories: ...

    @property
    def scopes(self) -> Scopes: ...

    @property
    def graph(self) -> Graph: ...

    @property
    def vectors(self) -> Vectors: ...

    @property
    def fulltext(self) -> FullText: ...

    @property
    def recall_log(self) -> RecallLog: ...

    @property
    def marks(self) -> IdMarks: ...

    @property
    def upkeep(self) -> Upkeep: ...

    @property
    def snapshot(self) -> Snapshot: ...

    @property
    def browse(self) -> Browse: ...

    @property
    def anchors(self) -> Anchors: ...
