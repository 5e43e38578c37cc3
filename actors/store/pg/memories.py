"""`interfaces.memories.Memories` on PostgreSQL: `rows.memories.MemoriesBase` with
PostgreSQL's own statements (`PgConnection.native`)."""

from __future__ import annotations

from collections.abc import Sequence

from ..interfaces.memories import MemoryRow
from ..rows.memories import COLUMNS, MemoriesBase, memory_row, seen
from ..rows.sql import Params
from .statements import PgRows

# The test that a scope id is one of the array ``%(scopes)s``.
SCOPE_IN = "= ANY(%(scopes)s::bigint[])"
# A memory (``m``) in one of the scope ids ``%(scopes)s``, or unscoped.
VISIBLE = seen("memory_scopes", "memory_id", "m", SCOPE_IN)


class PgMemories(MemoriesBase, PgRows):
    INSERT = (
        "INSERT INTO memories (content, memory_type, importance, created_at, updated_at)"
        " VALUES (%s, %s, %s, %s, %s) RETURNING id"
    )
    LINK_ENTITY = (
        "INSERT INTO memory_entities (memory_id, entity_id) VALUES (%s, %s) ON CONFLICT DO NOTHING"
    )
    ENTITY_NAME = "SELECT name FROM entities WHERE id = %s"
    LINK_RELATION = (
        "INSERT INTO memory_relations (memory_id, relation_id) VALUES (%s, %s)"
        " ON CONFLICT DO NOTHING"
    )
    GET = f"SELECT {COLUMNS} FROM memories m WHERE m.id = %s"
    ENTITIES_OF = (
        "SELECT e.id, e.name, e.kind FROM memory_entities me"
        " JOIN entities e ON e.id = me.entity_id WHERE me.memory_id = %s"
        ' ORDER BY e.name COLLATE "C"'
    )
    RELATIONS_OF = """SELECT r.id, s.name, r.relation_type, t.name FROM memory_relations mr
        JOIN relations r ON r.id = mr.relation_id
        JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id
        WHERE mr.memory_id = %s ORDER BY r.id"""
    UPDATE = """UPDATE memories SET content = coalesce(%s, content),
        memory_type = coalesce(%s, memory_type),
        importance = coalesce(%s::double precision, importance), updated_at = %s
        WHERE id = %s"""
    DELETE = "DELETE FROM memories WHERE id = %s"

    def link_scopes(self, memory_id: int, scopes: Sequence[int]) -> None:
        if scopes:
            self.run(
                "INSERT INTO memory_scopes (memory_id, scope_id)"
                " SELECT %s, s FROM unnest(%s::bigint[]) s ON CONFLICT DO NOTHING",
                (memory_id, list(scopes)),
            )

    def scope_in(self, scopes: Sequence[int]) -> tuple[str, Params]:
        return SCOPE_IN, {"scopes": list(scopes)}

    def page(
        self, scopes: Sequence[int], memory_type: str | None, limit: int, offset: int
    ) -> list[MemoryRow]:
        type_sql = "AND lower(m.memory_type) = lower(%(type)s)" if memory_type is not None else ""
        rows = self.all(
            f"SELECT {COLUMNS} FROM memories m WHERE {VISIBLE} {type_sql}"
            " ORDER BY m.id DESC LIMIT %(limit)s OFFSET %(offset)s",
            {"scopes": list(scopes), "type": memory_type, "limit": limit, "offset": offset},
        )
        return [memory_row(r) for r in rows]
