"""``merge_entities``: fold entities into one, in named steps on a `Writer`.

Every check (the sources exist, none is the target, each source and a
retyped target is owned here) runs before anything is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...protocol.errors import BadArgument
from .lookup import Ent, observations_of, require, resolve
from .records import JsonObject, full_entity
from .writer import Writer


@dataclass
class Moved:
    """What a merge moved and dropped, for its answer."""

    observations: int = 0
    duplicate_observations: int = 0
    relations: int = 0
    dropped_relations: int = 0


def merge_entities(
    w: Writer, sources: Sequence[str], target: str, entity_type: str | None
) -> JsonObject:
    """Fold ``sources`` into ``target``: observations (deduplicated), memory links, relations, scopes.

    Relations are re-pointed at the target; one that would duplicate an
    existing relation is folded into it, one that would become a self-loop
    between merged entities is dropped. The sources are deleted. The target is
    created (with ``entity_type`` or the first source's type) if it does not exist.
    """
    srcs = _sources(w, sources, target)
    tgt = _target(w, target, entity_type, srcs[0].kind)
    graph, merge = w.tx.graph_writes, w.tx.graph_merge
    have = {c for _, c in observations_of(w.tx, w.sc, [tgt.id])[tgt.id]}
    merged_ids = {s.id for s in srcs} | {tgt.id}
    moved = Moved()
    for s in srcs:
        _move_observations(w, s, tgt, have, moved)
        merge.copy_scopes(s.id, tgt.id)
        _repoint_relations(w, s, tgt, merged_ids, moved)
        graph.delete_entity(s.id)
        w.change("entity", s.id, deleted=True)
    w.touch([tgt.id])
    w.change("entity", tgt.id)
    return {
        "target": full_entity(w.tx, w.sc, tgt),
        "merged": [s.name for s in srcs],
        "observationsMoved": moved.observations,
        "duplicateObservationsDropped": moved.duplicate_observations,
        "relationsMoved": moved.relations,
        "relationsDropped": moved.dropped_relations,
    }


def _sources(w: Writer, sources: Sequence[str], target: str) -> list[Ent]:
    """The source entities, once each.

    Error handling: `NotFound` for an unknown source, `BadArgument` when the
    target is a source, `ownership.SharedRow` for a source shared with a scope
    this server may not write (the sources are renamed into the target and
    deleted, so each must be owned here).
    """
    found = resolve(w.tx, w.sc, sources)
    require(w.tx, w.sc, found, sources, "merge_entities")
    srcs = [found[s] for s in dict.fromkeys(sources)]
    if any(s.name == target for s in srcs):
        raise BadArgument(
            "merge_entities: the target is also listed in `sources`; list only the entities to fold into it"
        )
    for s in srcs:
        w.own.require(
            "entity", s.id, f"entity {s.name!r}", f"merge entity {s.name!r} into {target!r}",
            "merge_entities",
        )  # fmt: skip
    return srcs


def _target(w: Writer, target: str, entity_type: str | None, default_type: str) -> Ent:
    """The target entity: found, linked into the current scope, or created; retyped when asked.

    Error handling: `ownership.SharedRow` (before any change) when a shared
    target would change type: a shared target only gains this server's rows.
    """
    tgt = resolve(w.tx, w.sc, [target], visible_only=False).get(target)
    if tgt is not None and entity_type is not None and entity_type != tgt.kind:
        w.own.require(
            "entity", tgt.id, f"entity {tgt.name!r}",
            f"change its entityType from `{tgt.kind}` to `{entity_type}`", "merge_entities",
        )  # fmt: skip
    if tgt is None:
        tgt = w.create_entity(target, entity_type if entity_type is not None else default_type)
    elif not tgt.visible:
        w.link_entity(tgt.id)  # known in another scope only: now part of this one too
    if entity_type is not None and entity_type != tgt.kind:
        w.set_type(tgt, entity_type)
    return tgt


def _move_observations(w: Writer, s: Ent, tgt: Ent, have: set[str], moved: Moved) -> None:
    """Move the source's memory links to the target, dropping observations the target has."""
    for mid, content in observations_of(w.tx, w.sc, [s.id])[s.id]:
        if content in have:
            w.drop_observation(mid, s.id)
            moved.duplicate_observations += 1
        else:
            have.add(content)
            moved.observations += 1
    for mid in w.tx.graph_merge.move_memories(s.id, tgt.id):
        w.change("memory", mid)


def _repoint_relations(w: Writer, s: Ent, tgt: Ent, merged_ids: set[int], moved: Moved) -> None:
    """Re-point the source's relations at the target: a self-loop between merged entities is
    dropped, a duplicate of an existing relation folded into it."""
    graph, merge = w.tx.graph_writes, w.tx.graph_merge
    for edge in merge.all_edges_of(s.id):
        rid, src_id, rtype, tgt_id = edge.id, edge.source_id, edge.relation_type, edge.target_id
        new_src = tgt.id if src_id == s.id else src_id
        new_tgt = tgt.id if tgt_id == s.id else tgt_id
        if new_src == new_tgt and src_id != tgt_id and {src_id, tgt_id} <= merged_ids:
            graph.delete_relation(rid)
            w.change("relation", rid, deleted=True)
            moved.dropped_relations += 1
            continue
        same = w.tx.graph.relation(new_src, rtype, new_tgt, w.sc.ids)
        if same is not None:
            merge.fold_relation(rid, same.id)
            w.change("relation", rid, deleted=True)
            w.change("relation", same.id)
            moved.dropped_relations += 1
        else:
            merge.repoint_relation(rid, new_src, new_tgt)  # its vector goes: it names the old end
            w.change("relation", rid)
            moved.relations += 1
