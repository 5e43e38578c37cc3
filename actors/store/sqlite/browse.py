"""`interfaces.browse.Browse` on SQLite, in SQLite's dialect."""

from __future__ import annotations

from typing import Any

from ..interfaces.browse import (
    MemoryFilter,
)
from ..rows.browse import (
    BrowseBase,
    conditions,
)
from ..rows.memories import COLUMNS
from .params import id_list
from .statements import SqliteRows

_CONDITIONS = {
    "memory_type": "m.memory_type = ? COLLATE NOCASE",
    "since": "m.created_at >= ?",
    "until": "m.created_at < ?",
    "min_importance": "m.importance >= ?",
    "only_scope": "EXISTS (SELECT 1 FROM memory_scopes ms JOIN scopes s ON s.id = ms.scope_id "
    "WHERE ms.memory_id = m.id AND s.name = ?)",
}


class SqliteBrowse(BrowseBase, SqliteRows):
    PAGE = f"SELECT {COLUMNS} FROM memories m WHERE {{where}} ORDER BY {{order}} LIMIT ? OFFSET ?"
    SCOPES_OF = (
        "SELECT s.name FROM memory_scopes ms JOIN scopes s ON s.id = ms.scope_id"
        " WHERE ms.memory_id = ? ORDER BY s.name"
    )
    ENTITIES_OF = (
        "SELECT e.id, e.name, e.kind FROM memory_entities me"
        " JOIN entities e ON e.id = me.entity_id WHERE me.memory_id = ? ORDER BY e.name"
    )
    MEMORY_TYPES = (
        "SELECT min(memory_type), count(*) FROM memories GROUP BY memory_type COLLATE NOCASE"
        " ORDER BY count(*) DESC, 1"
    )
    MEMORY_TEXT = "SELECT content FROM memories WHERE id = ?"
    MENTIONS = (
        "SELECT e.id, e.name FROM memory_entities me JOIN entities e ON e.id = me.entity_id"
        " WHERE me.memory_id = ?"
    )

    def ids_in(self, name: str, ids: list[int]) -> tuple[str, dict[str, Any]]:
        return f"IN ({id_list(ids)})", {}  # inline: any number of ids, no parameter limit

    def mark(self, name: str) -> str:
        return f":{name}"

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

    def entities_named(self, canonical_names: list[str]) -> dict[int, str]:
        out: dict[int, str] = {}
        for name in set(canonical_names):
            for eid, found in self.conn.execute(
                "SELECT id, name FROM entities WHERE canonical_name = ?", (name,)
            ):
                out[eid] = found
        return dict(sorted(out.items()))

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
