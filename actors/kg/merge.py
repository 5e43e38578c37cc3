"""``merge_entities``: fold entities into one, in named steps on a `Writer`.

Every check (the sources exist, none is the target, each source and a
retyped target is owned here) runs before anything is written.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from ...protocol.errors import BadArgument
from ..store import ops
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
    conn = w.conn
    have = {c for _, c in observations_of(conn, w.sc, [tgt.id])[tgt.id]}
    merged_ids = {s.id for s in srcs} | {tgt.id}
    moved = Moved()
    for s in srcs:
        _move_observations(w, s, tgt, have, moved)
        conn.execute(
            "INSERT OR IGNORE INTO entity_scopes (entity_id, scope_id) SELECT ?, scope_id FROM entity_scopes WHERE entity_id = ?",
            (tgt.id, s.id),
        )
        _repoint_relations(w, s, tgt, merged_ids, moved)
        conn.execute("DELETE FROM entities WHERE id = ?", (s.id,))
        w.change("entity", s.id, deleted=True)
    w.touch([tgt.id])
    w.change("entity", tgt.id)
    return {
        "target": full_entity(conn, w.sc, tgt),
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
    found = resolve(w.conn, w.sc, sources)
    require(w.conn, w.sc, found, sources, "merge_entities")
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
    tgt = resolve(w.conn, w.sc, [target], visible_only=False).get(target)
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
    conn = w.conn
    for mid, content in observations_of(conn, w.sc, [s.id])[s.id]:
        if content in have:
            w.drop_observation(mid, s.id)
            moved.duplicate_observations += 1
        else:
            have.add(content)
            moved.observations += 1
    links = [
        r[0]
        for r in conn.execute(
            "SELECT memory_id FROM memory_entities WHERE entity_id = ?", (s.id,)
        ).fetchall()
    ]
    conn.executemany(
        "INSERT OR IGNORE INTO memory_entities (memory_id, entity_id) VALUES (?, ?)",
        [(mid, tgt.id) for mid in links],
    )
    conn.execute("DELETE FROM memory_entities WHERE entity_id = ?", (s.id,))
    for mid in links:
        w.change("memory", mid)


def _repoint_relations(w: Writer, s: Ent, tgt: Ent, merged_ids: set[int], moved: Moved) -> None:
    """Re-point the source's relations at the target: a self-loop between merged entities is
    dropped, a duplicate of an existing relation folded into it."""
    conn = w.conn
    for rid, src_id, rtype, tgt_id in conn.execute(
        "SELECT id, source_id, relation_type, target_id FROM relations WHERE source_id = ? OR target_id = ? ORDER BY id",
        (s.id, s.id),
    ).fetchall():
        new_src = tgt.id if src_id == s.id else src_id
        new_tgt = tgt.id if tgt_id == s.id else tgt_id
        if new_src == new_tgt and src_id != tgt_id and {src_id, tgt_id} <= merged_ids:
            conn.execute("DELETE FROM relations WHERE id = ?", (rid,))
            w.change("relation", rid, deleted=True)
            moved.dropped_relations += 1
            continue
        same = conn.execute(
            "SELECT id FROM relations WHERE source_id = ? AND relation_type = ? AND target_id = ?",
            (new_src, rtype, new_tgt),
        ).fetchone()
        if same is not None:
            _fold_relation(conn, rid, same[0])
            w.change("relation", rid, deleted=True)
            w.change("relation", same[0])
            moved.dropped_relations += 1
        else:
            conn.execute(
                "UPDATE relations SET source_id = ?, target_id = ? WHERE id = ?",
                (new_src, new_tgt, rid),
            )
            ops.drop_vector(conn, "relation", rid)  # its document names the old entity
            w.change("relation", rid)
            moved.relations += 1


def _fold_relation(conn: sqlite3.Connection, rid: int, into: int) -> None:
    """Give relation ``into`` the memories and scopes of ``rid``, then delete ``rid``."""
    for table, col in (("memory_relations", "memory_id"), ("relation_scopes", "scope_id")):
        conn.execute(
            f"INSERT OR IGNORE INTO {table} ({col}, relation_id) SELECT {col}, ? FROM {table} WHERE relation_id = ?",
            (into, rid),
        )
    conn.execute("DELETE FROM relations WHERE id = ?", (rid,))
