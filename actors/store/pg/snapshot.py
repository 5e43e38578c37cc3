"""`interfaces.snapshot.Snapshot` on PostgreSQL, in PostgreSQL's own dialect (`PgConnection.native`).

Id lists travel as one array parameter each (``= ANY(%s)``), whatever their length.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..interfaces.snapshot import (
    Kind,
)
from ..rows.snapshot import SnapshotBase
from .statements import PgRows

# Every stored vector of one kind and model: chunk 0 (``vectors``), then the other
# windows of long texts (``vector_chunks``), counted only under a chunk 0 of the same
# model. Parameters: (kind, model, revision, dim) twice.
_VECTORS = """
    SELECT item_id, vec FROM vectors WHERE kind = %s AND model = %s AND revision = %s AND dim = %s
    UNION ALL
    SELECT c.item_id, c.vec FROM vector_chunks c
    JOIN vectors v ON v.kind = c.kind AND v.item_id = c.item_id
        AND v.model = c.model AND v.revision = c.revision
    WHERE c.kind = %s AND c.model = %s AND c.revision = %s AND c.dim = %s"""
# (kind, peer) -> (frontier id, peer id) of the first ``limit`` peers of each frontier id,
# by id: (ids, limit). Every lookup is by an index: memory_entities / memory_relations by
# their primary key (memory first) or their reverse index, relations by their
# (source_id, ...) unique key and by target_id.
_PEERS: dict[tuple[str, str], str] = {
    ("memory", "entity"): """SELECT f.id, p.entity_id FROM unnest(%s::bigint[]) AS f(id)
        CROSS JOIN LATERAL (SELECT entity_id FROM memory_entities WHERE memory_id = f.id
        ORDER BY entity_id LIMIT %s) p""",
    ("memory", "relation"): """SELECT f.id, p.relation_id FROM unnest(%s::bigint[]) AS f(id)
        CROSS JOIN LATERAL (SELECT relation_id FROM memory_relations WHERE memory_id = f.id
        ORDER BY relation_id LIMIT %s) p""",
    ("entity", "memory"): """SELECT f.id, p.memory_id FROM unnest(%s::bigint[]) AS f(id)
        CROSS JOIN LATERAL (SELECT memory_id FROM memory_entities WHERE entity_id = f.id
        ORDER BY memory_id LIMIT %s) p""",
    ("entity", "relation"): """SELECT f.id, p.id FROM unnest(%s::bigint[]) AS f(id)
        CROSS JOIN LATERAL ((SELECT id FROM relations WHERE source_id = f.id)
        UNION (SELECT id FROM relations WHERE target_id = f.id) ORDER BY id LIMIT %s) p""",
    ("relation", "memory"): """SELECT f.id, p.memory_id FROM unnest(%s::bigint[]) AS f(id)
        CROSS JOIN LATERAL (SELECT memory_id FROM memory_relations WHERE relation_id = f.id
        ORDER BY memory_id LIMIT %s) p""",
}
# The memories nearest a query vector by pgvector's HNSW indexes (cosine), every window
# of a memory counted (its best):
# (query, model, revision, query, n, query, model, revision, query, n).
_NEAREST = """SELECT item_id, max(cosine) AS best FROM (
    (SELECT item_id, 1 - (embedding::vector(384) <=> %s::real[]::vector(384)) AS cosine
       FROM vectors WHERE kind = 'memory' AND dim = 384 AND embedding IS NOT NULL
        AND model = %s AND revision = %s
      ORDER BY embedding::vector(384) <=> %s::real[]::vector(384) LIMIT %s)
    UNION ALL
    (SELECT item_id, 1 - (embedding::vector(384) <=> %s::real[]::vector(384)) AS cosine
       FROM vector_chunks WHERE kind = 'memory' AND dim = 384 AND embedding IS NOT NULL
        AND model = %s AND revision = %s
      ORDER BY embedding::vector(384) <=> %s::real[]::vector(384) LIMIT %s)
) near GROUP BY item_id ORDER BY best DESC"""
INDEXED_DIM = 384  # the dimension of the HNSW expression indexes (pg.schema)
MIN_EF_SEARCH = 40  # pgvector's default hnsw.ef_search


class PgSnapshot(SnapshotBase, PgRows):
    SCOPE_IDS = "SELECT id, name FROM scopes"
    MEMORIES = "SELECT id, memory_type, created_at, {content} FROM memories"
    CONTENT = "content"
    MEMORY_TEXTS = "SELECT id, content FROM memories{where}"
    HAS_YEAR = "content ~ '[0-9]{4}'"
    ENTITIES = "SELECT id, canonical_name FROM entities"
    VECTORS = _VECTORS
    WINDOWS = """SELECT item_id, vec FROM vectors WHERE kind = %s AND model = %s
        AND revision = %s AND dim = %s AND item_id {ids}"""
    LATER_WINDOWS = """SELECT item_id, vec FROM vector_chunks WHERE kind = %s AND model = %s
        AND revision = %s AND dim = %s AND item_id {ids} ORDER BY item_id, chunk"""
    TEXT_ENDS = (
        "SELECT id, length(content), substr(rtrim(content), length(rtrim(content)) - 2),"
        " substr(content, 1, %s) FROM memories WHERE id {ids}"
    )

    def keeps_graph(self) -> bool:
        return False

    def _links(
        self, table: str, a: str, b: str, first: list[int] | None, second: list[int] | None
    ) -> Iterator[tuple[int, int]]:
        sql = f"SELECT {a}, {b} FROM {table}"
        if first is None and second is None:
            yield from self.conn.native(sql)
        elif second is None:
            if first:
                yield from self.conn.native(f"{sql} WHERE {a} = ANY(%s::bigint[])", (first,))
        elif first is None:
            if second:
                yield from self.conn.native(f"{sql} WHERE {b} = ANY(%s::bigint[])", (second,))
        elif first and second:
            yield from self.conn.native(
                f"{sql} WHERE {a} = ANY(%s::bigint[]) AND {b} = ANY(%s::bigint[])",
                (first, second),
            )

    def memory_entities(
        self, memories: list[int] | None = None, entities: list[int] | None = None
    ) -> Iterator[tuple[int, int]]:
        return self._links("memory_entities", "memory_id", "entity_id", memories, entities)

    def memory_relations(
        self, memories: list[int] | None = None, relations: list[int] | None = None
    ) -> Iterator[tuple[int, int]]:
        return self._links("memory_relations", "memory_id", "relation_id", memories, relations)

    def peers(self, kind: Kind, ids: list[int], peer: Kind, limit: int) -> list[tuple[int, int]]:
        if not ids:
            return []
        rows = self.conn.native(_PEERS[(kind, peer)], (ids, limit)).fetchall()
        return [(int(a), int(b)) for a, b in rows]

    def nearest_memories(
        self, query: list[float], model: str, revision: str, n: int
    ) -> list[tuple[int, float]] | None:
        if len(query) != INDEXED_DIM:
            return None
        self.conn.native(
            "SELECT set_config('hnsw.ef_search', %s, false)", (str(max(n, MIN_EF_SEARCH)),)
        )
        rows = self.conn.native(
            _NEAREST, (query, model, revision, query, n, query, model, revision, query, n)
        ).fetchall()
        return [(int(i), float(c)) for i, c in rows]
