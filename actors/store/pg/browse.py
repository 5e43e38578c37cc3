"""`interfaces.browse.Browse` on PostgreSQL, in PostgreSQL's own dialect (`PgConnection.native`).

Names sort as SQLite sorts them, by code point (``COLLATE "C"``), whatever the database's
collation; memory types compare without regard to case with ``lower()``.
"""

from __future__ import annotations

from typing import Any

from ..interfaces.browse import (
    BrowsedMemory,
    GraphOverview,
    MemoryFilter,
    MemoryPage,
    Sort,
    TypeCount,
)
from ..rows.browse import browsed_memory, conditions, node_names, order_by, overview, type_counts
from ..rows.memories import COLUMNS
from .conn import PgConnection

_CONDITIONS = {
    "memory_type": "lower(m.memory_type) = lower(%s)",
    "since": "m.created_at >= %s",
    "until": "m.created_at < %s",
    "min_importance": "m.importance >= %s",
    "only_scope": "EXISTS (SELECT 1 FROM memory_scopes ms JOIN scopes s ON s.id = ms.scope_id "
    "WHERE ms.memory_id = m.id AND s.name = %s)",
    "ids": "m.id = ANY(%s)",
}


class PgBrowse:
    def __init__(self, conn: PgConnection) -> None:
        self.conn = conn

    def _scope_ids(self, names: list[str]) -> list[int]:
        rows = self.conn.native(
            "SELECT id FROM scopes WHERE name = ANY(%s) ORDER BY id", (sorted(set(names)),)
        ).fetchall()
        return [int(r[0]) for r in rows]

    def _where(self, chosen: MemoryFilter) -> tuple[str, list[Any]]:
        clauses = [
            "(EXISTS (SELECT 1 FROM memory_scopes ms WHERE ms.memory_id = m.id "
            "AND ms.scope_id = ANY(%s)) "
            "OR NOT EXISTS (SELECT 1 FROM memory_scopes ms WHERE ms.memory_id = m.id))"
        ]
        params: list[Any] = [self._scope_ids(chosen.selection)]
        for name, value in conditions(chosen):
            clauses.append(_CONDITIONS[name])
            params.append(value)
        return " AND ".join(clauses), params

    def page(
        self, chosen: MemoryFilter, sort: Sort, descending: bool, offset: int, limit: int
    ) -> MemoryPage:
        where, params = self._where(chosen)
        total = self.conn.native(
            f"SELECT count(*) FROM memories m WHERE {where}", params
        ).fetchone()
        order = order_by(sort, descending)
        rows = self.conn.native(
            f"SELECT {COLUMNS} FROM memories m WHERE {where} ORDER BY {order} LIMIT %s OFFSET %s",
            [*params, limit, offset],
        ).fetchall()
        return MemoryPage(
            memories=[self._memory(row) for row in rows], total=int(total[0]) if total else 0
        )

    def _memory(self, row: tuple[Any, ...]) -> BrowsedMemory:
        mid = row[0]
        scopes = self.conn.native(
            "SELECT s.name FROM memory_scopes ms JOIN scopes s ON s.id = ms.scope_id "
            'WHERE ms.memory_id = %s ORDER BY s.name COLLATE "C"',
            (mid,),
        ).fetchall()
        entities = self.conn.native(
            "SELECT e.id, e.name, e.kind FROM memory_entities me "
            "JOIN entities e ON e.id = me.entity_id WHERE me.memory_id = %s "
            'ORDER BY e.name COLLATE "C"',
            (mid,),
        ).fetchall()
        return browsed_memory(row, scopes, entities)

    def memory_types(self) -> list[TypeCount]:
        rows = self.conn.native(
            'SELECT min(memory_type COLLATE "C"), count(*) FROM memories '
            "GROUP BY lower(memory_type) ORDER BY count(*) DESC, 1"
        ).fetchall()
        return type_counts(rows)

    def graph_overview(self, selection: list[str], limit: int, edges: int) -> GraphOverview:
        native = self.conn.native
        read_ids = self._scope_ids(selection)
        stored = native("SELECT count(*) FROM scopes").fetchone()
        sees_all = len(read_ids) == (stored[0] if stored else 0)

        def visible(table: str, col: str, alias: str) -> str:
            if sees_all:  # every row is linked to a read scope or to none
                return "(1 = 1)"
            return (
                f"(EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id "
                f"AND x.scope_id = ANY(%(read)s)) "
                f"OR NOT EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id))"
            )

        ent = visible("entity_scopes", "entity_id", "e")
        rel = visible("relation_scopes", "relation_id", "r")
        found = native(f"SELECT count(*) FROM entities e WHERE {ent}", {"read": read_ids})
        total = int((found.fetchone() or (0,))[0])
        degree = f"""SELECT n, count(*) AS d FROM (
            SELECT r.source_id AS n FROM relations r WHERE {rel}
            UNION ALL SELECT r.target_id AS n FROM relations r WHERE {rel}) g GROUP BY n"""
        rows = native(
            f"""SELECT e.id, e.name, e.kind, coalesce(g.d, 0) FROM entities e
                LEFT JOIN ({degree}) g ON g.n = e.id WHERE {ent}
                ORDER BY coalesce(g.d, 0) DESC, e.id LIMIT %(limit)s""",
            {"read": read_ids, "limit": limit},
        ).fetchall()
        names = node_names(rows)
        links = native(
            f"""SELECT r.source_id, r.relation_type, r.target_id FROM relations r
                WHERE r.source_id = ANY(%(shown)s) AND r.target_id = ANY(%(shown)s) AND {rel}
                ORDER BY r.id LIMIT %(edges)s""",
            {"read": read_ids, "shown": list(names), "edges": edges + 1},
        ).fetchall()
        return overview(rows, links, total, edges)

    def entities_named(self, canonical_names: list[str]) -> dict[int, str]:
        rows = self.conn.native(
            "SELECT id, name FROM entities WHERE canonical_name = ANY(%s) ORDER BY id",
            (sorted(set(canonical_names)),),
        ).fetchall()
        return {int(i): str(n) for i, n in rows}

    def memory_text(self, memory_id: int) -> str | None:
        row = self.conn.native(
            "SELECT content FROM memories WHERE id = %s", (memory_id,)
        ).fetchone()
        return str(row[0]) if row else None

    def mentions(self, memory_id: int) -> dict[int, str]:
        rows = self.conn.native(
            "SELECT e.id, e.name FROM memory_entities me JOIN entities e ON e.id = me.entity_id "
            "WHERE me.memory_id = %s ORDER BY e.id",
            (memory_id,),
        ).fetchall()
        return {int(i): str(n) for i, n in rows}

    def relations_between(
        self, one: list[int], other: list[int], limit: int
    ) -> list[tuple[str, str, str]]:
        rows = self.conn.native(
            """SELECT s.name, r.relation_type, t.name FROM relations r
               JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id
               WHERE (r.source_id = ANY(%(a)s) AND r.target_id = ANY(%(b)s))
                  OR (r.source_id = ANY(%(b)s) AND r.target_id = ANY(%(a)s))
               ORDER BY r.id LIMIT %(limit)s""",
            {"a": [int(i) for i in one], "b": [int(i) for i in other], "limit": limit},
        ).fetchall()
        return [(s, r, t) for s, r, t in rows]
