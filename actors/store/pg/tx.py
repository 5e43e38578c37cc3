"""A PostgreSQL transaction seen through the storage interfaces (`interfaces.StoreTx`)."""

from __future__ import annotations

from functools import cached_property

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
from .anchors import PgAnchors
from .browse import PgBrowse
from .conn import PgConnection
from .fulltext import PgFullText
from .graph import PgGraph
from .marks import PgIdMarks
from .memories import PgMemories
from .recall_log import PgRecallLog
from .scopes import PgScopes
from .snapshot import PgSnapshot
from .upkeep import PgUpkeep
from .vectors import PgVectors


class PgTx:
    """The concepts of one transaction on ``conn`` (the writer's, or a pool connection's)."""

    backend = "postgresql"

    def __init__(self, conn: PgConnection) -> None:
        self.conn = conn

    @cached_property
    def memories(self) -> Memories:
        return PgMemories(self.conn)

    @cached_property
    def scopes(self) -> Scopes:
        return PgScopes(self.conn)

    @cached_property
    def graph(self) -> Graph:
        return PgGraph(self.conn)

    @cached_property
    def vectors(self) -> Vectors:
        return PgVectors(self.conn)

    @cached_property
    def fulltext(self) -> FullText:
        return PgFullText(self.conn)

    @cached_property
    def recall_log(self) -> RecallLog:
        return PgRecallLog(self.conn)

    @cached_property
    def marks(self) -> IdMarks:
        return PgIdMarks(self.conn)

    @cached_property
    def upkeep(self) -> Upkeep:
        return PgUpkeep(self.conn)

    @cached_property
    def snapshot(self) -> Snapshot:
        return PgSnapshot(self.conn)

    @cached_property
    def browse(self) -> Browse:
        return PgBrowse(self.conn)

    @cached_property
    def anchors(self) -> Anchors:
        return PgAnchors(self.conn)


def tx(conn: PgConnection) -> PgTx:
    return PgTx(conn)
