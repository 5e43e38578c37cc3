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

from .anchors import AnchorReads, Anchors
from .browse import Browse
from .fulltext import FullText, FullTextReads
from .graph import Graph, GraphEdges, GraphMerge, GraphWrites
from .marks import IdMarks
from .memories import Memories, MemoryReads
from .recall_log import RecallLog, RecallLogReads
from .scopes import ScopeReads, Scopes
from .snapshot import Snapshot
from .upkeep import Export, FileUpkeep, Health, Import, Upkeep
from .vectors import EmbeddingReads, Embeddings, VectorReads, Vectors

__all__ = [
    "ReadTx",
    "StoreTx",
    "Embeddings",
    "Export",
    "FileUpkeep",
    "GraphEdges",
    "GraphMerge",
    "GraphWrites",
    "Health",
    "Import",
    "AnchorReads",
    "Anchors",
    "Browse",
    "EmbeddingReads",
    "FullText",
    "FullTextReads",
    "Graph",
    "IdMarks",
    "Memories",
    "MemoryReads",
    "RecallLog",
    "RecallLogReads",
    "ScopeReads",
    "Scopes",
    "Snapshot",
    "Upkeep",
    "VectorReads",
    "Vectors",
]


class ReadTx(Protocol):
    """One read transaction of the store, seen through the storage interfaces that read
    (`writer.Store.read`, `direct.Direct.read`, `reader.Reader.read`): the interfaces
    that only write (`StoreTx`'s own) are not there, so the type checker refuses a write
    in a read op, as the read connections refuse it at run time (``query_only``, ``READ
    ONLY``). Where a concept both reads and writes, a read transaction sees its reads
    only (``MemoryReads``, ``ScopeReads``, ...) and `StoreTx` the whole of it."""

    @property
    def backend(self) -> str:
        """The backend's name, ``sqlite`` or ``postgresql`` (for messages and the trace;
        never to branch on: `backend.Backend.has` says what a backend can do)."""
        ...

    @property
    def memories(self) -> MemoryReads: ...

    @property
    def scopes(self) -> ScopeReads: ...

    @property
    def graph(self) -> Graph: ...

    @property
    def graph_edges(self) -> GraphEdges: ...

    @property
    def vectors(self) -> VectorReads: ...

    @property
    def embeddings(self) -> EmbeddingReads: ...

    @property
    def marks(self) -> IdMarks: ...

    @property
    def fulltext(self) -> FullTextReads: ...

    @property
    def recall_log(self) -> RecallLogReads: ...

    @property
    def upkeep(self) -> Upkeep: ...

    @property
    def export(self) -> Export: ...

    @property
    def snapshot(self) -> Snapshot: ...

    @property
    def browse(self) -> Browse: ...

    @property
    def anchors(self) -> AnchorReads: ...


class StoreTx(ReadTx, Protocol):
    """One write transaction of the store (`writer.Store.write`): a `ReadTx` and the
    interfaces that only write, and each concept whole (its writes beside its reads)."""

    @property
    def memories(self) -> Memories: ...

    @property
    def scopes(self) -> Scopes: ...

    @property
    def vectors(self) -> Vectors: ...

    @property
    def embeddings(self) -> Embeddings: ...

    @property
    def fulltext(self) -> FullText: ...

    @property
    def recall_log(self) -> RecallLog: ...

    @property
    def anchors(self) -> Anchors: ...

    @property
    def graph_writes(self) -> GraphWrites: ...

    @property
    def graph_merge(self) -> GraphMerge: ...

    @property
    def imports(self) -> Import: ...

    @property
    def health(self) -> Health: ...

    @property
    def file_upkeep(self) -> FileUpkeep | None:
        """The file's upkeep steps where the backend has `Capability.FILE_UPKEEP`, else None."""
        ...
