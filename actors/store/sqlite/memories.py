"""`interfaces.memories.Memories` on SQLite, in SQLite's dialect."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from ..interfaces.memories import (
    LinkedEntity,
    LinkedRelation,
    MemoryEdit,
    MemoryRow,
    StoreCounts,
)
from ..rows.memories import COLUMNS, linked_entity, linked_relation, memory_row
from ..rows.upkeep import store_counts
from .params import id_list


def _visible(scopes: Sequence[int], column: str = "m.id") -> str:
    """SQL true for a memory (``column``: its id) in one of the scope ids, or unscoped."""
    inner = id_list(scopes)
    return (
        f"(EXISTS (SELECT 1 FROM memory_scopes ms WHERE ms.memory_id = {column} AND ms.scope_id IN ({inner}))"
        f" OR NOT EXISTS (SELECT 1 FROM memory_scopes ms WHERE ms.memory_id = {column}))"
    )


class SqliteMemories:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def insert(
        self, content: str, memory_type: str, importance: float, ts: float, scopes: Sequence[int]
    ) -> int:
        cur = self.conn.execute(
            "INSERT INTO memories (content, memory_type, importance, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (content, memory_type, importance, ts, ts),
        )
        memory_id = cur.lastrowid
        assert memory_id is not None
        self.conn.executemany(
            "INSERT OR IGNORE INTO memory_scopes (memory_id, scope_id) VALUES (?, ?)",
            [(memory_id, s) for s in scopes],
        )
        return memory_id

    def link_entity(self, memory_id: int, entity_id: int) -> str:
        self.conn.execute(
            "INSERT OR IGNORE INTO memory_entities (memory_id, entity_id) VALUES (?, ?)",
            (memory_id, entity_id),
        )
        return str(
            self.conn.execute("SELECT name FROM entities WHERE id = ?", (entity_id,)).fetchone()[0]
        )

    def link_relation(self, memory_id: int, relation_id: int) -> None:
        self.conn.execute(
            "INSERT OR IGNORE INTO memory_relations (memory_id, relation_id) VALUES (?, ?)",
            (memory_id, relation_id),
        )

    def get(self, memory_id: int) -> MemoryRow | None:
        row = self.conn.execute(
            f"SELECT {COLUMNS} FROM memories m WHERE m.id = ?", (memory_id,)
        ).fetchone()
        return None if row is None else memory_row(row)

    def entities_of(self, memory_id: int) -> list[LinkedEntity]:
        return [
            linked_entity(r)
            for r in self.conn.execute(
                "SELECT e.id, e.name, e.kind FROM memory_entities me"
                " JOIN entities e ON e.id = me.entity_id WHERE me.memory_id = ? ORDER BY e.name",
                (memory_id,),
            )
        ]

    def relations_of(self, memory_id: int) -> list[LinkedRelation]:
        return [
            linked_relation(r)
            for r in self.conn.execute(
                """SELECT r.id, s.name, r.relation_type, t.name FROM memory_relations mr
                   JOIN relations r ON r.id = mr.relation_id
                   JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id
                   WHERE mr.memory_id = ? ORDER BY r.id""",
                (memory_id,),
            )
        ]

    def update(self, memory_id: int, edit: MemoryEdit, ts: float) -> None:
        self.conn.execute(
            """UPDATE memories SET content = coalesce(?, content),
                   memory_type = coalesce(?, memory_type),
                   importance = coalesce(?, importance), updated_at = ?
               WHERE id = ?""",
            (edit.content, edit.memory_type, edit.importance, ts, memory_id),
        )

    def delete(self, memory_id: int) -> bool:
        cur = self.conn.execute("DELETE FROM memories WHERE id = ?", (memory_id,))
        return cur.rowcount > 0

    def page(
        self, scopes: Sequence[int], memory_type: str | None, limit: int, offset: int
    ) -> list[MemoryRow]:
        type_sql = "AND m.memory_type = ? COLLATE NOCASE" if memory_type is not None else ""
        params: list[Any] = [memory_type] if memory_type is not None else []
        rows = self.conn.execute(
            f"SELECT {COLUMNS} FROM memories m WHERE {_visible(scopes)} {type_sql}"
            " ORDER BY m.id DESC LIMIT ? OFFSET ?",
            [*params, limit, offset],
        ).fetchall()
        return [memory_row(r) for r in rows]

    def _one(self, sql: str) -> int:
        return int(self.conn.execute(sql).fetchone()[0])

    def counts(self) -> StoreCounts:
        return store_counts(lambda table: self._one(f"SELECT count(*) FROM {table}"))

    def visible_counts(self, scopes: Sequence[int]) -> StoreCounts:
        ids = id_list(scopes)

        def seen(table: str, col: str, alias: str) -> str:
            return (
                f"(EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id AND x.scope_id IN ({ids}))"
                f" OR NOT EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id))"
            )

        visible = {
            "memory": f"SELECT m.id FROM memories m WHERE {seen('memory_scopes', 'memory_id', 'm')}",
            "entity": f"SELECT e.id FROM entities e WHERE {seen('entity_scopes', 'entity_id', 'e')}",
            "relation": f"SELECT r.id FROM relations r WHERE {seen('relation_scopes', 'relation_id', 'r')}",
        }
        vectors = " OR ".join(
            f"(v.kind = '{kind}' AND v.item_id IN ({sql}))" for kind, sql in visible.items()
        )
        one = self._one
        return StoreCounts(
            memories=one(f"SELECT count(*) FROM ({visible['memory']}) q"),
            scopes=one(f"SELECT count(*) FROM scopes WHERE id IN ({ids})"),
            entities=one(f"SELECT count(*) FROM ({visible['entity']}) q"),
            edges=one(f"SELECT count(*) FROM ({visible['relation']}) q"),
            vectors=one(f"SELECT count(*) FROM vectors v WHERE {vectors}"),
            recall_log=0,
            anchors=one(
                f"SELECT count(*) FROM memory_anchors a WHERE a.memory_id IN ({visible['memory']})"
            ),
        )
