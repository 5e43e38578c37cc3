"""`interfaces.graph.Graph` on PostgreSQL, in PostgreSQL's own dialect (`PgConnection.native`).

Id lists are one array parameter (``= ANY(%s)``), so nothing is split; a memory's type
compares without case through ``lower()`` (the ``memories_type`` expression index).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..interfaces.graph import (
    Counts,
    Edge,
    Entity,
    Found,
    Link,
    NamedRelation,
    NewEntity,
    NewObservation,
    Observation,
    RowKind,
    View,
)
from ..rows.graph import (
    edge,
    entity,
    found,
    link,
    named,
    observation,
    relation_filter,
    seen_entity,
)
from .conn import PgConnection

OBS = "lower(m.memory_type) = 'observation'"
LINK = """SELECT r.id, s.name, r.relation_type, t.name
    FROM relations r JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id"""
NAMED = """SELECT r.id, r.source_id, s.name, s.kind, r.relation_type, r.target_id, t.name, t.kind
    FROM relations r JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id"""
GIN_INDEXES = ["entities_fts", "entities_name_trgm", "entities_kind_trgm", "memories_fts"]


def _vis(view: View, table: str, col: str, alias: str) -> str:
    """The condition that ``alias``'s row is visible in ``view`` (ids are ints: no parameter)."""
    if view.sees_all:
        return "true"
    inner = ",".join(str(int(i)) for i in view.read_ids) or "NULL"
    return (
        f"(EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id AND x.scope_id IN ({inner}))"
        f" OR NOT EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id))"
    )


def _ent(view: View, alias: str = "e") -> str:
    return _vis(view, "entity_scopes", "entity_id", alias)


def _rel(view: View, alias: str = "r") -> str:
    return _vis(view, "relation_scopes", "relation_id", alias)


def _mem(view: View, alias: str = "m") -> str:
    return _vis(view, "memory_scopes", "memory_id", alias)


