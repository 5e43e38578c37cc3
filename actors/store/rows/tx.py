"""One transaction of either backend, seen through the storage interfaces (`StoreTx`).

A backend names its implementation of each concept once (`Concepts`); `ConceptTx` builds
each on first use, on the transaction's connection.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Generic, TypeVar

from ..interfaces import (
    Anchors,
    Browse,
    FullText,
    Graph,
    IdMarks,
    Memories,
    RecallLog,
    Scopes,
    Snapshot,
    Upkeep,
    Vectors,
)

C = TypeVar("C")


@dataclass(frozen=True)
class Concepts(Generic[C]):
    """A backend's implementation of each concept, made from its connection ``C``."""

    backend: str  # ``sqlite`` or ``postgresql``
    memories: Callable[[C], Memories]
    scopes: Callable[[C], Scopes]
    graph: Callable[[C], Graph]
    vectors: Callable[[C], Vectors]
    fulltext: Callable[[C], FullText]
    recall_log: Callable[[C], RecallLog]
    marks: Callable[[C], IdMarks]
    upkeep: Callable[[C], Upkeep]
    snapshot: Callable[[C], Snapshot]
    browse: Callable[[C], Browse]
    anchors: Callable[[C], Anchors]


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
    def graph(self) -> Graph:
        return self._concepts.graph(self.conn)

    @cached_property
    def vectors(self) -> Vectors:
        return self._concepts.vectors(self.conn)

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
    def upkeep(self) -> Upkeep:
        return self._concepts.upkeep(self.conn)

    @cached_property
    def snapshot(self) -> Snapshot:
        return self._concepts.snapshot(self.conn)

    @cached_property
    def browse(self) -> Browse:
        return self._concepts.browse(self.conn)

    @cached_property
    def anchors(self) -> Anchors:
        return self._concepts.anchors(self.conn)
