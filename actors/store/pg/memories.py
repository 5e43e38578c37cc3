"""`interfaces.memories.Memories` on PostgreSQL, in PostgreSQL's own dialect (`PgConnection.native`)."""

from __future__ import annotations

from collections.abc import Sequence

from ..interfaces.memories import (
    LinkedEntity,
    LinkedRelation,
    MemoryEdit,
    MemoryRow,
    StoreCounts,
)
from ..rows.memories import COLUMNS, linked_entity, linked_relation, memory_row
from .conn import PgConnection

# A memory (``m``) in one of the scope ids ``%(scopes)s``, or unscoped.
VISIBLE = """(EXISTS (SELECT 1 FROM memory_scopes ms
                     WHERE ms.memory_id = m.id AND ms.scope_id = ANY(%(scopes)s::bigint[]))
             OR NOT EXISTS (SELECT 1 FROM memory_scopes ms WHERE ms.memory_id = m.id))"""


def _seen(table: str, col: str, alias: str) -> str:
    """A row (``alias``) linked to one of the scope ids ``%(scopes)s`` through ``table``, or
    to none."""
    return (
        f"(EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id"
        " AND x.scope_id = ANY(%(scopes)s::bigint[]))"
        f" OR NOT EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id))"
    )


_SEEN = {
    "memory": f"SELECT m.id FROM memories m WHERE {_seen('memory_scopes', 'memory_id', 'm')}",
    "entity": f"SELECT e.id FROM entities e WHERE {_seen('entity_scopes', 'entity_id', 'e')}",
    "relation": f"SELECT r.id FROM relations r WHERE {_seen('relation_scopes', 'relation_id', 'r')}",
}
VISIBLE_COUNTS = f"""SELECT
    (SELECT count(*) FROM ({_SEEN["memory"]}) q),
    (SELECT count(*) FROM scopes WHERE id = ANY(%(scopes)s::bigint[])),
    (SELECT count(*) FROM ({_SEEN["entity"]}) q),
    (SELECT count(*) FROM ({_SEEN["relation"]}) q),
    (SELECT count(*) FROM vectors v WHERE
        (v.kind = 'memory' AND v.item_id IN ({_SEEN["memory"]}))
        OR (v.kind = 'entity' AND v.item_id IN ({_SEEN["entity"]}))
        OR (v.kind = 'relation' AND v.item_id IN ({_SEEN["relation"]}))),
    (SELECT count(*) FROM memory_anchors a WHERE a.memory_id IN ({_SEEN["memory"]}))"""
COUNTS = """SELECT (SELECT count(*) FROM memories), (SELECT count(*) FROM scopes),
    (SELECT count(*) FROM entities), (SELECT count(*) FROM relations),
    (SELECT count(*) FROM vectors), (SELECT count(*) FROM recall_log),
    (SELECT count(*) FROM memory_anchors)"""


class PgMemories:
    def __init__(self, conn: PgConnection) -> None:
        self.conn = conn

    def insert(
        self, content: str, memory_type: str, importance: float, ts: float, scopes: Sequence[int]
    ) -> int:
        row = self.conn.native(
            "INSERT INTO memories (content, memory_type, importance, created_at, updated_at)"
            " VALUES (%s, %s, %s, %s, %s) RETURNING id",
            (content, memory_type, importance, ts, ts),
        ).fetchone()
        assert row is not None
        memory_id = int(row[0])
        if scopes:
            self.conn.native(
                "INSERT INTO memory_scopes (memory_id, scope_id)"
                " SELECT %s, s FROM unnest(%s::bigint[]) s ON CONFLICT DO NOTHING",
                (memory_id, list(scopes)),
            )
        return memory_id

    def link_entity(self, memory_id: int, entity_id: int) -> str:
        self.conn.native(
            "INSERT INTO memory_entities (memory_id, entity_id) VALUES (%s, %s)"
            " ON CONFLICT DO NOTHING",
            (memory_id, entity_id),
        )
        row = self.conn.native("SELECT name FROM entities WHERE id = %s", (entity_id,)).fetchone()
        assert row is not None
        return str(row[0])

    def link_relation(self, memory_id: int, relation_id: int) -> None:
        self.conn.native(
            "INSERT INTO memory_relations (memory_id, relation_id) VALUES (%s, %s)"
            " ON CONFLICT DO NOTHING",
            (memory_id, relation_id),
        )

    def get(self, memory_id: int) -> MemoryRow | None:
        row = self.conn.native(
            f"SELECT {COLUMNS} FROM memories m WHERE m.id = %s", (memory_id,)
        ).fetchone()
        return None if row is None else memory_row(row)

    def entities_of(self, memory_id: int) -> list[LinkedEntity]:
        rows = self.conn.native(
            "SELECT e.id, e.name, e.kind FROM memory_entities me"
            " JOIN entities e ON e.id = me.entity_id WHERE me.memory_id = %s"
            ' ORDER BY e.name COLLATE "C"',
            (memory_id,),
        ).fetchall()
        return [linked_entity(r) for r in rows]

    def relations_of(self, memory_id: int) -> list[LinkedRelation]:
        rows = self.conn.native(
            """SELECT r.id, s.name, r.relation_type, t.name FROM memory_relations mr
               JOIN relations r ON r.id = mr.relation_id
               JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id
               WHERE mr.memory_id = %s ORDER BY r.id""",
            (memory_id,),
        ).fetchall()
        return [linked_relation(r) for r in rows]

    def update(self, memory_id: int, edit: MemoryEdit, ts: float) -> None:
        self.conn.native(
            """UPDATE memories SET content = coalesce(%s, content),
                   memory_type = coalesce(%s, memory_type),
                   importance = coalesce(%s::double precision, importance), updated_at = %s
               WHERE id = %s""",
            (edit.content, edit.memory_type, edit.importance, ts, memory_id),
        )

    def delete(self, memory_id: int) -> bool:
        cur = self.conn.native("DELETE FROM memories WHERE id = %s", (memory_id,))
        return cur.rowcount > 0

    def page(
        self, scopes: Sequence[int], memory_type: str | None, limit: int, offset: int
    ) -> list[MemoryRow]:
        type_sql = "AND lower(m.memory_type) = lower(%(type)s)" if memory_type is not None else ""
        rows = self.conn.native(
            f"SELECT {COLUMNS} FROM memories m WHERE {VISIBLE} {type_sql}"
            " ORDER BY m.id DESC LIMIT %(limit)s OFFSET %(offset)s",
            {"scopes": list(scopes), "type": memory_type, "limit": limit, "offset": offset},
        ).fetchall()
        return [memory_row(r) for r in rows]

    def counts(self) -> StoreCounts:
        row = self.conn.native(COUNTS).fetchone()
        assert row is not None
        return StoreCounts(*(int(v) for v in row))

    def visible_counts(self, scopes: Sequence[int]) -> StoreCounts:
        row = self.conn.native(VISIBLE_COUNTS, {"scopes": list(scopes)}).fetchone()
        assert row is not None
        memories, scope_count, entities, edges, vectors, anchors = (int(v) for v in row)
        return StoreCounts(
            memories, scope_count, entities, edges, vectors, recall_log=0, anchors=anchors
        )
