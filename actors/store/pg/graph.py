"""`interfaces.graph.Graph` on PostgreSQL, in PostgreSQL's own dialect (`PgConnection.native`).

Id lists are one array parameter (``= ANY(%s)``), so nothing is split; a memory's type
compares without case through ``lower()`` (the ``memories_type`` expression index).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..interfaces.graph import (
    Link,
    NewEntity,
    NewObservation,
    RowKind,
    View,
)
from ..rows.graph import (
    LINK,
    GraphBase,
    link,
    mem,
    rel,
)
from .statements import PgRows

OBS = "lower(m.memory_type) = 'observation'"
GIN_INDEXES = ["entities_fts", "entities_name_trgm", "entities_kind_trgm", "memories_fts"]


class PgGraph(GraphBase, PgRows):
    MARK = "%s"
    OBS = OBS
    ENTITY_NAMED = "SELECT id, name, kind, canonical_name FROM entities WHERE name = %s"
    ENTITIES_CANONICAL = (
        "SELECT id, name, kind, canonical_name FROM entities WHERE canonical_name = %s"
        " ORDER BY id LIMIT %s"
    )
    KIND_IS = " AND e.kind = %s"
    ENTITY_PAGE = (
        "SELECT e.id, e.name, e.kind, e.canonical_name FROM entities e"
        " WHERE {ent}{kind} ORDER BY e.id LIMIT %s OFFSET %s"
    )
    ENTITIES_AFTER = (
        "SELECT e.id, e.name, e.kind, e.canonical_name FROM entities e"
        " WHERE e.id > %s AND {ent} ORDER BY e.id LIMIT %s"
    )
    RELATIONS_AFTER = "{link} WHERE r.id > %s AND {rel} ORDER BY r.id LIMIT %s"
    RELATIONS_OF = (
        "{named} WHERE (r.source_id = %s OR r.target_id = %s) AND {rel}"
        " ORDER BY r.source_id <> %s, r.id"
    )
    OUT_DEGREE = "SELECT count(*) FROM relations r WHERE r.source_id = %s AND {rel}"
    IN_DEGREE = "SELECT count(*) FROM relations r WHERE r.target_id = %s AND {rel}"
    PAGE = " LIMIT %s OFFSET %s"
    EDGES_NAMED = "{named} WHERE {col} = %s AND {rel} ORDER BY r.relation_type, r.id"
    RELATION = (
        "SELECT r.id, {rel} FROM relations r"
        " WHERE r.source_id = %s AND r.relation_type = %s AND r.target_id = %s"
    )
    RELATION_IDS_TOUCHING = (
        "SELECT r.id FROM relations r WHERE (r.source_id = %s OR r.target_id = %s) AND {rel}"
    )
    RELATION_METADATA = "SELECT metadata FROM relations WHERE id = %s"
    CREATE_ENTITY = (
        "INSERT INTO entities (name, canonical_name, kind, created_at, updated_at)"
        " VALUES (%s, %s, %s, %s, %s) RETURNING id"
    )
    ADD_OBSERVATION = (
        "INSERT INTO memories (content, memory_type, importance, created_at, updated_at)"
        " VALUES (%s, 'observation', 0.0, %s, %s) RETURNING id"
    )
    OBSERVATION_SCOPE = "INSERT INTO memory_scopes (memory_id, scope_id) VALUES (%s, %s)"
    OBSERVATION_ENTITY = "INSERT INTO memory_entities (memory_id, entity_id) VALUES (%s, %s)"
    SET_KIND = "UPDATE entities SET kind = %s, updated_at = %s WHERE id = %s"
    OBSERVATION_ELSEWHERE = (
        "SELECT 1 FROM memory_entities WHERE memory_id = %s AND entity_id <> %s LIMIT 1"
    )
    DELETE_MEMORY = "DELETE FROM memories WHERE id = %s"
    UNLINK_OBSERVATION = "DELETE FROM memory_entities WHERE memory_id = %s AND entity_id = %s"
    LINKED_MEMORIES = "SELECT memory_id FROM memory_entities WHERE entity_id = %s"
    DELETE_ENTITY = "DELETE FROM entities WHERE id = %s"
    CREATE_RELATION = (
        "INSERT INTO relations (source_id, target_id, relation_type, metadata, created_at)"
        " VALUES (%s, %s, %s, %s, %s) RETURNING id"
    )
    SET_RELATION_METADATA = "UPDATE relations SET metadata = %s WHERE id = %s"
    DELETE_RELATION = "DELETE FROM relations WHERE id = %s"
    ALL_EDGES_OF = (
        "SELECT id, source_id, relation_type, target_id FROM relations"
        " WHERE source_id = %s OR target_id = %s ORDER BY id"
    )
    REPOINT_RELATION = "UPDATE relations SET source_id = %s, target_id = %s WHERE id = %s"
    DROP_RELATION_VECTOR = "DELETE FROM vectors WHERE kind = 'relation' AND item_id = %s"

    # -- views and lookups ---------------------------------------------------------------

    # -- reads ---------------------------------------------------------------------------

    def relations_touching(
        self, entity_ids: Sequence[int], view: View, sources_only: bool
    ) -> list[Link]:
        ids = list(dict.fromkeys(entity_ids))
        if sources_only:
            sql = f"{LINK} WHERE r.source_id = ANY(%s) AND {rel(view)} ORDER BY r.id"
            params: list[object] = [ids]
        else:
            sql = (
                f"{LINK} WHERE (r.source_id = ANY(%s) OR r.target_id = ANY(%s)) "
                f"AND {rel(view)} ORDER BY r.id"
            )
            params = [ids, ids]
        return [link(r) for r in self.all(sql, params)]

    # -- writes ----------------------------------------------------------------------------

    def next_ids(self) -> tuple[int, int]:
        # The high-water marks (`id_marks`) are never below max(id) (store.pg.schema).
        marks = dict(
            self.all(
                "SELECT name, seq FROM id_marks WHERE name = ANY(%s)", [["entities", "memories"]]
            )
        )
        return int(marks["entities"]) + 1, int(marks["memories"]) + 1

    def insert_batch(
        self,
        entities: Sequence[NewEntity],
        observations: Sequence[NewObservation],
        ts: float,
        scope_id: int,
    ) -> None:
        # psycopg pipelines executemany: one round trip per statement.
        many = self.conn.native_many
        many(
            "INSERT INTO entities (id, name, canonical_name, kind, created_at, updated_at) "
            "VALUES (%s, %s, %s, %s, %s, %s)",
            [(e.id, e.name, e.canonical, e.kind, ts, ts) for e in entities],
        )
        many(
            "INSERT INTO entity_scopes (entity_id, scope_id) VALUES (%s, %s) ON CONFLICT DO NOTHING",
            [(e.id, scope_id) for e in entities],
        )
        many(
            "INSERT INTO memories (id, content, memory_type, importance, created_at, updated_at) "
            "VALUES (%s, %s, 'observation', 0.0, %s, %s)",
            [(o.id, o.content, ts, ts) for o in observations],
        )
        many(
            "INSERT INTO memory_scopes (memory_id, scope_id) VALUES (%s, %s)",
            [(o.id, scope_id) for o in observations],
        )
        many(
            "INSERT INTO memory_entities (memory_id, entity_id) VALUES (%s, %s)",
            [(o.id, o.entity_id) for o in observations],
        )

    def link(self, kind: RowKind, row_id: int, scope_ids: Sequence[int]) -> None:
        if kind == "entity":
            sql = "INSERT INTO entity_scopes (entity_id, scope_id) SELECT %s, unnest(%s::bigint[])"
        else:
            sql = (
                "INSERT INTO relation_scopes (relation_id, scope_id) "
                "SELECT %s, unnest(%s::bigint[])"
            )
        if scope_ids:
            self.conn.native(sql + " ON CONFLICT DO NOTHING", [row_id, list(scope_ids)])

    def touch(self, entity_ids: Sequence[int], ts: float) -> None:
        if entity_ids:
            self.conn.native(
                "UPDATE entities SET updated_at = %s WHERE id = ANY(%s)", [ts, list(entity_ids)]
            )

    def duplicate_observations(self, view: View) -> list[tuple[int, list[int]]]:
        rows = self.all(
            f"""SELECT me.entity_id, array_agg(m.id ORDER BY m.id) FROM memory_entities me
                JOIN memories m ON m.id = me.memory_id
                WHERE {OBS} AND {mem(view)} GROUP BY me.entity_id, m.content
                HAVING count(*) > 1"""
        )
        return [(int(eid), [int(i) for i in ids]) for eid, ids in rows]

    # -- merge -----------------------------------------------------------------------------

    def copy_scopes(self, from_entity: int, to_entity: int) -> None:
        self.conn.native(
            "INSERT INTO entity_scopes (entity_id, scope_id) "
            "SELECT %s, scope_id FROM entity_scopes WHERE entity_id = %s ON CONFLICT DO NOTHING",
            [to_entity, from_entity],
        )

    def move_memories(self, from_entity: int, to_entity: int) -> list[int]:
        links = self.linked_memories(from_entity)
        self.conn.native(
            "INSERT INTO memory_entities (memory_id, entity_id) "
            "SELECT memory_id, %s FROM memory_entities WHERE entity_id = %s ON CONFLICT DO NOTHING",
            [to_entity, from_entity],
        )
        self.conn.native("DELETE FROM memory_entities WHERE entity_id = %s", [from_entity])
        return links

    def fold_relation(self, relation_id: int, into: int) -> None:
        self.conn.native(
            "INSERT INTO memory_relations (memory_id, relation_id) "
            "SELECT memory_id, %s FROM memory_relations WHERE relation_id = %s "
            "ON CONFLICT DO NOTHING",
            [into, relation_id],
        )
        self.conn.native(
            "INSERT INTO relation_scopes (scope_id, relation_id) "
            "SELECT scope_id, %s FROM relation_scopes WHERE relation_id = %s "
            "ON CONFLICT DO NOTHING",
            [into, relation_id],
        )
        self.conn.native("DELETE FROM relations WHERE id = %s", [relation_id])
