"""Memories: insert (with their scopes, entities, relations and vectors), read, update, delete, list.

Each function runs inside a transaction its caller opened (the StoreWriter
for writes, the read pool for reads); none of them commits. Visibility: the
selected scopes see a memory in any of them, and an unscoped (legacy) memory
everywhere (`visible`, `visibility_sql`).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ...protocol.errors import NotFound
from .entities import EntitySpec, RelationSpec, upsert_entity, upsert_relation
from .ownership import Ownership
from .scope_rows import ensure_scope, memory_scope_names, scope_ids
from .scopes import GLOBAL, ScopePolicy
from .vectors import Vec, change_of, drop_vector, note_vector, put_vector
from .writer import Change


def now() -> float:
    return time.time()


@dataclass
class NewMemory:
    content: str
    memory_type: str = "observation"
    importance: float = 0.0
    scopes: list[str] = field(default_factory=list)  # canonical scope names
    entities: list[EntitySpec] = field(default_factory=list)
    relations: list[RelationSpec] = field(default_factory=list)
    vector: Vec | None = None
    entity_vectors: dict[str, Vec] = field(default_factory=dict)  # name as given -> vector
    relation_vectors: dict[tuple[str, str, str], Vec] = field(default_factory=dict)


def insert_memory(
    conn: sqlite3.Connection,
    new: NewMemory,
    ts: float | None = None,
    writable: Sequence[str] | None = None,
) -> tuple[dict[str, Any], list[Change]]:
    """Insert a memory with its scopes, entities, relations and vectors. Returns (result, changes).

    Entities and relations that exist are linked to the memory's scopes;
    those shared with a scope outside ``writable`` (the server's writable
    scopes; default: the memory's scopes and ``global``) keep their kind and
    metadata, and the result's ``warnings`` say so (see `ownership`).
    """
    ts = now() if ts is None else ts
    sids = [ensure_scope(conn, name) for name in new.scopes]
    own = Ownership(conn, writable if writable is not None else [*new.scopes, GLOBAL])
    warnings: list[str] = []
    memory_id = conn.execute(
        "INSERT INTO memories (content, memory_type, importance, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
        (new.content, new.memory_type, new.importance, ts, ts),
    ).lastrowid
    conn.executemany(
        "INSERT INTO memory_scopes (memory_id, scope_id) VALUES (?, ?)",
        [(memory_id, s) for s in sids],
    )
    changes: list[Change] = []
    if new.vector is not None:
        put_vector(conn, "memory", memory_id, new.vector)
    changes.append(change_of("memory", memory_id, new.vector))
    entities_out: list[dict[str, Any]] = []
    seen_entities: dict[str, int] = {}

    def entity(spec: EntitySpec) -> int:
        if spec.name in seen_entities:
            return seen_entities[spec.name]
        entity_id, created = upsert_entity(conn, spec, sids, ts, own, warnings)
        seen_entities[spec.name] = entity_id
        conn.execute(
            "INSERT OR IGNORE INTO memory_entities (memory_id, entity_id) VALUES (?, ?)",
            (memory_id, entity_id),
        )
        note_vector(conn, "entity", entity_id, new.entity_vectors.get(spec.name), created, changes)
        # The name as stored: a name differing in case or spacing only finds an entity.
        stored = conn.execute("SELECT name FROM entities WHERE id = ?", (entity_id,)).fetchone()
        entities_out.append(
            {"id": entity_id, "name": stored[0], "kind": spec.kind, "created": created}
        )
        return entity_id

    for spec in new.entities:
        entity(spec)
    relations_out: list[dict[str, Any]] = []
    for rel in new.relations:
        src = entity(rel.source)
        tgt = entity(rel.target)
        relation_id, created = upsert_relation(
            conn, src, rel.relation, tgt, rel.metadata, sids, ts, own, warnings
        )
        conn.execute(
            "INSERT OR IGNORE INTO memory_relations (memory_id, relation_id) VALUES (?, ?)",
            (memory_id, relation_id),
        )
        key = (rel.source.name, rel.relation, rel.target.name)
        note_vector(conn, "relation", relation_id, new.relation_vectors.get(key), created, changes)
        relations_out.append(
            {
                "id": relation_id,
                "source": rel.source.name,
                "relation": rel.relation,
                "target": rel.target.name,
                "created": created,
            }
        )
    result = {
        "id": memory_id,
        "scopes": list(new.scopes),
        "entities": entities_out,
        "relations": relations_out,
        "warnings": warnings,
    }
    return result, changes


MEMORY_COLUMNS = (
    "id, content, memory_type, importance, created_at, updated_at, last_accessed_at, access_count"
)


def _memory_row(row: Sequence[Any]) -> dict[str, Any]:
    keys = (
        "id",
        "content",
        "memory_type",
        "importance",
        "created_at",
        "updated_at",
        "last_accessed_at",
        "access_count",
    )
    return dict(zip(keys, row, strict=True))


def get_memory(
    conn: sqlite3.Connection, memory_id: int, details: bool = True
) -> dict[str, Any] | None:
    row = conn.execute(
        f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id = ?", (memory_id,)
    ).fetchone()
    if row is None:
        return None
    memory = _memory_row(row)
    memory["scopes"] = memory_scope_names(conn, memory_id)
    if details:
        memory["entities"] = [
            {"id": r[0], "name": r[1], "kind": r[2]}
            for r in conn.execute(
                "SELECT e.id, e.name, e.kind FROM memory_entities me JOIN entities e ON e.id = me.entity_id WHERE me.memory_id = ? ORDER BY e.name",
                (memory_id,),
            )
        ]
        memory["relations"] = [
            {"id": r[0], "source": r[1], "relation": r[2], "target": r[3]}
            for r in conn.execute(
                """SELECT r.id, s.name, r.relation_type, t.name FROM memory_relations mr
                   JOIN relations r ON r.id = mr.relation_id
                   JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id
                   WHERE mr.memory_id = ? ORDER BY r.id""",
                (memory_id,),
            )
        ]
    return memory


def visible(memory_scopes: Sequence[str], selection: Sequence[str]) -> bool:
    """Selected scopes see a memory in any of them; an unscoped (legacy) memory is seen everywhere."""
    return not memory_scopes or any(s in selection for s in memory_scopes)


def not_found(memory_id: int, selection: Sequence[str]) -> NotFound:
    where = ", ".join(f"`{s}`" for s in selection)
    return NotFound(
        f"memory {memory_id} not found in scopes {where} "
        "(to read another repository's memory, pass its scope in `scopes`; see list_scopes)"
    )


def writable_memory(
    conn: sqlite3.Connection,
    memory_id: int,
    policy: ScopePolicy,
    selection: Sequence[str],
    action: str = "modify",
) -> dict[str, Any]:
    """The memory, if visible in ``selection`` and owned here (every one of its scopes writable).

    Error handling: an unselected memory raises `not_found`; a memory shared
    with a scope this server may not write raises `ownership.SharedRow`.
    """
    memory = get_memory(conn, memory_id, details=False)
    if memory is None or not visible(memory["scopes"], selection):
        raise not_found(memory_id, selection)
    Ownership(conn, policy.writable).require(
        "memory", memory_id, f"memory {memory_id}", f"{action} memory {memory_id}"
    )
    return memory


def update_memory(
    conn: sqlite3.Connection,
    memory_id: int,
    policy: ScopePolicy,
    selection: Sequence[str],
    *,
    content: str | None,
    memory_type: str | None,
    importance: float | None,
    vector: Vec | None,
    embeddings_on: bool,
) -> tuple[dict[str, Any], list[Change]]:
    memory = writable_memory(conn, memory_id, policy, selection, "update")
    ts = now()
    sets: list[str] = []
    params: list[Any] = []
    changed: list[str] = []
    changes: list[Change] = []
    if content is not None and content != memory["content"]:
        sets.append("content = ?")
        params.append(content)
        changed.append("content")
    if memory_type is not None and memory_type != memory["memory_type"]:
        sets.append("memory_type = ?")
        params.append(memory_type)
        changed.append("memory_type")
    if importance is not None and importance != memory["importance"]:
        sets.append("importance = ?")
        params.append(importance)
        changed.append("importance")
    if sets:
        sets.append("updated_at = ?")
        params.append(ts)
        conn.execute(f"UPDATE memories SET {', '.join(sets)} WHERE id = ?", (*params, memory_id))
    if "content" in changed:
        if vector is not None:
            put_vector(conn, "memory", memory_id, vector)
        else:
            # Without an embedder the stale vector is dropped; the ranker re-embeds lazily.
            drop_vector(conn, "memory", memory_id)
        changes.append(change_of("memory", memory_id, vector if embeddings_on else None))
    result = get_memory(conn, memory_id, details=False) or {}
    result["changed"] = changed
    return result, changes


def delete_memory(
    conn: sqlite3.Connection, memory_id: int, policy: ScopePolicy, selection: Sequence[str]
) -> tuple[dict[str, Any], list[Change]]:
    memory = writable_memory(conn, memory_id, policy, selection, "forget")
    conn.execute("DELETE FROM memories WHERE id = ?", (memory_id,))
    return {"id": memory_id, "forgotten": True, "scopes": memory["scopes"]}, [
        change_of("memory", memory_id, None, deleted=True)
    ]


def visibility_sql(ids: Sequence[int], column: str = "m.id") -> str:
    """SQL true for a memory (``column``: its id) in one of the scopes ``ids``, or unscoped."""
    inner = ",".join(str(int(i)) for i in ids) or "NULL"
    return (
        f"(EXISTS (SELECT 1 FROM memory_scopes ms WHERE ms.memory_id = {column} AND ms.scope_id IN ({inner}))"
        f" OR NOT EXISTS (SELECT 1 FROM memory_scopes ms WHERE ms.memory_id = {column}))"
    )


def list_memories(
    conn: sqlite3.Connection,
    selection: Sequence[str],
    memory_type: str | None,
    limit: int,
    offset: int = 0,
) -> list[dict[str, Any]]:
    ids = scope_ids(conn, selection)
    type_sql = "AND m.memory_type = ? COLLATE NOCASE" if memory_type else ""
    params: list[Any] = [memory_type] if memory_type else []
    params += [limit, offset]
    rows = conn.execute(
        f"SELECT {', '.join('m.' + c.strip() for c in MEMORY_COLUMNS.split(','))} FROM memories m "
        f"WHERE {visibility_sql(list(ids.values()))} {type_sql} ORDER BY m.id DESC LIMIT ? OFFSET ?",
        params,
    ).fetchall()
    out = []
    for row in rows:
        memory = _memory_row(row)
        memory["scopes"] = memory_scope_names(conn, memory["id"])
        out.append(memory)
    return out


def visible_counts(conn: sqlite3.Connection, selection: Sequence[str]) -> dict[str, int]:
    """`counts` of what a reader of the scopes ``selection`` sees: rows linked to one of
    them or to none (a session whose grant does not cover the whole store). The recall
    log, which records every session's queries, is not counted (0)."""
    ids = ",".join(str(int(i)) for i in scope_ids(conn, selection).values()) or "NULL"

    def seen(table: str, col: str, alias: str) -> str:
        return (
            f"(EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id AND x.scope_id IN ({ids}))"
            f" OR NOT EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id))"
        )

    one = lambda sql: conn.execute(sql).fetchone()[0]  # noqa: E731
    visible = {
        "memory": f"SELECT m.id FROM memories m WHERE {seen('memory_scopes', 'memory_id', 'm')}",
        "entity": f"SELECT e.id FROM entities e WHERE {seen('entity_scopes', 'entity_id', 'e')}",
        "relation": f"SELECT r.id FROM relations r WHERE {seen('relation_scopes', 'relation_id', 'r')}",
    }
    vectors = " OR ".join(
        f"(v.kind = '{kind}' AND v.item_id IN ({sql}))" for kind, sql in visible.items()
    )
    return {
        "memories": one(f"SELECT count(*) FROM ({visible['memory']}) q"),
        "scopes": one(f"SELECT count(*) FROM scopes WHERE id IN ({ids})"),
        "entities": one(f"SELECT count(*) FROM ({visible['entity']}) q"),
        "edges": one(f"SELECT count(*) FROM ({visible['relation']}) q"),
        "vectors": one(f"SELECT count(*) FROM vectors v WHERE {vectors}"),
        "recall_log": 0,
    }


def counts(conn: sqlite3.Connection) -> dict[str, int]:
    one = lambda sql: conn.execute(sql).fetchone()[0]  # noqa: E731
    return {
        "memories": one("SELECT count(*) FROM memories"),
        "scopes": one("SELECT count(*) FROM scopes"),
        "entities": one("SELECT count(*) FROM entities"),
        "edges": one("SELECT count(*) FROM relations"),
        "vectors": one("SELECT count(*) FROM vectors"),
        "recall_log": one("SELECT count(*) FROM recall_log"),
    }
