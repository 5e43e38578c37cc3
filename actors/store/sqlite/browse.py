"""`interfaces.browse.Browse` on SQLite, in SQLite's dialect."""

from __future__ import annotations

import sqlite3
from typing import Any

from ..interfaces.browse import (
    SORTS,
    BrowsedMemory,
    EntityRef,
    GraphLink,
    GraphNode,
    GraphOverview,
    MemoryFilter,
    MemoryPage,
    Sort,
    TypeCount,
)
from .params import id_list

_ORDER = {
    "created": "m.created_at",
    "updated": "m.updated_at",
    "importance": "m.importance",
    "accessed": "m.access_count",
    "id": "m.id",
}
_COLUMNS = (
    "m.id, m.content, m.memory_type, m.importance, m.created_at, m.updated_at, "
    "m.last_accessed_at, m.access_count"
)


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
        if chosen.memory_type:
            clauses.append("m.memory_type = ? COLLATE NOCASE")
            params.append(chosen.memory_type)
        if chosen.since is not None:
            clauses.append("m.created_at >= ?")
            params.append(chosen.since)
        if chosen.until is not None:
            clauses.append("m.created_at < ?")
            params.append(chosen.until)
        if chosen.min_importance is not None:
            clauses.append("m.importance >= ?")
            params.append(chosen.min_importance)
        if chosen.only_scope:
            clauses.append(
                "EXISTS (SELECT 1 FROM memory_scopes ms JOIN scopes s ON s.id = ms.scope_id "
                "WHERE ms.memory_id = m.id AND s.name = ?)"
            )
            params.append(chosen.only_scope)
        if chosen.ids is not None:
            clauses.append(f"m.id IN ({id_list(chosen.ids)})")
        return " AND ".join(clauses), params

    def page(
        self, chosen: MemoryFilter, sort: Sort, descending: bool, offset: int, limit: int
    ) -> MemoryPage:
        where, params = self._where(chosen)
        total = self.conn.execute(
            f"SELECT count(*) FROM memories m WHERE {where}", params
        ).fetchone()[0]
        key = _ORDER[sort if sort in SORTS else "id"]
        order = f"{key} {'DESC' if descending else 'ASC'}, m.id DESC"
        rows = self.conn.execute(
            f"SELECT {_COLUMNS} FROM memories m WHERE {where} ORDER BY {order} LIMIT ? OFFSET ?",
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
        return BrowsedMemory(
            id=mid, content=row[1], memory_type=row[2], importance=row[3], created_at=row[4],
            updated_at=row[5], last_accessed_at=row[6], access_count=row[7],
            scopes=[s for (s,) in scopes],
            entities=[EntityRef(id=i, name=n, kind=k) for i, n, k in entities],
        )  # fmt: skip

    def memory_types(self) -> list[TypeCount]:
        rows = self.conn.execute(
            "SELECT min(memory_type), count(*) FROM memories GROUP BY memory_type COLLATE NOCASE "
            "ORDER BY count(*) DESC, 1"
        )
        return [TypeCount(name=name, memories=count) for name, count in rows]

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
        names = {eid: name for eid, name, _, _ in rows}
        shown = id_list(list(names))
        links = conn.execute(
            f"""SELECT r.source_id, r.relation_type, r.target_id FROM relations r
                WHERE r.source_id IN ({shown}) AND r.target_id IN ({shown}) AND {rel}
                ORDER BY r.id LIMIT ?""",
            (edges + 1,),
        ).fetchall()
        return GraphOverview(
            nodes=[GraphNode(name=n, kind=k, degree=d) for _, n, k, d in rows],
            links=[
                GraphLink(source=names[s], relation_type=t, target=names[o])
                for s, t, o in links[:edges]
            ],
            total=int(total),
            truncated=total > len(rows) or len(links) > edges,
        )

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
