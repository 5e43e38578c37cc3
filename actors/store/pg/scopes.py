"""`interfaces.scopes.Scopes` on PostgreSQL, in PostgreSQL's own dialect (`PgConnection.native`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from ..interfaces.scopes import RowKind
from ..rows.scopes import ScopesBase
from .statements import PgRows

# The link table of each kind of row, and its column naming the row.
LINKS: dict[str, tuple[str, str]] = {
    "memory": ("memory_scopes", "memory_id"),
    "entity": ("entity_scopes", "entity_id"),
    "relation": ("relation_scopes", "relation_id"),
}

# The owner scope ids of one row (``%(id)s``): the parts of a union (see `store.domain.ownership`).
OWNER_PARTS: dict[str, list[str]] = {
    "memory": ["SELECT scope_id FROM memory_scopes WHERE memory_id = %(id)s"],
    "relation": [
        "SELECT scope_id FROM relation_scopes WHERE relation_id = %(id)s",
        """SELECT ms.scope_id FROM memory_relations mr
           JOIN memory_scopes ms ON ms.memory_id = mr.memory_id WHERE mr.relation_id = %(id)s""",
    ],
    "entity": [
        "SELECT scope_id FROM entity_scopes WHERE entity_id = %(id)s",
        """SELECT ms.scope_id FROM memory_entities me JOIN memory_scopes ms ON ms.memory_id = me.memory_id
           WHERE me.entity_id = %(id)s""",
        *(
            f"""SELECT rs.scope_id FROM relations r JOIN relation_scopes rs ON rs.relation_id = r.id
                WHERE r.{end} = %(id)s"""
            for end in ("source_id", "target_id")
        ),
        *(
            f"""SELECT ms.scope_id FROM relations r JOIN memory_relations mr ON mr.relation_id = r.id
                JOIN memory_scopes ms ON ms.memory_id = mr.memory_id WHERE r.{end} = %(id)s"""
            for end in ("source_id", "target_id")
        ),
    ],
}
OWNERS_SQL = {kind: " UNION ".join(parts) for kind, parts in OWNER_PARTS.items()}


class PgScopes(ScopesBase, PgRows):
    SCOPE_ID = "SELECT id FROM scopes WHERE name = %s"
    ADD = "INSERT INTO scopes (name) VALUES (%s) RETURNING id"
    OF_MEMORY = (
        "SELECT s.name FROM memory_scopes ms JOIN scopes s ON s.id = ms.scope_id"
        ' WHERE ms.memory_id = %s ORDER BY s.name COLLATE "C"'
    )

    def foreign_owners(self, kind: RowKind, item: int, writable: Sequence[int]) -> list[str]:
        rows = self.conn.native(
            f"SELECT name FROM scopes WHERE id IN ({OWNERS_SQL[kind]})"
            ' AND id <> ALL(%(w)s::bigint[]) ORDER BY name COLLATE "C"',
            {"id": item, "w": list(writable)},
        ).fetchall()
        return [r[0] for r in rows]

    def has_foreign_owner(self, kind: RowKind, item: int, writable: Sequence[int]) -> bool:
        exists = " OR ".join(
            f"EXISTS (SELECT 1 FROM ({part}) p WHERE scope_id <> ALL(%(w)s::bigint[]))"
            for part in OWNER_PARTS[kind]
        )
        row = self.conn.native(f"SELECT {exists}", {"id": item, "w": list(writable)}).fetchone()
        return bool(row and row[0])

    def release(
        self, kind: Literal["entity", "relation"], item: int, writable: Sequence[int]
    ) -> None:
        table, col = LINKS[kind]
        params = {"id": item, "w": list(writable)}
        self.conn.native(
            f"""INSERT INTO {table} ({col}, scope_id)
                SELECT %(id)s, id FROM scopes
                WHERE id IN ({OWNERS_SQL[kind]}) AND id <> ALL(%(w)s::bigint[])
                ON CONFLICT DO NOTHING""",
            params,
        )
        self.conn.native(
            f"DELETE FROM {table} WHERE {col} = %(id)s AND scope_id = ANY(%(w)s::bigint[])",
            params,
        )
