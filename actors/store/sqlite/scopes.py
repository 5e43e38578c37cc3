"""`interfaces.scopes.Scopes` on SQLite, in SQLite's dialect."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from ..interfaces.scopes import RowKind
from ..rows.scopes import ScopesBase
from .statements import SqliteRows

# The link table of each kind of row, and its column naming the row.
LINKS: dict[str, tuple[str, str]] = {
    "memory": ("memory_scopes", "memory_id"),
    "entity": ("entity_scopes", "entity_id"),
    "relation": ("relation_scopes", "relation_id"),
}

_RELATION_MEMORY_SCOPES = """SELECT ms.scope_id FROM memory_relations mr
    JOIN memory_scopes ms ON ms.memory_id = mr.memory_id WHERE mr.relation_id = :id"""

# The owner scope ids of one row (``:id``): the parts of a union (see `store.domain.ownership`).
OWNER_PARTS: dict[str, list[str]] = {
    "memory": ["SELECT scope_id FROM memory_scopes WHERE memory_id = :id"],
    "relation": [
        "SELECT scope_id FROM relation_scopes WHERE relation_id = :id",
        _RELATION_MEMORY_SCOPES,
    ],
    "entity": [
        "SELECT scope_id FROM entity_scopes WHERE entity_id = :id",
        """SELECT ms.scope_id FROM memory_entities me JOIN memory_scopes ms ON ms.memory_id = me.memory_id
           WHERE me.entity_id = :id""",
        *(
            f"""SELECT rs.scope_id FROM relations r JOIN relation_scopes rs ON rs.relation_id = r.id
                WHERE r.{end} = :id"""
            for end in ("source_id", "target_id")
        ),
        *(
            f"""SELECT ms.scope_id FROM relations r JOIN memory_relations mr ON mr.relation_id = r.id
                JOIN memory_scopes ms ON ms.memory_id = mr.memory_id WHERE r.{end} = :id"""
            for end in ("source_id", "target_id")
        ),
    ],
}
OWNERS_SQL = {kind: " UNION ".join(parts) for kind, parts in OWNER_PARTS.items()}


def _others(ids: Sequence[int]) -> str:
    """The list of a ``NOT IN (...)`` excluding ``ids``: empty for none (SQLite's ``NOT IN ()``
    is true for every row), never `id_list`'s ``NULL`` (``NOT IN (NULL)`` is true for none)."""
    return ",".join(str(int(i)) for i in ids)


class SqliteScopes(ScopesBase, SqliteRows):
    SCOPE_ID = "SELECT id FROM scopes WHERE name = ?"
    ADD = "INSERT INTO scopes (name) VALUES (?)"
    OF_MEMORY = (
        "SELECT s.name FROM memory_scopes ms JOIN scopes s ON s.id = ms.scope_id"
        " WHERE ms.memory_id = ? ORDER BY s.name"
    )

    def foreign_owners(self, kind: RowKind, item: int, writable: Sequence[int]) -> list[str]:
        rows = self.conn.execute(
            f"""SELECT name FROM scopes WHERE id IN ({OWNERS_SQL[kind]})
                AND id NOT IN ({_others(writable)}) ORDER BY name""",
            {"id": item},
        ).fetchall()
        return [r[0] for r in rows]

    def has_foreign_owner(self, kind: RowKind, item: int, writable: Sequence[int]) -> bool:
        # Each part of the owner union is its own EXISTS: no union is built, and a shared
        # row is found at its first foreign link.
        winner = _others(writable)
        exists = " OR ".join(
            f"EXISTS (SELECT 1 FROM ({part}) WHERE scope_id NOT IN ({winner}))"
            for part in OWNER_PARTS[kind]
        )
        return bool(self.conn.execute(f"SELECT {exists}", {"id": item}).fetchone()[0])

    def release(
        self, kind: Literal["entity", "relation"], item: int, writable: Sequence[int]
    ) -> None:
        table, col = LINKS[kind]
        winner = _others(writable)
        self.conn.execute(
            f"""INSERT OR IGNORE INTO {table} ({col}, scope_id)
                SELECT :id, id FROM scopes WHERE id IN ({OWNERS_SQL[kind]}) AND id NOT IN ({winner})""",
            {"id": item},
        )
        self.conn.execute(
            f"DELETE FROM {table} WHERE {col} = ? AND scope_id IN ({winner})", (item,)
        )
