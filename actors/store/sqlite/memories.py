"""`interfaces.memories.Memories` on SQLite, in SQLite's dialect."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..interfaces.memories import (
    MemoryRow,
)
from ..rows.memories import COLUMNS, MemoriesBase, memory_row
from ..rows.sql import Params
from .params import id_list
from .statements import SqliteRows


def _visible(scopes: Sequence[int], column: str = "m.id") -> str:
    """SQL true for a memory (``column``: its id) in one of the scope ids, or unscoped."""
    inner = id_list(scopes)
    return (
        f"(EXISTS (SELECT 1 FROM memory_scopes ms WHERE ms.memory_id = {column} AND ms.scope_id IN ({inner}))"
        f" OR NOT EXISTS (SELECT 1 FROM memory_scopes ms WHERE ms.memory_id = {column}))"
    )


class SqliteMemories(MemoriesBase, SqliteRows):
    INSERT = (
        "INSERT INTO memories (content, memory_type, importance, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, ?)"
    )
    LINK_ENTITY = "INSERT OR IGNORE INTO memory_entities (memory_id, entity_id) VALUES (?, ?)"
    ENTITY_NAME = "SELECT name FROM entities WHERE id = ?"
    LINK_RELATION = "INSERT OR IGNORE INTO memory_relations (memory_id, relation_id) VALUES (?, ?)"
    GET = f"SELECT {COLUMNS} FROM memories m WHERE m.id = ?"
    ENTITIES_OF = (
        "SELECT e.id, e.name, e.kind FROM memory_entities me"
        " JOIN entities e ON e.id = me.entity_id WHERE me.memory_id = ? ORDER BY e.name"
    )
    RELATIONS_OF = """SELECT r.id, s.name, r.relation_type, t.name FROM memory_relations mr
        JOIN relations r ON r.id = mr.relation_id
        JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id
        WHERE mr.memory_id = ? ORDER BY r.id"""
    UPDATE = """UPDATE memories SET content = coalesce(?, content),
        memory_type = coalesce(?, memory_type),
        importance = coalesce(?, importance), updated_at = ?
        WHERE id = ?"""
    DELETE = "DELETE FROM memories WHERE id = ?"

    def link_scopes(self, memory_id: int, scopes: Sequence[int]) -> None:
        self.conn.executemany(
            "INSERT OR IGNORE INTO memory_scopes (memory_id, scope_id) VALUES (?, ?)",
            [(memory_id, s) for s in scopes],
        )

    def page(
        self, scopes: Sequence[int], memory_type: str | None, limit: int, offset: int
    ) -> list[MemoryRow]:
        type_sql = "AND m.memory_type = ? COLLATE NOCASE" if memory_type is not None else ""
        params: list[Any] = [memory_type] if memory_type is not None else []
        sql = f"SELECT {COLUMNS} FROM memories m WHERE {_visible(scopes)} {type_sql}"
        rows = self.all(sql + " ORDER BY m.id DESC LIMIT ? OFFSET ?", [*params, limit, offset])
        return [memory_row(r) for r in rows]

    def scope_in(self, scopes: Sequence[int]) -> tuple[str, Params]:
        return f"IN ({id_list(scopes)})", ()
