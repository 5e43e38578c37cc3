"""A SQLite transaction seen through the storage interfaces (`interfaces.StoreTx`)."""

from __future__ import annotations

import sqlite3

from ..rows.tx import Concepts, ConceptTx
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

SQLITE = Concepts[sqlite3.Connection](
    "sqlite", SqliteMemories, SqliteScopes, SqliteGraph, SqliteVectors, SqliteFullText,
    SqliteRecallLog, SqliteIdMarks, SqliteUpkeep, SqliteSnapshot, SqliteBrowse, SqliteAnchors,
    file_upkeep=SqliteUpkeep,
)  # fmt: skip

SqliteTx = ConceptTx[sqlite3.Connection]


def tx(conn: sqlite3.Connection) -> SqliteTx:
    return ConceptTx(conn, SQLITE)
