"""The graph's write operations: functions of a `Writer`, inside the caller's transaction.

Each checks the whole batch (existence, ownership) before it writes, so a
refused call changes nothing; ``merge_entities`` is in `merge`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .lookup import Ent, observation_texts, observations_of, require, resolve
from .records import JsonObject, relation_out
from .writer import Writer


@dataclass
class EntityIn:
    name: str
    entityType: str | None
    observations: list[str]


def create_entities(w: Writer, items: Sequence[EntityIn], upsert: bool = False) -> list[JsonObject]:
    """Create the entities not visible yet (one batch lookup); with ``upsert`` update the others.

    create_entities returns the newly created entities (as the reference
    server); upsert_entities returns one record per input with ``created`` and
    the observations it added.

    Ownership (``store.domain.ownership``): an existing entity shared with a scope
    this server may not write keeps its type. create_entities links it and
    adds a warning when another type was given; upsert_entities refuses the
    whole call when it would change that type, before anything is written.
    """
    tool = "upsert_entities" if upsert else "create_entities"
    found = resolve(w.tx, w.sc, [e.name for e in items], visible_only=False)
    if upsert:
        _refuse_shared_type_changes(w, items, found, tool)
    known = observation_texts(w.tx, w.sc, [e.id for e in found.values() if e.visible])
    out: list[JsonObject] = []
    seen: set[str] = set()
    w.start_batch()
    for i, item in enumerate(items):
        placed = _place_entity(w, item, found, seen, upsert, f"{tool}: entities[{i}]")
        if placed is None:
            continue
        ent, created = placed
        if upsert and not created and item.entityType is not None and item.entityType != ent.kind:
            w.set_type(ent, item.entityType)  # owned here: checked for the whole batch above
            w.change("entity", ent.id)
        have = known.setdefault(ent.id, set())
        added = w.add_new_observations(
            ent.id, item.observations, have, repeats=created and not upsert
        )
        if upsert:
            out.append(
                {
                    "name": ent.name,
                    "entityType": ent.kind,
                    "created": created,
                    "addedObservations": added,
                }
            )
        else:
            out.append({"name": ent.name, "entityType": ent.kind, "observations": added})
    w.flush()
    return out


def _refuse_shared_type_changes(
    w: Writer, items: Sequence[EntityIn], found: dict[str, Ent], tool: str
) -> None:
    """Error handling: `ownership.SharedRow` when an upsert would retype a shared entity."""
    for i, item in enumerate(items):
        ent = found.get(item.name)
        if ent is not None and item.entityType is not None and item.entityType != ent.kind:
            w.own.require(
                "entity", ent.id, f"entity {ent.name!r}",
                f"change its entityType from `{ent.kind}` to `{item.entityType}`",
                f"{tool}: entities[{i}]",
            )  # fmt: skip


def _place_entity(
    w: Writer, item: EntityIn, found: dict[str, Ent], seen: set[str], upsert: bool, where: str
) -> tuple[Ent, bool] | None:
    """The entity ``item`` writes to and whether this call created it (or linked it here);
    None when create_entities skips it (already there, or named twice)."""
    name = item.name
    ent = found.get(name)
    created = False
    if name in seen:
        if not upsert:
            return None  # the same name twice in one call: the first wins
    elif ent is None:
        kind = item.entityType if item.entityType is not None else "entity"
        ent = found[name] = w.create_entity(name, kind)
        created = True
    elif not ent.visible:
        # Known in another scope only: now part of this one too, its type kept.
        w.link_entity(ent.id, None if upsert else item.entityType, where)
        ent.visible = True
        w.change("entity", ent.id)
        created = True
    elif not upsert:
        if item.entityType is not None:
            w.note_kept_type(ent.id, item.entityType, where)
        return None  # already there: skipped, as the reference server does
    seen.add(name)
    assert ent is not None
    return ent, created


def add_observations(w: Writer, items: Sequence[tuple[str, list[str]]]) -> list[JsonObject]:
    tx, sc = w.tx, w.sc
    found = resolve(tx, sc, [name for name, _ in items])
    require(tx, sc, found, [name for name, _ in items], "add_observations")
    ents = {found[name].id for name, _ in items}
    known = observation_texts(tx, sc, list(ents))
    results: list[JsonObject] = []
    for name, contents in items:
        ent = found[name]
        added = w.add_new_observations(ent.id, contents, known[ent.id])
        results.append({"entityName": ent.name, "addedObservations": added})
    w.touch(ents)
    return results


def create_relations(w: Writer, items: Sequence[tuple[str, str, str]]) -> list[dict[str, str]]:
    tx, sc = w.tx, w.sc
    found = resolve(tx, sc, [n for s, _, t in items for n in (s, t)])
    require(tx, sc, found, [n for s, _, t in items for n in (s, t)], "create_relations")
    out = []
    seen: set[tuple[int, str, int]] = set()
    for src, rtype, tgt in items:
        s, t = found[src], found[tgt]
        key = (s.id, rtype, t.id)
        if key in seen:
            continue
        seen.add(key)
        row = tx.graph.relation(s.id, rtype, t.id, sc.ids)
        if row is not None and row.visible:
            continue  # already there
        if row is None:
            rid = tx.graph_writes.create_relation(s.id, t.id, rtype, "{}", w.ts)
        else:
            rid = row.id
        tx.graph_writes.link("relation", rid, [w.scope_id])
        w.change("relation", rid)
        out.append(relation_out(s.name, rtype, t.name))
    return out


def delete_entities(w: Writer, names: Sequence[str]) -> int:
    """Delete the visible entities named (unknown names are ignored), with their relations.

    An entity owned here (``store.domain.ownership``) is deleted with its
    observations and relations. A shared one loses only this server's part:
    its observations and relations owned here are deleted, its shared
    relations and itself are unlinked from the writable scopes (`release`),
    and observations of other scopes stay.
    """
    tx, sc = w.tx, w.sc
    found = resolve(tx, sc, names)
    for ent in found.values():
        # Owned: then all its observations and relations are owned too.
        owned = w.own.owned("entity", ent.id)
        for mid, _ in observations_of(tx, sc, [ent.id])[ent.id]:
            if owned or w.own.owned("memory", mid):
                w.drop_observation(mid, ent.id)
        rels = tx.graph_edges.relation_ids_touching(ent.id, sc.ids)
        if owned:
            _delete_owned_entity(w, ent.id, rels)
        else:
            for rid in rels:
                w.drop_relation(rid)
            w.own.release("entity", ent.id)
            w.change("entity", ent.id)
    return len(found)


def _delete_owned_entity(w: Writer, eid: int, relations: list[int]) -> None:
    """Delete an entity owned here; its relations go with it, its memories lose their link."""
    for rid in relations:
        w.change("relation", rid, deleted=True)
    for mid in w.tx.graph_writes.linked_memories(eid):
        w.change("memory", mid)  # loses its link
    w.tx.graph_writes.delete_entity(eid)  # cascades relations
    w.change("entity", eid, deleted=True)


def delete_observations(w: Writer, items: Sequence[tuple[str, list[str]]]) -> int:
    """Delete the named observations of visible entities (unknown ones are ignored).

    An observation shared with a scope this server may not write (a memory
    of another repository that is also ``global``) refuses the whole call
    before anything is deleted (``store.domain.ownership``).
    """
    tx, sc = w.tx, w.sc
    found = resolve(tx, sc, [name for name, _ in items])
    chosen: dict[tuple[int, int], None] = {}  # (memory id, entity id), once each
    for i, (name, contents) in enumerate(items):
        ent = found.get(name)
        if ent is None:
            continue  # as the reference server: unknown entities are ignored
        wanted = set(contents)
        for mid, content in observations_of(tx, sc, [ent.id])[ent.id]:
            if content in wanted:
                w.own.require(
                    "memory", mid, f"the observation {_short(content)} of entity {ent.name!r}",
                    "delete it", f"delete_observations: deletions[{i}]",
                )  # fmt: skip
                chosen[(mid, ent.id)] = None
    for mid, eid in chosen:
        w.drop_observation(mid, eid)
    w.touch([eid for _, eid in chosen])
    return len(chosen)


def _short(text: str, width: int = 60) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= width else flat[: width - 1] + "…")


def delete_relations(w: Writer, items: Sequence[tuple[str, str, str]]) -> int:
    tx, sc = w.tx, w.sc
    found = resolve(tx, sc, [n for s, _, t in items for n in (s, t)])
    removed = 0
    for src, rtype, tgt in items:
        s, t = found.get(src), found.get(tgt)
        if s is None or t is None:
            continue
        row = tx.graph.relation(s.id, rtype, t.id, sc.ids)
        if row is not None and row.visible:
            w.drop_relation(row.id)
            removed += 1
    return removed


def compact(w: Writer) -> JsonObject:
    """Drop repeated observations of an entity (keeping the oldest) and optimize the FTS indexes.

    Only copies owned here are dropped: one shared with a scope this server
    may not write stays (``store.domain.ownership``).
    """
    tx, sc = w.tx, w.sc
    removed = 0
    for eid, ids in tx.graph_writes.duplicate_observations(sc.ids):
        for mid in ids[1:]:
            # another repository's copy stays (store.domain.ownership)
            if w.own.owned("memory", mid):
                w.drop_observation(mid, eid)
                removed += 1
    # The text indexes compacted (`FullText.optimize_indexes`: on PostgreSQL only those this
    # role owns; an agents' role leaves them to autovacuum: docs/operations.md).
    indexes = tx.fulltext.optimize_indexes()
    return {"duplicateObservationsRemoved": removed, "indexesOptimized": indexes}
