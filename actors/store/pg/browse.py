"""`interfaces.browse.Browse` on PostgreSQL, in PostgreSQL's own dialect (`PgConnection.native`).

Names sort as SQLite sorts them, by code point (``COLLATE "C"``), whatever the database's
collation; memory types compare without regard to case with ``lower()``.
"""

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
from .statements import PgRows

_CONDITIONS = {
    "memory_type": "lower(m.memory_type) = lower(%s)",
    "since": "m.created_at >= %s",
    "until": "m.created_at < %s",
    "min_importance": "m.importance >= %s",
    "only_scope": "EXISTS (SELECT 1 FROM memory_scopes ms JOIN scopes s ON s.id = ms.scope_id "
    "WHERE ms.memory_id = m.id AND s.name = %s)",
    "ids": "m.id = ANY(%s)",
}


class PgBrowse(BrowseBase, PgRows):
    PAGE = f"SELECT {COLUMNS} FROM memories m WHERE {{where}} ORDER BY {{order}} LIMIT %s OFFSET %s"
    SCOPES_OF = (
        "SELECT s.name FROM memory_scopes ms JOIN scopes s ON s.id = ms.scope_id"
        ' WHERE ms.memory_id = %s ORDER BY s.name COLLATE "C"'
    )
    ENTITIES_OF = (
        "SELECT e.id, e.name, e.kind FROM memory_entities me"
        " JOIN entities e ON e.id = me.entity_id WHERE me.memory_id = %s"
        ' ORDER BY e.name COLLATE "C"'
    )
    MEMORY_TYPES = (
        'SELECT min(memory_type COLLATE "C"), count(*) FROM memories'
        " GROUP BY lower(memory_type) ORDER BY count(*) DESC, 1"
    )
    MEMORY_TEXT = "SELECT content FROM memories WHERE id = %s"
    MENTIONS = (
        "SELECT e.id, e.name FROM memory_entities me JOIN entities e ON e.id = me.entity_id"
        " WHERE me.memory_id = %s ORDER BY e.id"
    )

    def ids_in(self, name: str, ids: list[int]) -> tuple[str, dict[str, Any]]:
        return f"= ANY(%({name})s)", {name: [int(i) for i in ids]}

    def mark(self, name: str) -> str:
        return f"%({name})s"

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

    def entities_named(self, canonical_names: list[str]) -> dict[int, str]:
        rows = self.conn.native(
            "SELECT id, name FROM entities WHERE canonical_name = ANY(%s) ORDER BY id",
            (sorted(set(canonical_names)),),
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
