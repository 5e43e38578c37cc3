"""One transaction of either backend, seen through the storage interfaces (`StoreTx`).

A backend names its implementation of each concept once (`Concepts`); `ConceptTx` builds
each on first use, on the transaction's connection.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Generic, Protocol, TypeVar

from ..interfaces import (
    Anchors,
    Browse,
    Embeddings,
    Export,
    FileUpkeep,
    FullText,
    Graph,
    GraphEdges,
    GraphMerge,
    GraphWrites,
    Health,
    IdMarks,
    Import,
    Memories,
    RecallLog,
    Scopes,
    Snapshot,
    Upkeep,
    Vectors,
)

C = TypeVar("C")


class WholeGraph(Graph, GraphEdges, GraphWrites, GraphMerge, Protocol):
    """What a backend's one graph class implements: every graph interface."""


class WholeVectors(Vectors, Embeddings, Protocol):
    """What a backend's one vectors class implements: both vector interfaces."""


class WholeStore(Upkeep, Health, Export, Import, Protocol):
    """What a backend's one upkeep class implements: every whole-store interface."""


@dataclass(frozen=True)
class Concepts(Generic[C]):
    """A backend's implementation of each concept, made from its connection ``C``."""

    backend: str  # ``sqlite`` or ``postgresql``
    memories: Callable[[C], Memories]
    scopes: Callable[[C], Scopes]
    graph: Callable[[C], WholeGraph]
    vectors: Callable[[C], WholeVectors]
    fulltext: Callable[[C], FullText]
    recall_log: Callable[[C], RecallLog]
    marks: Callable[[C], IdMarks]
    upkeep: Callable[[C], WholeStore]
    snapshot: Callable[[C], Snapshot]
    browse: Callable[[C], Browse]
    anchors: Callable[[C], Anchors]
    file_upkeep: Callable[[C], FileUpkeep] | None = None  # `Capability.FILE_UPKEEP`


class ConceptTx(Generic[C]):
    """The concepts of one transaction on ``conn`` (the writer's, or a pool connection's)."""

    def __init__(self, conn: C, concepts: Concepts[C]) -> None:
        self.conn = conn
        self._concepts = concepts

    @property
    def backend(self) -> str:
        return self._concepts.backend

    @cached_property
    def memories(self) -> Memories:
        return self._concepts.memories(self.conn)

    @cached_property
    def scopes(self) -> Scopes:
        return self._concepts.scopes(self.conn)

    @cached_property
    def _graph(self) -> WholeGraph:
        return self._concepts.graph(self.conn)

    @property
    def graph(self) -> Graph:
        return self._graph

    @property
    def graph_edges(self) -> GraphEdges:
        return self._graph

    @property
    def graph_writes(self) -> GraphWrites:
        return self._graph

    @property
    def graph_merge(self) -> GraphMerge:
        return self._graph

    @cached_property
    def _vectors(self) -> WholeVectors:
        return self._concepts.vectors(self.conn)

    @property
    def vectors(self) -> Vectors:
        return self._vectors

    @property
    def embeddings(self) -> Embeddings:
        return self._vectors

    @cached_property
    def fulltext(self) -> FullText:
        return self._concepts.fulltext(self.conn)

    @cached_property
    def recall_log(self) -> RecallLog:
        return self._concepts.recall_log(self.conn)

    @cached_property
    def marks(self) -> IdMarks:
        return self._concepts.marks(self.conn)

    @cached_property
    def _whole(self) -> WholeStore:
        return self._concepts.upkeep(self.conn)

    @property
    def upkeep(self) -> Upkeep:
        return self._whole

    @property
    def health(self) -> Health:
        return self._whole

    @property
    def export(self) -> Export:
        return self._whole

    @property
    def imports(self) -> Import:
        return self._whole

    @cached_property
    def file_upkeep(self) -> FileUpkeep | None:
        make = self._concepts.file_upkeep
        return make(self.conn) if make is not None else None

    @cached_property
    def snapshot(self) -> Snapshot:
        return self._concepts.snapshot(self.conn)

    @cached_property
    def browse(self) -> Browse:
        return self._concepts.browse(self.conn)

    @cached_property
    def anchors(self) -> Anchors:
        return self._concepts.anchors(self.conn)
