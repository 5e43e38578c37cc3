"""`interfaces.snapshot.Snapshot` on SQLite, in SQLite's dialect."""

from __future__ import annotations

from collections.abc import Iterator

from ..interfaces.snapshot import (
    Kind,
)
from ..rows.snapshot import SnapshotBase
from . import params as sql_params
from .statements import SqliteRows

BATCH = 500  # ids per IN (...) list (well under SQLite's parameter limit)

# Every stored vector of one kind and model: chunk 0 (``vectors``), then the other
# windows of long texts (``vector_chunks``), counted only under a chunk 0 of the same
# model. Parameters: (kind, model, revision, dim) twice. ``vec`` as bytes whatever the
# row holds (a TEXT, even one that is not UTF-8, would fail the read or the join).
_VECTORS = """
    SELECT item_id, CAST(vec AS BLOB) FROM vectors
    WHERE kind = ? AND model = ? AND revision = ? AND dim = ?
    UNION ALL
    SELECT c.item_id, CAST(c.vec AS BLOB) FROM vector_chunks c
    JOIN vectors v ON v.kind = c.kind AND v.item_id = c.item_id
        AND v.model = c.model AND v.revision = c.revision
    WHERE c.kind = ? AND c.model = ? AND c.revision = ? AND c.dim = ?"""
# A 4-digit number somewhere in the text (ASCII digits, as PostgreSQL's ``~ '[0-9]{4}'``).
_HAS_YEAR = "content GLOB '*[0-9][0-9][0-9][0-9]*'"
# (kind, peer) -> the links of the frontier ``f`` to its peers ``p``, from the first
# ``limit`` peers of each by id; ``{marks}`` is the frontier's ids.
_PEERS: dict[tuple[str, str], str] = {
    ("memory", "entity"): "SELECT memory_id AS f, entity_id AS p FROM memory_entities"
    " WHERE memory_id IN ({marks})",
    ("memory", "relation"): "SELECT memory_id AS f, relation_id AS p FROM memory_relations"
    " WHERE memory_id IN ({marks})",
    ("entity", "memory"): "SELECT entity_id AS f, memory_id AS p FROM memory_entities"
    " WHERE entity_id IN ({marks})",
    ("entity", "relation"): "SELECT source_id AS f, id AS p FROM relations"
    " WHERE source_id IN ({marks})"
    " UNION SELECT target_id AS f, id AS p FROM relations WHERE target_id IN ({marks})",
    ("relation", "memory"): "SELECT relation_id AS f, memory_id AS p FROM memory_relations"
    " WHERE relation_id IN ({marks})",
}


def _batches(ids: list[int]) -> Iterator[tuple[list[int], str]]:
    """``ids`` in lists of at most `BATCH`, each with its ``?,?,...`` marks."""
    for part in sql_params.chunks(ids, BATCH):
        yield part, sql_params.marks(len(part))


class SqliteSnapshot(SnapshotBase, SqliteRows):
    SCOPE_IDS = "SELECT id, CAST(name AS BLOB) FROM scopes"
    MEMORIES = "SELECT id, CAST(memory_type AS BLOB), created_at, {content} FROM memories"
    CONTENT = "CAST(content AS BLOB)"
    MEMORY_TEXTS = "SELECT id, CAST(content AS BLOB) FROM memories{where}"
    HAS_YEAR = _HAS_YEAR
    ENTITIES = "SELECT id, CAST(canonical_name AS BLOB) FROM entities"
    VECTORS = _VECTORS
    WINDOWS = """SELECT item_id, CAST(vec AS BLOB) FROM vectors
        WHERE kind = ? AND model = ? AND revision = ? AND dim = ? AND item_id {ids}"""
    LATER_WINDOWS = """SELECT c.item_id, CAST(c.vec AS BLOB) FROM vector_chunks c
        WHERE c.kind = ? AND c.model = ? AND c.revision = ? AND c.dim = ? AND c.item_id {ids}
        ORDER BY c.item_id, c.chunk"""
    TEXT_ENDS = (
        "SELECT id, length(content),"
        " CAST(substr(rtrim(content), length(rtrim(content)) - 2) AS BLOB),"
        " CAST(substr(content, 1, ?) AS BLOB) FROM memories WHERE id {ids}"
    )

    def keeps_graph(self) -> bool:
        return True

    def _links(
        self, table: str, a: str, b: str, first: list[int] | None, second: list[int] | None
    ) -> Iterator[tuple[int, int]]:
        sql = f"SELECT {a}, {b} FROM {table}"
        if first is None and second is None:
            yield from self.conn.execute(sql)
        elif second is None:
            assert first is not None
            for part, marks in _batches(first):
                yield from self.conn.execute(f"{sql} WHERE {a} IN ({marks})", part)
        elif first is None:
            for part, marks in _batches(second):
                yield from self.conn.execute(f"{sql} WHERE {b} IN ({marks})", part)
        elif first and second:
            # Both lists: the links of the first (memories: a few each, by the primary
            # key) in batches, kept when their other end is in the second.
            others = set(second)
            for part, marks in _batches(first):
                for row in self.conn.execute(f"{sql} WHERE {a} IN ({marks})", part):
                    if row[1] in others:
                        yield row

    def memory_entities(
        self, memories: list[int] | None = None, entities: list[int] | None = None
    ) -> Iterator[tuple[int, int]]:
        return self._links("memory_entities", "memory_id", "entity_id", memories, entities)

    def memory_relations(
        self, memories: list[int] | None = None, relations: list[int] | None = None
    ) -> Iterator[tuple[int, int]]:
        return self._links("memory_relations", "memory_id", "relation_id", memories, relations)

    def peers(self, kind: Kind, ids: list[int], peer: Kind, limit: int) -> list[tuple[int, int]]:
        links = _PEERS[(kind, peer)]
        out: list[tuple[int, int]] = []
        for part, marks in _batches(ids):
            inner = links.format(marks=marks)
            params = part * inner.count("IN (")
            out += self.conn.execute(
                f"""SELECT f, p FROM (SELECT f, p,
                        row_number() OVER (PARTITION BY f ORDER BY p) AS n FROM ({inner}))
                    WHERE n <= ?""",
                [*params, limit],
            ).fetchall()
        return out

    def nearest_memories(
        self, query: list[float], model: str, revision: str, n: int
    ) -> list[tuple[int, float]] | None:
        return None  # no vector index in a SQLite store: the reader's own answers
