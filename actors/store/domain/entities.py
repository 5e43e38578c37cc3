"""Entities and the directed relations between them: validation, lookup, upsert.

An entity is identified by its name exactly (case and spaces count, as in the
reference servers: ``Alice`` and ``alice`` are two entities), a relation by
(source, type, target). The memory tools (``remember``, ``relate``, ``graph``)
find an entity by a name forgivingly (`match_entity`): the one named exactly so,
else the only one whose name differs in case or spacing alone, else, when there
are several, an error listing them. Rows shared with a scope this server may not
write keep their kind and metadata (see `ownership`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ....protocol.errors import BadArgument
from ..interfaces import ReadTx, StoreTx
from ..interfaces.graph import View
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


MAX_CANDIDATES = 10  # names listed when a name matches several entities
EVERYTHING = View((), (), True)  # no scope filter: a relation is its (source, type, target)


def match_entity(tx: ReadTx, name: str) -> tuple[int, str, str] | None:
    """(id, name, kind) of the entity ``name`` means to a memory tool: the one named
    exactly so, else the only one whose name differs from it in case or spacing
    alone (`documents.canonical_name`); None when there is none.

    Error handling: several such entities and none named exactly raise
    `BadArgument` listing them (the first `MAX_CANDIDATES`).
    """
    graph = tx.graph
    found = graph.entity_named(name)
    if found is not None:
        return found.id, found.name, found.kind
    rows = graph.entities_canonical(canonical_name(name), MAX_CANDIDATES + 1)
    if len(rows) > 1:
        shown = ", ".join(repr(r.name) for r in rows[:MAX_CANDIDATES])
        more = " ..." if len(rows) > MAX_CANDIDATES else ""
        raise BadArgument(
            f"entity {name!r}: no entity has exactly this name, and these differ from it only "
            f"in case or spacing: {shown}{more}; names are case-sensitive: give one exactly"
        )
    return (rows[0].id, rows[0].name, rows[0].kind) if rows else None


def find_entity(tx: StoreTx, name: str) -> dict[str, object] | None:
    """`match_entity` as ``{id, name, kind}``."""
    row = match_entity(tx, name)
    return {"id": row[0], "name": row[1], "kind": row[2]} if row else None


def upsert_entity(
    tx: StoreTx,
    spec: EntitySpec,
    scope_ids_: Sequence[int],
    ts: float,
    own: Ownership,
    warnings: list[str],
) -> tuple[int, bool]:
    """Create or reuse the entity and link it to ``scope_ids_``. Returns (id, created).

    The entity is `match_entity`'s (an existing one keeps its name), else a new
    one named ``spec.name``. Its generic kind (``entity``) is refined by a
    specific one when the entity is owned here; an entity shared with a scope
    this server may not write keeps its kind, and a different kind asked for is
    reported in ``warnings`` (see `ownership`). Error handling: `match_entity`'s.
    """
    graph = tx.graph_writes
    row = match_entity(tx, spec.name)
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
                graph.set_kind(entity_id, spec.kind, ts)
    else:
        entity_id = graph.create_entity(spec.name, canonical_name(spec.name), spec.kind, ts)
        created = True
    graph.link("entity", entity_id, scope_ids_)
    return entity_id, created


def link_scopes(
    tx: StoreTx,
    kind: Literal["entity", "relation"],
    row_id: int,
    scope_ids_: Sequence[int],
) -> None:
    """Link an entity or relation row to each of ``scope_ids_`` (already linked ones stay)."""
    tx.graph_writes.link(kind, row_id, scope_ids_)


def relation_label(tx: ReadTx, source_id: int, relation_type: str, target_id: int) -> str:
    names = {e.id: e.name for e in tx.graph.entities_by_ids([source_id, target_id])}
    return f"relation {names.get(source_id)!r} -[{relation_type}]-> {names.get(target_id)!r}"


def upsert_relation(
    tx: StoreTx,
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
    graph = tx.graph_writes
    found = tx.graph.relation(source_id, relation_type, target_id, EVERYTHING)
    if found is not None:
        relation_id = found.id
        created = False
        stored = json.loads(tx.graph.relation_metadata(relation_id) or "{}")
        if not isinstance(stored, dict):  # an imported row may hold any JSON
            stored = {}
        merged = {**stored, **(metadata or {})}
        if merged != stored:
            foreign = own.foreign("relation", relation_id)
            if foreign:
                label = relation_label(tx, source_id, relation_type, target_id)
                if warnings is None:
                    raise own.refusal(label, "change its metadata", foreign)
                shown = json.dumps(stored, sort_keys=True)
                asked = json.dumps(merged, sort_keys=True)
                warnings.append(own.kept(label, "metadata", shown, asked, foreign))
            else:
                text = json.dumps(merged, sort_keys=True)
                limits.check_metadata_text(text, "merged metadata")
                graph.set_relation_metadata(relation_id, text)
    else:
        text = json.dumps(metadata or {}, sort_keys=True)
        relation_id = graph.create_relation(source_id, target_id, relation_type, text, ts)
        created = True
    graph.link("relation", relation_id, scope_ids_)
    return relation_id, created


def missing_vectors(
    tx: ReadTx, entities: Sequence[EntitySpec], relations: Sequence[RelationSpec]
) -> tuple[set[str], set[tuple[str, str, str]]]:
    """Which entities (by the name given) and relations (by the triple of names given)
    have no vector yet; names are matched as a write will (`match_entity`)."""
    graph = tx.graph

    def has_vector(kind: Literal["entity", "relation"], item: int) -> bool:
        return not graph.without_vectors(kind, [item])

    ent_missing: set[str] = set()
    for spec in entities:
        found = match_entity(tx, spec.name)
        if found is None or not has_vector("entity", found[0]):
            ent_missing.add(spec.name)
    rel_missing: set[tuple[str, str, str]] = set()
    for rel in relations:
        source, target = match_entity(tx, rel.source.name), match_entity(tx, rel.target.name)
        row = None
        if source is not None and target is not None:
            row = graph.relation(source[0], rel.relation, target[0], EVERYTHING)
        if row is None or not has_vector("relation", row.id):
            rel_missing.add((rel.source.name, rel.relation, rel.target.name))
    return ent_missing, rel_missing
