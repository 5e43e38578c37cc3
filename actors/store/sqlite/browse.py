"""`interfaces.browse.Browse` on SQLite, in SQLite's dialect."""

from __future__ import annotations

import sqlite3
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
from .params import id_list

_CONDITIONS = {
    "memory_type": "m.memory_type = ? COLLATE NOCASE",
    "since": "m.created_at >= ?",
    "until": "m.created_at < ?",
    "min_importance": "m.importance >= ?",
    "only_scope": "EXISTS (SELECT 1 FROM memory_scopes ms JOIN scopes s ON s.id = ms.scope_id "
    "WHERE ms.memory_id = m.id AND s.name = ?)",
}


class SqliteBrowse:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def _scope_ids(self, names: list[str]) -> list[int]:
        out: set[int] = set()
        for name in set(names):
            row = self.conn.execute("SELECT id FROM scopes WHERE name = ?", (name,)).fetchone()
            if row:
                out.add(int(row[0]))
        return sorted(out)

    def _where(self, chosen: MemoryFilter) -> tuple[str, list[Any]]:
        inner = id_list(self._scope_ids(chosen.selection))
        clauses = [
            f"(EXISTS (SELECT 1 FROM memory_scopes ms WHERE ms.memory_id = m.id "
            f"AND ms.scope_id IN ({inner})) "
            "OR NOT EXISTS (SELECT 1 FROM memory_scopes ms WHERE ms.memory_id = m.id))"
        ]
        params: list[Any] = []
        for name, value in conditions(chosen):
            if name == "ids":  # inline: any number of ids, no parameter limit
                clauses.append(f"m.id IN ({id_list(value)})")
            else:
                clauses.append(_CONDITIONS[name])
                params.append(value)
        return " AND ".join(clauses), params

    def page(
        self, chosen: MemoryFilter, sort: Sort, descending: bool, offset: int, limit: int
    ) -> MemoryPage:
        where, params = self._where(chosen)
        total = self.conn.execute(
            f"SELECT count(*) FROM memories m WHERE {where}", params
        ).fetchone()[0]
        order = order_by(sort, descending)
        rows = self.conn.execute(
            f"SELECT {COLUMNS} FROM memories m WHERE {where} ORDER BY {order} LIMIT ? OFFSET ?",
            [*params, limit, offset],
        ).fetchall()
        return MemoryPage(memories=[self._memory(row) for row in rows], total=int(total))

    def _memory(self, row: tuple[Any, ...]) -> BrowsedMemory:
        mid = row[0]
        scopes = self.conn.execute(
            "SELECT s.name FROM memory_scopes ms JOIN scopes s ON s.id = ms.scope_id "
            "WHERE ms.memory_id = ? ORDER BY s.name",
            (mid,),
        ).fetchall()
        entities = self.conn.execute(
            "SELECT e.id, e.name, e.kind FROM memory_entities me "
            "JOIN entities e ON e.id = me.entity_id WHERE me.memory_id = ? ORDER BY e.name",
            (mid,),
        ).fetchall()
        return browsed_memory(row, scopes, entities)

    def memory_types(self) -> list[TypeCount]:
        rows = self.conn.execute(
            "SELECT min(memory_type), count(*) FROM memories GROUP BY memory_type COLLATE NOCASE "
            "ORDER BY count(*) DESC, 1"
        )
        return type_counts(rows)

    def graph_overview(self, selection: list[str], limit: int, edges: int) -> GraphOverview:
        conn = self.conn
        read_ids = self._scope_ids(selection)
        sees_all = len(read_ids) == conn.execute("SELECT count(*) FROM scopes").fetchone()[0]
        inner = id_list(read_ids)

        def visible(table: str, col: str, alias: str) -> str:
            if sees_all:  # every row is linked to a read scope or to none
                return "(1 = 1)"
            return (
                f"(EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id "
                f"AND x.scope_id IN ({inner})) "
                f"OR NOT EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id))"
            )

        ent = visible("entity_scopes", "entity_id", "e")
        rel = visible("relation_scopes", "relation_id", "r")
        total = conn.execute(f"SELECT count(*) FROM entities e WHERE {ent}").fetchone()[0]
        degree = f"""SELECT n, count(*) AS d FROM (
            SELECT r.source_id AS n FROM relations r WHERE {rel}
            UNION ALL SELECT r.target_id AS n FROM relations r WHERE {rel}) GROUP BY n"""
        rows = conn.execute(
            f"""SELECT e.id, e.name, e.kind, coalesce(g.d, 0) FROM entities e
                LEFT JOIN ({degree}) g ON g.n = e.id WHERE {ent}
                ORDER BY coalesce(g.d, 0) DESC, e.id LIMIT ?""",
            (limit,),
        ).fetchall()
        shown = id_list(list(node_names(rows)))
        links = conn.execute(
            f"""SELECT r.source_id, r.relation_type, r.target_id FROM relations r
                WHERE r.source_id IN ({shown}) AND r.target_id IN ({shown}) AND {rel}
                ORDER BY r.id LIMIT ?""",
            (edges + 1,),
        ).fetchall()
        return overview(rows, links, int(total), edges)

    def entities_named(self, canonical_names: list[str]) -> dict[int, str]:
        out: dict[int, str] = {}
        for name in set(canonical_names):
            for eid, found in self.conn.execute(
                "SELECT id, name FROM entities WHERE canonical_name = ?", (name,)
            ):
                out[eid] = found
        return dict(sorted(out.items()))

    def memory_text(self, memory_id: int) -> str | None:
        row = self.conn.execute(
            "SELECT content FROM memories WHERE id = ?", (memory_id,)
        ).fetchone()
        return str(row[0]) if row else None

    def mentions(self, memory_id: int) -> dict[int, str]:
        rows = self.conn.execute(
            "SELECT e.id, e.name FROM memory_entities me JOIN entities e ON e.id = me.entity_id "
            "WHERE me.memory_id = ?",
            (memory_id,),
        ).fetchall()
        return {int(i): str(n) for i, n in rows}

    def relations_between(
        self, one: list[int], other: list[int], limit: int
    ) -> list[tuple[str, str, str]]:
        a, b = id_list(one), id_list(other)
        rows = self.conn.execute(
            f"""SELECT s.name, r.relation_type, t.name FROM relations r
                JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id
                WHERE (r.source_id IN ({a}) AND r.target_id IN ({b}))
                   OR (r.source_id IN ({b}) AND r.target_id IN ({a}))
                ORDER BY r.id LIMIT ?""",
            (limit,),
        ).fetchall()
        return [(s, r, t) for s, r, t in rows]
