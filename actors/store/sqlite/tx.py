"""A SQLite transaction seen through the storage interfaces (`interfaces.StoreTx`)."""

from __future__ import annotations

import sqlite3
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
from .anchors import SqliteAnchors
from .browse import SqliteBrowse
from .fulltext import SqliteFullText
from .graph import SqliteGraph
from .marks import SqliteIdMarks
from .memories import SqliteMemories
from .recall_log import SqliteRecallLog
from .scopes import SqliteScopes
from .snapshot import SqliteSnapshot
from .upkeep import SqliteUpkeep
from .vectors import SqliteVectors


class SqliteTx:
    """The concepts of one transaction on ``conn`` (the writer's, or a pool connection's)."""

    backend = "sqlite"

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    @cached_property
    def memories(self) -> Memories:
        return SqliteMemories(self.conn)

    @cached_property
    def scopes(self) -> Scopes:
        return SqliteScopes(self.conn)

    @cached_property
    def graph(self) -> Graph:
        return SqliteGraph(self.conn)

    @cached_property
    def vectors(self) -> Vectors:
        return SqliteVectors(self.conn)

    @cached_property
    def fulltext(self) -> FullText:
        return SqliteFullText(self.conn)

    @cached_property
    def recall_log(self) -> RecallLog:
        return SqliteRecallLog(self.conn)

    @cached_property
    def marks(self) -> IdMarks:
        return SqliteIdMarks(self.conn)

    @cached_property
    def upkeep(self) -> Upkeep:
        return SqliteUpkeep(self.conn)

    @cached_property
    def snapshot(self) -> Snapshot:
        return SqliteSnapshot(self.conn)

    @cached_property
    def browse(self) -> Browse:
        return SqliteBrowse(self.conn)

    @cached_property
    def anchors(self) -> Anchors:
        return SqliteAnchors(self.conn)


def tx(conn: sqlite3.Connection) -> SqliteTx:
    return SqliteTx(conn)