class PgGraph:
    def __init__(self, conn: PgConnection) -> None:
        self.conn = conn

    def _rows(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        return self.conn.native(sql, params).fetchall()

    def _one(self, sql: str, params: Sequence[object] = ()) -> int:
        row = self.conn.native(sql, params).fetchone()
        assert row is not None
        return int(row[0])

    # -- views and lookups ---------------------------------------------------------------

    def view(self, read: Sequence[str], write: Sequence[str]) -> View:
        names = list(dict.fromkeys([*read, *write]))
        ids = {
            name: int(sid)
            for name, sid in self._rows("SELECT name, id FROM scopes WHERE name = ANY(%s)", [names])
        }
        read_ids = tuple(sorted({ids[s] for s in read if s in ids}))
        write_ids = tuple(sorted({ids[s] for s in write if s in ids}))
        total = self._one("SELECT count(*) FROM scopes")
        return View(read_ids, write_ids, len(read_ids) == total)

    def entity_named(self, name: str) -> Entity | None:
        rows = self._rows(
            "SELECT id, name, kind, canonical_name FROM entities WHERE name = %s", [name]
        )
        return entity(rows[0]) if rows else None

    def entities_canonical(self, canonical: str, limit: int) -> list[Entity]:
        return [
            entity(row)
            for row in self._rows(
                "SELECT id, name, kind, canonical_name FROM entities WHERE canonical_name = %s "
                "ORDER BY id LIMIT %s",
                [canonical, limit],
            )
        ]

    def entities_by_names(self, names: Sequence[str], view: View) -> list[Entity]:
        rows = self._rows(
            f"SELECT e.id, e.name, e.kind, e.canonical_name, {_ent(view)} FROM entities e "
            "WHERE e.name = ANY(%s)",
            [list(dict.fromkeys(names))],
        )
        return [seen_entity(row) for row in rows]

    def entities_by_ids(self, ids: Sequence[int]) -> list[Entity]:
        return [
            entity(row)
            for row in self._rows(
                "SELECT id, name, kind, canonical_name FROM entities WHERE id = ANY(%s)",
                [list(dict.fromkeys(ids))],
            )
        ]

    def names_near(self, canonicals: Sequence[str], view: View, limit: int) -> list[str]:
        canon = list(dict.fromkeys(canonicals))[:500]
        if not canon:
            return []
        rows = self._rows(
            f"SELECT e.name FROM entities e WHERE e.canonical_name = ANY(%s) AND {_ent(view)} "
            "ORDER BY e.id LIMIT %s",
            [canon, limit],
        )
        return [r[0] for r in rows]

    def observations(self, entity_ids: Sequence[int], view: View) -> list[Observation]:
        rows = self._rows(
            f"""SELECT me.entity_id, m.id, m.content FROM memory_entities me
                JOIN memories m ON m.id = me.memory_id
                WHERE me.entity_id = ANY(%s) AND {OBS} AND {_mem(view)}
                ORDER BY me.entity_id, me.memory_id""",
            [list(dict.fromkeys(entity_ids))],
        )
        return [observation(r) for r in rows]

    def observation_texts(self, entity_ids: Sequence[int], view: View) -> list[tuple[int, str]]:
        rows = self._rows(
            f"""SELECT me.entity_id, m.content FROM memory_entities me
                JOIN memories m ON m.id = me.memory_id
                WHERE me.entity_id = ANY(%s) AND {OBS} AND {_mem(view)}
                ORDER BY me.entity_id, me.memory_id""",
            [list(dict.fromkeys(entity_ids))],
        )
        return [(int(r[0]), r[1]) for r in rows]

    def observation_counts(self, entity_ids: Sequence[int], view: View) -> dict[int, int]:
        rows = self._rows(
            f"""SELECT me.entity_id, count(*) FROM memory_entities me
                JOIN memories m ON m.id = me.memory_id
                WHERE me.entity_id = ANY(%s) AND {OBS} AND {_mem(view)}
                GROUP BY me.entity_id""",
            [list(dict.fromkeys(entity_ids))],
        )
        return {int(eid): int(n) for eid, n in rows}

    # -- reads ---------------------------------------------------------------------------

    def count_entities(self, view: View, kind: str | None) -> int:
        tsql, tparams = ("AND e.kind = %s", [kind]) if kind is not None else ("", [])
        return self._one(f"SELECT count(*) FROM entities e WHERE {_ent(view)} {tsql}", tparams)

    def entity_page(self, view: View, kind: str | None, offset: int, limit: int) -> list[Entity]:
        tsql, tparams = ("AND e.kind = %s", [kind]) if kind is not None else ("", [])
        return [
            entity(row)
            for row in self._rows(
                f"SELECT e.id, e.name, e.kind, e.canonical_name FROM entities e "
                f"WHERE {_ent(view)} {tsql} ORDER BY e.id LIMIT %s OFFSET %s",
                [*tparams, limit, offset],
            )
        ]

    def entities_after(self, view: View, after_id: int, limit: int) -> list[Entity]:
        return [
            entity(row)
            for row in self._rows(
                f"SELECT e.id, e.name, e.kind, e.canonical_name FROM entities e "
                f"WHERE e.id > %s AND {_ent(view)} ORDER BY e.id LIMIT %s",
                [after_id, limit],
            )
        ]

    def relations_after(self, view: View, after_id: int, limit: int) -> list[Link]:
        return [
            link(row)
            for row in self._rows(
                f"{LINK} WHERE r.id > %s AND {_rel(view)} ORDER BY r.id LIMIT %s",
                [after_id, limit],
            )
        ]

    def relations_touching(
        self, entity_ids: Sequence[int], view: View, sources_only: bool
    ) -> list[Link]:
        ids = list(dict.fromkeys(entity_ids))
        if sources_only:
            sql = f"{LINK} WHERE r.source_id = ANY(%s) AND {_rel(view)} ORDER BY r.id"
            params: list[object] = [ids]
        else:
            sql = (
                f"{LINK} WHERE (r.source_id = ANY(%s) OR r.target_id = ANY(%s)) "
                f"AND {_rel(view)} ORDER BY r.id"
            )
            params = [ids, ids]
        return [link(r) for r in self._rows(sql, params)]

    def relations_of(self, entity_id: int, view: View) -> list[NamedRelation]:
        return [
            named(row)
            for row in self._rows(
                f"{NAMED} WHERE (r.source_id = %s OR r.target_id = %s) AND {_rel(view)} "
                "ORDER BY r.source_id <> %s, r.id",
                [entity_id, entity_id, entity_id],
            )
        ]

    def degree(self, entity_id: int, view: View) -> tuple[int, int]:
        out_deg = self._one(
            f"SELECT count(*) FROM relations r WHERE r.source_id = %s AND {_rel(view)}",
            [entity_id],
        )
        in_deg = self._one(
            f"SELECT count(*) FROM relations r WHERE r.target_id = %s AND {_rel(view)}",
            [entity_id],
        )
        return in_deg, out_deg

    def counts(self, view: View) -> Counts:
        return Counts(
            entities=self._one(f"SELECT count(*) FROM entities e WHERE {_ent(view)}"),
            relations=self._one(f"SELECT count(*) FROM relations r WHERE {_rel(view)}"),
            observations=self._one(
                f"""SELECT count(*) FROM memory_entities me JOIN memories m ON m.id = me.memory_id
                    WHERE {OBS} AND {_mem(view)}"""
            ),
            entity_types=self._one(
                f"SELECT count(DISTINCT e.kind) FROM entities e WHERE {_ent(view)}"
            ),
            relation_types=self._one(
                f"SELECT count(DISTINCT r.relation_type) FROM relations r WHERE {_rel(view)}"
            ),
        )

    def find_relations(
        self,
        view: View,
        source_id: int | None,
        target_id: int | None,
        relation_type: str | None,
        offset: int,
        limit: int,
    ) -> tuple[int, list[Link]]:
        conds = [_rel(view)]
        params: list[int | str] = []
        for col, value in relation_filter(source_id, target_id, relation_type):
            conds.append(f"{col} = %s")
            params.append(value)
        where = " AND ".join(conds)
        total = self._one(f"SELECT count(*) FROM relations r WHERE {where}", params)
        rows = self._rows(
            f"{LINK} WHERE {where} ORDER BY r.id LIMIT %s OFFSET %s", [*params, limit, offset]
        )
        return total, [link(r) for r in rows]

    def type_counts(self, view: View, what: RowKind) -> list[tuple[str, int]]:
        if what == "entity":
            sql = f"SELECT e.kind, count(*) FROM entities e WHERE {_ent(view)} GROUP BY e.kind"
        else:
            sql = (
                "SELECT r.relation_type, count(*) FROM relations r "
                f"WHERE {_rel(view)} GROUP BY r.relation_type"
            )
        return [(t, int(n)) for t, n in self._rows(f"{sql} ORDER BY 2 DESC, 1")]

    def edges(
        self, node_ids: Sequence[int], view: View, outgoing: bool, relation_type: str | None
    ) -> list[Edge]:
        col = "r.source_id" if outgoing else "r.target_id"
        tsql = "AND r.relation_type = %s" if relation_type is not None else ""
        extra = [relation_type] if relation_type is not None else []
        rows = self._rows(
            f"""SELECT r.id, r.source_id, r.relation_type, r.target_id FROM relations r
                WHERE {col} = ANY(%s) {tsql} AND {_rel(view)} ORDER BY r.id""",
            [list(dict.fromkeys(node_ids)), *extra],
        )
        return [edge(r) for r in rows]

    def edges_named(self, node_id: int, view: View, outgoing: bool) -> list[NamedRelation]:
        col = "r.source_id" if outgoing else "r.target_id"
        return [
            named(row)
            for row in self._rows(
                f"{NAMED} WHERE {col} = %s AND {_rel(view)} ORDER BY r.relation_type, r.id",
                [node_id],
            )
        ]

    def relation(
        self, source_id: int, relation_type: str, target_id: int, view: View
    ) -> Found | None:
        rows = self._rows(
            f"SELECT r.id, {_rel(view)} FROM relations r "
            "WHERE r.source_id = %s AND r.relation_type = %s AND r.target_id = %s",
            [source_id, relation_type, target_id],
        )
        return found(rows[0] if rows else None)

    def relation_ids_touching(self, entity_id: int, view: View) -> list[int]:
        return [
            int(r[0])
            for r in self._rows(
                "SELECT r.id FROM relations r WHERE (r.source_id = %s OR r.target_id = %s) "
                f"AND {_rel(view)}",
                [entity_id, entity_id],
            )
        ]

    def relation_metadata(self, relation_id: int) -> str | None:
        rows = self._rows("SELECT metadata FROM relations WHERE id = %s", [relation_id])
        return None if not rows else str(rows[0][0] or "")

    def without_vectors(self, kind: RowKind, ids: Sequence[int]) -> set[int]:
        have = {
            int(r[0])
            for r in self._rows(
                "SELECT item_id FROM vectors WHERE kind = %s AND item_id = ANY(%s)",
                [kind, list(dict.fromkeys(ids))],
            )
        }
        return set(ids) - have

    # -- writes ----------------------------------------------------------------------------

    def next_ids(self) -> tuple[int, int]:
        # The high-water marks (`id_marks`) are never below max(id) (store.pg.schema).
        marks = dict(
            self._rows(
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

    def create_entity(self, name: str, canonical: str, kind: str, ts: float) -> int:
        return self._one(
            "INSERT INTO entities (name, canonical_name, kind, created_at, updated_at) "
            "VALUES (%s, %s, %s, %s, %s) RETURNING id",
            [name, canonical, kind, ts, ts],
        )

    def add_observation(self, entity_id: int, content: str, ts: float, scope_id: int) -> int:
        mid = self._one(
            "INSERT INTO memories (content, memory_type, importance, created_at, updated_at) "
            "VALUES (%s, 'observation', 0.0, %s, %s) RETURNING id",
            [content, ts, ts],
        )
        self.conn.native(
            "INSERT INTO memory_scopes (memory_id, scope_id) VALUES (%s, %s)", [mid, scope_id]
        )
        self.conn.native(
            "INSERT INTO memory_entities (memory_id, entity_id) VALUES (%s, %s)", [mid, entity_id]
        )
        return mid

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

    def set_kind(self, entity_id: int, kind: str, ts: float) -> None:
        self.conn.native(
            "UPDATE entities SET kind = %s, updated_at = %s WHERE id = %s", [kind, ts, entity_id]
        )

    def touch(self, entity_ids: Sequence[int], ts: float) -> None:
        if entity_ids:
            self.conn.native(
                "UPDATE entities SET updated_at = %s WHERE id = ANY(%s)", [ts, list(entity_ids)]
            )

    def observation_elsewhere(self, memory_id: int, entity_id: int) -> bool:
        return bool(
            self._rows(
                "SELECT 1 FROM memory_entities WHERE memory_id = %s AND entity_id <> %s LIMIT 1",
                [memory_id, entity_id],
            )
        )

    def delete_memory(self, memory_id: int) -> None:
        self.conn.native("DELETE FROM memories WHERE id = %s", [memory_id])

    def unlink_observation(self, memory_id: int, entity_id: int) -> None:
        self.conn.native(
            "DELETE FROM memory_entities WHERE memory_id = %s AND entity_id = %s",
            [memory_id, entity_id],
        )

    def linked_memories(self, entity_id: int) -> list[int]:
        return [
            int(r[0])
            for r in self._rows(
                "SELECT memory_id FROM memory_entities WHERE entity_id = %s", [entity_id]
            )
        ]

    def delete_entity(self, entity_id: int) -> None:
        self.conn.native("DELETE FROM entities WHERE id = %s", [entity_id])

    def create_relation(
        self, source_id: int, target_id: int, relation_type: str, metadata: str, ts: float
    ) -> int:
        return self._one(
            "INSERT INTO relations (source_id, target_id, relation_type, metadata, created_at) "
            "VALUES (%s, %s, %s, %s, %s) RETURNING id",
            [source_id, target_id, relation_type, metadata, ts],
        )

    def set_relation_metadata(self, relation_id: int, metadata: str) -> None:
        self.conn.native(
            "UPDATE relations SET metadata = %s WHERE id = %s", [metadata, relation_id]
        )

    def delete_relation(self, relation_id: int) -> None:
        self.conn.native("DELETE FROM relations WHERE id = %s", [relation_id])

    def duplicate_observations(self, view: View) -> list[tuple[int, list[int]]]:
        rows = self._rows(
            f"""SELECT me.entity_id, array_agg(m.id ORDER BY m.id) FROM memory_entities me
                JOIN memories m ON m.id = me.memory_id
                WHERE {OBS} AND {_mem(view)} GROUP BY me.entity_id, m.content
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

    def all_edges_of(self, entity_id: int) -> list[Edge]:
        return [
            edge(row)
            for row in self._rows(
                "SELECT id, source_id, relation_type, target_id FROM relations "
                "WHERE source_id = %s OR target_id = %s ORDER BY id",
                [entity_id, entity_id],
            )
        ]

    def repoint_relation(self, relation_id: int, source_id: int, target_id: int) -> None:
        self.conn.native(
            "UPDATE relations SET source_id = %s, target_id = %s WHERE id = %s",
            [source_id, target_id, relation_id],
        )
        self.conn.native(
            "DELETE FROM vectors WHERE kind = 'relation' AND item_id = %s", [relation_id]
        )

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
