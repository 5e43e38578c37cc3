"""A PostgreSQL transaction seen through the storage interfaces (`interfaces.StoreTx`)."""

from __future__ import annotations

from ..rows.tx import Concepts, ConceptTx
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

POSTGRESQL = Concepts[PgConnection](
    "postgresql", PgMemories, PgScopes, PgGraph, PgVectors, PgFullText,
    PgRecallLog, PgIdMarks, PgUpkeep, PgSnapshot, PgBrowse, PgAnchors,
)  # fmt: skip

PgTx = ConceptTx[PgConnection]


def tx(conn: PgConnection) -> PgTx:
    return ConceptTx(conn, POSTGRESQL)
