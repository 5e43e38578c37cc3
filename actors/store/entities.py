"""Entities and the directed relations between them: validation, lookup, upsert.

An entity is identified by its canonical name (`documents.canonical_name`), a
relation by (source, type, target). Rows shared with a scope this server may
not write keep their kind and metadata (see `ownership`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ...protocol.errors import BadArgument
from . import limits
from .documents import canonical_name, clean_name
from .ownership import Ownership


@dataclass
class EntitySpec:
    name: str
    kind: str = "entity"


@dataclass
class RelationSpec:
    source: EntitySpec
    relation: str
    target: EntitySpec
    metadata: dict[str, object] | None = None


def validate_entity(name: str, kind: str = "entity") -> EntitySpec:
    clean = clean_name(name)
    if not clean:
        raise BadArgument("an entity name must not be empty")
    kind_clean = clean_name(kind) or "entity"
    return EntitySpec(clean, kind_clean)


def validate_relation_type(relation: str) -> str:
    clean = clean_name(relation)
    if not clean:
        raise BadArgument("a relation type must not be empty (for example `depends_on`)")
    return clean


def find_entity(conn: sqlite3.Connection, name: str) -> dict[str, object] | None:
    row = conn.execute(
        "SELECT id, name, kind FROM entities WHERE canonical_name = ?", (canonical_name(name),)
    ).fetchone()
    return {"id": row[0], "name": row[1], "kind": row[2]} if row else None


def upsert_entity(
    conn: sqlite3.Connection,
    spec: EntitySpec,
    scope_ids_: Sequence[int],
    ts: float,
    own: Ownership,
    warnings: list[str],
) -> tuple[int, bool]:
    """Create or reuse the entity and link it to ``scope_ids_``. Returns (id, created).

    An existing entity keeps its name. Its generic kind (``entity``) is
    refined by a specific one when the entity is owned here; an entity shared
    with a scope this server may not write keeps its kind, and a different
    kind asked for is reported in ``warnings`` (see `ownership`).
    """
    canon = canonical_name(spec.name)
    row = conn.execute(
        "SELECT id, name, kind FROM entities WHERE canonical_name = ?", (canon,)
    ).fetchone()
    if row:
        entity_id, name, kind = row
        created = False
        if spec.kind != "entity" and spec.kind != kind:
            foreign = own.foreign("entity", entity_id)
            if foreign:
                warnings.append(
                    own.kept(f"entity {name!r}", "kind", f"`{kind}`", f"`{spec.kind}`", foreign)
                )
            elif kind == "entity":
                conn.execute(
                    "UPDATE entities SET kind = ?, updated_at = ? WHERE id = ?",
                    (spec.kind, ts, entity_id),
                )
    else:
        entity_id = conn.execute(
            "INSERT INTO entities (name, canonical_name, kind, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
            (spec.name, canon, spec.kind, ts, ts),
        ).lastrowid
        created = True
    link_scopes(conn, "entity", entity_id, scope_ids_)
    return entity_id, created


def link_scopes(
    conn: sqlite3.Connection,
    kind: Literal["entity", "relation"],
    row_id: int,
    scope_ids_: Sequence[int],
) -> None:
    """Link an entity or relation row to each of ``scope_ids_`` (already linked ones stay)."""
    conn.executemany(
        f"INSERT OR IGNORE INTO {kind}_scopes ({kind}_id, scope_id) VALUES (?, ?)",
        [(row_id, sid) for sid in scope_ids_],
    )


def relation_label(
    conn: sqlite3.Connection, source_id: int, relation_type: str, target_id: int
) -> str:
    names = dict(
        conn.execute("SELECT id, name FROM entities WHERE id IN (?, ?)", (source_id, target_id))
    )
    return f"relation {names.get(source_id)!r} -[{relation_type}]-> {names.get(target_id)!r}"


def upsert_relation(
    conn: sqlite3.Connection,
    source_id: int,
    relation_type: str,
    target_id: int,
    metadata: dict[str, object] | None,
    scope_ids_: Sequence[int],
    ts: float,
    own: Ownership,
    warnings: list[str] | None,
) -> tuple[int, bool]:
    """Create or reuse the directed relation and link it to ``scope_ids_``. Returns (id, created).

    Given metadata is merged into an existing relation's when it is owned
    here. On a relation shared with a scope this server may not write, a
    metadata change is refused (`ownership.SharedRow`, before any change of
    the relation) or, with a ``warnings`` list, kept and reported there.
    """
    row = conn.execute(
        "SELECT id, metadata FROM relations WHERE source_id = ? AND relation_type = ? AND target_id = ?",
        (source_id, relation_type, target_id),
    ).fetchone()
    if row:
        relation_id, old = row
        created = False
        stored = json.loads(old or "{}")
        if not isinstance(stored, dict):  # an imported row may hold any JSON
            stored = {}
        merged = {**stored, **(metadata or {})}
        if merged != stored:
            foreign = own.foreign("relation", relation_id)
            if foreign:
                label = relation_label(conn, source_id, relation_type, target_id)
                if warnings is None:
                    raise own.refusal(label, "change its metadata", foreign)
                shown = json.dumps(stored, sort_keys=True)
                asked = json.dumps(merged, sort_keys=True)
                warnings.append(own.kept(label, "metadata", shown, asked, foreign))
            else:
                text = json.dumps(merged, sort_keys=True)
                limits.check_metadata_text(text, "merged metadata")
                conn.execute("UPDATE relations SET metadata = ? WHERE id = ?", (text, relation_id))
    else:
        relation_id = conn.execute(
            "INSERT INTO relations (source_id, target_id, relation_type, metadata, created_at) VALUES (?, ?, ?, ?, ?)",
            (source_id, target_id, relation_type, json.dumps(metadata or {}, sort_keys=True), ts),
        ).lastrowid
        created = True
    link_scopes(conn, "relation", relation_id, scope_ids_)
    return relation_id, created


def missing_vectors(
    conn: sqlite3.Connection, entities: Sequence[EntitySpec], relations: Sequence[RelationSpec]
) -> tuple[set[str], set[tuple[str, str, str]]]:
    """Which entities (canonical names) and relations (canonical triples) have no vector yet."""
    ent_missing: set[str] = set()
    for spec in entities:
        canon = canonical_name(spec.name)
        row = conn.execute(
            "SELECT 1 FROM entities e JOIN vectors v ON v.kind = 'entity' AND v.item_id = e.id WHERE e.canonical_name = ?",
            (canon,),
        ).fetchone()
        if row is None:
            ent_missing.add(canon)
    rel_missing: set[tuple[str, str, str]] = set()
    for rel in relations:
        key = (canonical_name(rel.source.name), rel.relation, canonical_name(rel.target.name))
        row = conn.execute(
            """SELECT 1 FROM relations r JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id
               JOIN vectors v ON v.kind = 'relation' AND v.item_id = r.id
               WHERE s.canonical_name = ? AND r.relation_type = ? AND t.canonical_name = ?""",
            key,
        ).fetchone()
        if row is None:
            rel_missing.add(key)
    return ent_missing, rel_missing
