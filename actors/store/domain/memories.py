"""Memories: insert (with their scopes, entities, relations and vectors), read, update, delete, list.

Each function runs inside a transaction its caller opened (the StoreWriter
for writes, the read pool for reads), seen through the storage interfaces
(`interfaces.StoreTx`: ``tx.memories``, ``tx.scopes``); none of them commits
or writes SQL. Visibility: the selected scopes see a memory in any of them,
and an unscoped (legacy) memory everywhere (`visible`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ....protocol.errors import NotFound
from ..interfaces import ReadTx, StoreTx
from ..interfaces.memories import MemoryEdit
from ..messages import Change
from .embeddings import Vec, change_of, drop_vector, note_vector, put_vector
from .entities import EntitySpec, RelationSpec, upsert_entity, upsert_relation
from .ownership import Ownership
from .scopes import GLOBAL, ScopePolicy


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
    tx: StoreTx,
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
    sids = [tx.scopes.ensure(name) for name in new.scopes]
    own = Ownership(tx, writable if writable is not None else [*new.scopes, GLOBAL])
    warnings: list[str] = []
    memory_id = tx.memories.insert(new.content, new.memory_type, new.importance, ts, sids)
    changes: list[Change] = []
    if new.vector is not None:
        put_vector(tx, "memory", memory_id, new.vector)
    changes.append(change_of("memory", memory_id, new.vector))
    entities_out: list[dict[str, Any]] = []
    seen_entities: dict[str, int] = {}

    def entity(spec: EntitySpec) -> int:
        if spec.name in seen_entities:
            return seen_entities[spec.name]
        entity_id, created = upsert_entity(tx, spec, sids, ts, own, warnings)
        seen_entities[spec.name] = entity_id
        # The name as stored: a name differing in case or spacing only finds an entity.
        stored = tx.memories.link_entity(memory_id, entity_id)
        note_vector(tx, "entity", entity_id, new.entity_vectors.get(spec.name), created, changes)
        entities_out.append(
            {"id": entity_id, "name": stored, "kind": spec.kind, "created": created}
        )
        return entity_id

    for spec in new.entities:
        entity(spec)
    relations_out: list[dict[str, Any]] = []
    for rel in new.relations:
        src = entity(rel.source)
        tgt = entity(rel.target)
        relation_id, created = upsert_relation(
            tx, src, rel.relation, tgt, rel.metadata, sids, ts, own, warnings
        )
        tx.memories.link_relation(memory_id, relation_id)
        key = (rel.source.name, rel.relation, rel.target.name)
        note_vector(tx, "relation", relation_id, new.relation_vectors.get(key), created, changes)
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


def get_memory(tx: ReadTx, memory_id: int, details: bool = True) -> dict[str, Any] | None:
    row = tx.memories.get(memory_id)
    if row is None:
        return None
    memory = row.as_dict()
    memory["scopes"] = tx.scopes.of_memory(memory_id)
    if details:
        memory["entities"] = [
            {"id": e.id, "name": e.name, "kind": e.kind} for e in tx.memories.entities_of(memory_id)
        ]
        memory["relations"] = [
            {"id": r.id, "source": r.source, "relation": r.relation, "target": r.target}
            for r in tx.memories.relations_of(memory_id)
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
    tx: ReadTx,
    memory_id: int,
    policy: ScopePolicy,
    selection: Sequence[str],
    action: str = "modify",
) -> dict[str, Any]:
    """The memory, if visible in ``selection`` and owned here (every one of its scopes writable).

    Error handling: an unselected memory raises `not_found`; a memory shared
    with a scope this server may not write raises `ownership.SharedRow`.
    """
    memory = get_memory(tx, memory_id, details=False)
    if memory is None or not visible(memory["scopes"], selection):
        raise not_found(memory_id, selection)
    Ownership(tx, policy.writable).require(
        "memory", memory_id, f"memory {memory_id}", f"{action} memory {memory_id}"
    )
    return memory


def update_memory(
    tx: StoreTx,
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
    memory = writable_memory(tx, memory_id, policy, selection, "update")
    ts = now()
    changed: list[str] = []
    changes: list[Change] = []
    if content is not None and content != memory["content"]:
        changed.append("content")
    else:
        content = None
    if memory_type is not None and memory_type != memory["memory_type"]:
        changed.append("memory_type")
    else:
        memory_type = None
    if importance is not None and importance != memory["importance"]:
        changed.append("importance")
    else:
        importance = None
    if changed:
        tx.memories.update(memory_id, MemoryEdit(content, memory_type, importance), ts)
    if "content" in changed:
        if vector is not None:
            put_vector(tx, "memory", memory_id, vector)
        else:
            # Without an embedder the stale vector is dropped; the ranker re-embeds lazily.
            drop_vector(tx, "memory", memory_id)
        changes.append(change_of("memory", memory_id, vector if embeddings_on else None))
    result = get_memory(tx, memory_id, details=False) or {}
    result["changed"] = changed
    return result, changes


def delete_memory(
    tx: StoreTx, memory_id: int, policy: ScopePolicy, selection: Sequence[str]
) -> tuple[dict[str, Any], list[Change]]:
    memory = writable_memory(tx, memory_id, policy, selection, "forget")
    tx.memories.delete(memory_id)
    return {"id": memory_id, "forgotten": True, "scopes": memory["scopes"]}, [
        change_of("memory", memory_id, None, deleted=True)
    ]


def list_memories(
    tx: ReadTx,
    selection: Sequence[str],
    memory_type: str | None,
    limit: int,
    offset: int = 0,
) -> list[dict[str, Any]]:
    ids = tx.scopes.ids(selection)
    out = []
    for row in tx.memories.page(list(ids.values()), memory_type or None, limit, offset):
        memory = row.as_dict()
        memory["scopes"] = tx.scopes.of_memory(row.id)
        out.append(memory)
    return out


def visible_counts(tx: ReadTx, selection: Sequence[str]) -> dict[str, int]:
    """`counts` of what a reader of the scopes ``selection`` sees: rows linked to one of
    them or to none (a session whose grant does not cover the whole store). The recall
    log, which records every session's queries, is not counted (0)."""
    return tx.memories.visible_counts(list(tx.scopes.ids(selection).values())).as_dict()


def counts(tx: ReadTx) -> dict[str, int]:
    return tx.memories.counts().as_dict()
