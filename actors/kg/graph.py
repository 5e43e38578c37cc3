"""The knowledge graph's SQL operations: synchronous functions of a connection.

The graph lives in the memory store's tables: an entity is a row of
``entities`` (``kind`` is its entityType), a relation a row of ``relations``,
and an observation a memory of type ``observation`` linked to its entity
through ``memory_entities``. Each function runs inside the transaction its
caller opened (the StoreWriter for writes, the read pool for reads) and never
commits, so one tool call is one transaction.

Identity: entity names are matched the memtrio way, by ``canonical_name``
(casefolded, whitespace collapsed), and returned as first written.

Scopes (the memory tools' rules, see ``store.scopes``): reads see entities,
relations and observations of the selected scopes (current repository plus
``global``); writes go to the current scope. Who may change or delete a row
is ``store.ownership``'s rule, checked through the `Writer`: a row shared with
a scope this server may not write keeps its attributes (a change is refused
before anything is written, a link keeps them with a warning), and deleting a
shared entity or relation only unlinks the writable scopes, so another
repository's view is never changed.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...protocol.tools import ToolError
from ..store import ops
from ..store.limits import (  # noqa: F401 - the graph tools' checks, shared with import
    MAX_ITEMS,
    MAX_NAME_BYTES,
    MAX_OBSERVATION_BYTES,
    check_name,
    check_observation,
    check_relation_type,
    check_type,
)
from ..store.ops import Vec
from ..store.ownership import Ownership
from ..store.writer import Change

# Limits (the reference server's, see docs/knowledge-graph.md); the sizes are in store.limits.
MAX_SEARCH_LIMIT = 1000
MAX_NEIGHBOR_DEPTH = 16
MAX_PATH_DEPTH = 10
MAX_PATHS = 100
# find_all_paths gives up (truncated) after this many edge expansions.
MAX_PATH_EXPANSIONS = 200_000
SQL_CHUNK = 500
OBSERVATION = "observation"
OBS_TYPE_SQL = "m.memory_type = 'observation' COLLATE NOCASE"


def chunks(items: Sequence[Any], size: int = SQL_CHUNK) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def marks(n: int) -> str:
    return ",".join("?" * n)


# -- scope view -------------------------------------------------------------------


@dataclass
class View:
    """The scopes one call reads (``selection``) and may write (``writable``, ``current`` first)."""

    selection: list[str]
    writable: list[str]
    current: str


class Scoped:
    """SQL visibility filters of a `View`, resolved to scope ids inside the transaction."""

    def __init__(self, conn: sqlite3.Connection, view: View) -> None:
        self.view = view
        ids = ops.scope_ids(conn, [*view.selection, *view.writable])
        self.read_ids = sorted({ids[s] for s in view.selection if s in ids})
        self.write_ids = sorted({ids[s] for s in view.writable if s in ids})
        self._inner = ",".join(str(i) for i in self.read_ids) or "NULL"

    def _vis(self, table: str, col: str, alias: str) -> str:
        return (
            f"(EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id AND x.scope_id IN ({self._inner}))"
            f" OR NOT EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id))"
        )

    def entity(self, alias: str = "e") -> str:
        return self._vis("entity_scopes", "entity_id", alias)

    def relation(self, alias: str = "r") -> str:
        return self._vis("relation_scopes", "relation_id", alias)

    def memory(self, alias: str = "m") -> str:
        return self._vis("memory_scopes", "memory_id", alias)


@dataclass
class Ent:
    id: int
    name: str
    kind: str
    canonical: str
    visible: bool = True


def resolve(
    conn: sqlite3.Connection, sc: Scoped, names: Iterable[str], visible_only: bool = True
) -> dict[str, Ent]:
    """Entities by canonical name (one query per chunk); invisible ones only if asked."""
    canon = list(dict.fromkeys(ops.canonical_name(n) for n in names))
    out: dict[str, Ent] = {}
    for part in chunks(canon):
        for eid, name, kind, cname, vis in conn.execute(
            f"SELECT e.id, e.name, e.kind, e.canonical_name, {sc.entity()} FROM entities e "
            f"WHERE e.canonical_name IN ({marks(len(part))})",
            list(part),
        ):
            if vis or not visible_only:
                out[cname] = Ent(eid, name, kind, cname, bool(vis))
    return out


def entity_rows(conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, Ent]:
    out: dict[int, Ent] = {}
    for part in chunks(list(ids)):
        for eid, name, kind, cname in conn.execute(
            f"SELECT id, name, kind, canonical_name FROM entities WHERE id IN ({marks(len(part))})",
            list(part),
        ):
            out[eid] = Ent(eid, name, kind, cname)
    return out


def observations_of(
    conn: sqlite3.Connection, sc: Scoped, ids: Sequence[int]
) -> dict[int, list[tuple[int, str]]]:
    """Visible observations (memory id, content) of each entity, oldest first."""
    out: dict[int, list[tuple[int, str]]] = {i: [] for i in ids}
    for part in chunks(list(ids)):
        for eid, mid, content in conn.execute(
            f"""SELECT me.entity_id, m.id, m.content FROM memory_entities me JOIN memories m ON m.id = me.memory_id
                WHERE me.entity_id IN ({marks(len(part))}) AND {OBS_TYPE_SQL} AND {sc.memory()}
                ORDER BY me.entity_id, m.id""",
            list(part),
        ):
            out[eid].append((mid, content))
    return out


def entity_out(
    ent: Ent, mode: str, obs: dict[int, list[tuple[int, str]]] | None = None
) -> dict[str, Any] | str:
    if mode == "names":
        return ent.name
    items = (obs or {}).get(ent.id, [])
    if mode == "summary":
        return {"name": ent.name, "entityType": ent.kind, "observationCount": len(items)}
    return {"name": ent.name, "entityType": ent.kind, "observations": [c for _, c in items]}


def entities_out(conn: sqlite3.Connection, sc: Scoped, ents: Sequence[Ent], mode: str) -> list[Any]:
    obs = observations_of(conn, sc, [e.id for e in ents]) if mode != "names" else {}
    return [entity_out(e, mode, obs) for e in ents]


def relation_out(src: str, rtype: str, tgt: str) -> dict[str, str]:
    return {"from": src, "to": tgt, "relationType": rtype}


def relations_touching(
    conn: sqlite3.Connection, sc: Scoped, ids: Sequence[int], sources_only: bool = False
) -> list[dict[str, str]]:
    """Visible relations with an endpoint (or, with ``sources_only``, the source) among ``ids``, by id."""
    rows: dict[int, tuple[str, str, str]] = {}
    conds = ["r.source_id"] if sources_only else ["r.source_id", "r.target_id"]
    for part in chunks(list(ids)):
        for cond in conds:
            for rid, s, t, g in conn.execute(
                f"""SELECT r.id, s.name, r.relation_type, t.name FROM relations r
                    JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id
                    WHERE {cond} IN ({marks(len(part))}) AND {sc.relation()}""",
                list(part),
            ):
                rows[rid] = (s, t, g)
    return [relation_out(*rows[rid]) for rid in sorted(rows)]


def page(total: int, offset: int, count: int) -> int | None:
    return offset + count if offset + count < total else None


# -- observations as memories ------------------------------------------------------


@dataclass
class Vectors:
    """Embeddings computed before the write: by observation text and by entity canonical name."""

    observations: dict[str, Vec] = field(default_factory=dict)
    entities: dict[str, Vec] = field(default_factory=dict)


class Writer:
    """One write call's state: the timestamp, the scope id written, the ownership rule,
    the changes and warnings to report."""

    def __init__(self, conn: sqlite3.Connection, view: View, vectors: Vectors | None) -> None:
        self.conn = conn
        self.view = view
        self.sc = Scoped(conn, view)
        self.ts = ops.now()
        self.scope_id = ops.ensure_scope(conn, view.current)
        if self.scope_id not in self.sc.write_ids:
            self.sc = Scoped(conn, view)  # the current scope was just created
        self.own = Ownership(conn, view.writable)
        self.vectors = vectors or Vectors()
        self.changes: list[Change] = []
        self.warnings: list[str] = []

    def change(self, kind: str, item: int, vec: Vec | None = None, deleted: bool = False) -> None:
        self.changes.append(ops._change(kind, item, vec, deleted))

    def add_observation(self, entity_id: int, content: str) -> int:
        conn = self.conn
        mid = conn.execute(
            "INSERT INTO memories (content, memory_type, importance, created_at, updated_at) VALUES (?, ?, 0.0, ?, ?)",
            (content, OBSERVATION, self.ts, self.ts),
        ).lastrowid
        conn.execute(
            "INSERT INTO memory_scopes (memory_id, scope_id) VALUES (?, ?)", (mid, self.scope_id)
        )
        conn.execute(
            "INSERT INTO memory_entities (memory_id, entity_id) VALUES (?, ?)", (mid, entity_id)
        )
        vec = self.vectors.observations.get(content)
        if vec is not None:
            ops.put_vector(conn, "memory", mid, vec)
        self.change("memory", mid, vec)
        return mid

    def create_entity(self, name: str, kind: str) -> Ent:
        canon = ops.canonical_name(name)
        eid = self.conn.execute(
            "INSERT INTO entities (name, canonical_name, kind, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
            (name, canon, kind, self.ts, self.ts),
        ).lastrowid
        self.link_entity(eid)
        vec = self.vectors.entities.get(canon)
        if vec is not None:
            ops.put_vector(self.conn, "entity", eid, vec)
        self.change("entity", eid, vec)
        return Ent(eid, name, kind, canon)

    def link_entity(self, eid: int, asked_type: str | None = None, where: str = "") -> None:
        """Link an existing entity into the current scope; its type stays.

        With ``asked_type`` (the type the caller gave), a different stored type
        of an entity shared with a scope this server may not write is reported
        in `warnings`.
        """
        if asked_type is not None:
            self.note_kept_type(eid, asked_type, where)
        self.conn.execute(
            "INSERT OR IGNORE INTO entity_scopes (entity_id, scope_id) VALUES (?, ?)",
            (eid, self.scope_id),
        )

    def note_kept_type(self, eid: int, asked_type: str, where: str = "") -> None:
        """Warn when a shared entity keeps a type other than ``asked_type``."""
        row = self.conn.execute("SELECT name, kind FROM entities WHERE id = ?", (eid,)).fetchone()
        if row is None or row[1] == asked_type:
            return
        foreign = self.own.foreign("entity", eid)
        if foreign:
            prefix = f"{where}: " if where else ""
            self.warnings.append(
                prefix
                + self.own.kept(
                    f"entity {row[0]!r}", "entityType", f"`{row[1]}`", f"`{asked_type}`", foreign
                )
            )

    def drop_observation(self, mid: int, entity_id: int) -> bool:
        """Remove an observation (a memory owned here) from an entity.

        The memory row is deleted when this entity is its only link; otherwise
        only the link goes. Returns True if deleted. Error handling: a memory
        shared with a scope this server may not write raises
        `ownership.SharedRow` (callers skip or refuse those first).
        """
        conn = self.conn
        self.own.require("memory", mid, f"observation {mid}", "delete it")
        others = conn.execute(
            "SELECT 1 FROM memory_entities WHERE memory_id = ? AND entity_id != ? LIMIT 1",
            (mid, entity_id),
        ).fetchone()
        if others is None:
            conn.execute("DELETE FROM memories WHERE id = ?", (mid,))
            self.change("memory", mid, deleted=True)
            return True
        conn.execute(
            "DELETE FROM memory_entities WHERE memory_id = ? AND entity_id = ?", (mid, entity_id)
        )
        self.change("memory", mid)
        return False

    def drop_relation(self, rid: int) -> None:
        """Delete a relation owned here; unlink a shared one from the writable scopes only."""
        conn = self.conn
        if self.own.owned("relation", rid):
            conn.execute("DELETE FROM relations WHERE id = ?", (rid,))
            self.change("relation", rid, deleted=True)
        else:
            self.own.release("relation", rid)
            self.change("relation", rid)

    def touch(self, ids: Iterable[int]) -> None:
        """Stamp ``updated_at`` of the entities owned here (a shared one's stays as it is)."""
        self.conn.executemany(
            "UPDATE entities SET updated_at = ? WHERE id = ?",
            [(self.ts, i) for i in set(ids) if self.own.owned("entity", i)],
        )


# -- write operations --------------------------------------------------------------


@dataclass
class EntityIn:
    name: str
    entityType: str | None
    observations: list[str]


def create_entities(w: Writer, items: Sequence[EntityIn], upsert: bool = False) -> list[Any]:
    """Create the entities not visible yet (one batch lookup); with ``upsert`` update the others.

    create_entities returns the newly created entities (as the reference
    server); upsert_entities returns one record per input with ``created`` and
    the observations it added.

    Ownership (``store.ownership``): an existing entity shared with a scope
    this server may not write keeps its type. create_entities links it and
    adds a warning when another type was given; upsert_entities refuses the
    whole call when it would change that type, before anything is written.
    """
    conn, sc = w.conn, w.sc
    tool = "upsert_entities" if upsert else "create_entities"
    found = resolve(conn, sc, [e.name for e in items], visible_only=False)
    if upsert:
        for i, item in enumerate(items):
            ent = found.get(ops.canonical_name(item.name))
            if ent is not None and item.entityType is not None and item.entityType != ent.kind:
                w.own.require(
                    "entity", ent.id, f"entity {ent.name!r}",
                    f"change its entityType from `{ent.kind}` to `{item.entityType}`",
                    f"{tool}: entities[{i}]",
                )  # fmt: skip
    existing_obs = observations_of(conn, sc, [e.id for e in found.values() if e.visible])
    known: dict[int, set[str]] = {eid: {c for _, c in v} for eid, v in existing_obs.items()}
    out: list[Any] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        canon = ops.canonical_name(item.name)
        kind = item.entityType if item.entityType is not None else "entity"
        where = f"{tool}: entities[{i}]"
        ent = found.get(canon)
        created = False
        if canon in seen:
            if not upsert:
                continue  # the same name twice in one call: the first wins
        elif ent is None:
            ent = w.create_entity(item.name, kind)
            found[canon] = ent
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
            continue  # already there: skipped, as the reference server does
        seen.add(canon)
        assert ent is not None
        if upsert and not created and item.entityType is not None and item.entityType != ent.kind:
            # Owned here: checked for the whole batch above.
            conn.execute(
                "UPDATE entities SET kind = ?, updated_at = ? WHERE id = ?",
                (item.entityType, w.ts, ent.id),
            )
            ent.kind = item.entityType
            w.change("entity", ent.id)
        have = known.setdefault(ent.id, set())
        added = []
        for content in item.observations:
            if upsert and content in have:
                continue
            if not created and content in have:
                continue
            w.add_observation(ent.id, content)
            have.add(content)
            added.append(content)
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
    return out


def require(found: dict[str, Ent], names: Iterable[str], what: str) -> None:
    missing = [n for n in dict.fromkeys(names) if ops.canonical_name(n) not in found]
    if missing:
        shown = ", ".join(repr(n) for n in missing[:10]) + (" ..." if len(missing) > 10 else "")
        raise ToolError(
            f"{what}: {len(missing)} entit{'y' if len(missing) == 1 else 'ies'} not found ({shown}); "
            "create them with create_entities first (nothing was changed)"
        )


def add_observations(w: Writer, items: Sequence[tuple[str, list[str]]]) -> list[dict[str, Any]]:
    conn, sc = w.conn, w.sc
    found = resolve(conn, sc, [name for name, _ in items])
    require(found, [name for name, _ in items], "add_observations")
    ents = {found[ops.canonical_name(name)].id for name, _ in items}
    known = {eid: {c for _, c in v} for eid, v in observations_of(conn, sc, list(ents)).items()}
    results = []
    for name, contents in items:
        ent = found[ops.canonical_name(name)]
        have = known[ent.id]
        added = []
        for content in contents:
            if content in have:
                continue
            w.add_observation(ent.id, content)
            have.add(content)
            added.append(content)
        results.append({"entityName": ent.name, "addedObservations": added})
    w.touch(ents)
    return results


def create_relations(w: Writer, items: Sequence[tuple[str, str, str]]) -> list[dict[str, str]]:
    conn, sc = w.conn, w.sc
    found = resolve(conn, sc, [n for s, _, t in items for n in (s, t)])
    require(found, [n for s, _, t in items for n in (s, t)], "create_relations")
    out = []
    seen: set[tuple[int, str, int]] = set()
    for src, rtype, tgt in items:
        s, t = found[ops.canonical_name(src)], found[ops.canonical_name(tgt)]
        key = (s.id, rtype, t.id)
        if key in seen:
            continue
        seen.add(key)
        row = conn.execute(
            f"SELECT r.id, {sc.relation()} FROM relations r WHERE r.source_id = ? AND r.relation_type = ? AND r.target_id = ?",
            key,
        ).fetchone()
        if row is not None and row[1]:
            continue  # already there
        if row is None:
            rid = conn.execute(
                "INSERT INTO relations (source_id, target_id, relation_type, metadata, created_at) VALUES (?, ?, ?, '{}', ?)",
                (s.id, t.id, rtype, w.ts),
            ).lastrowid
        else:
            rid = row[0]
        conn.execute(
            "INSERT OR IGNORE INTO relation_scopes (relation_id, scope_id) VALUES (?, ?)",
            (rid, w.scope_id),
        )
        w.change("relation", rid)
        out.append(relation_out(s.name, rtype, t.name))
    return out


def delete_entities(w: Writer, names: Sequence[str]) -> int:
    """Delete the visible entities named (unknown names are ignored), with their relations.

    An entity owned here (``store.ownership``) is deleted with its
    observations and relations. A shared one loses only this server's part:
    its observations and relations owned here are deleted, its shared
    relations and itself are unlinked from the writable scopes (`release`),
    and observations of other scopes stay.
    """
    conn, sc = w.conn, w.sc
    found = resolve(conn, sc, names)
    deleted = 0
    for ent in found.values():
        # Owned: then all its observations and relations are owned too.
        owned = w.own.owned("entity", ent.id)
        for mid, _ in observations_of(conn, sc, [ent.id])[ent.id]:
            if owned or w.own.owned("memory", mid):
                w.drop_observation(mid, ent.id)
        rels = [
            r[0]
            for r in conn.execute(
                f"SELECT r.id FROM relations r WHERE (r.source_id = ? OR r.target_id = ?) AND {sc.relation()}",
                (ent.id, ent.id),
            )
        ]
        if owned:
            for rid in rels:
                w.change("relation", rid, deleted=True)
            for (mid,) in conn.execute(
                "SELECT memory_id FROM memory_entities WHERE entity_id = ?", (ent.id,)
            ).fetchall():
                w.change("memory", mid)  # loses its link
            conn.execute("DELETE FROM entities WHERE id = ?", (ent.id,))  # cascades relations
            w.change("entity", ent.id, deleted=True)
        else:
            for rid in rels:
                w.drop_relation(rid)
            w.own.release("entity", ent.id)
            w.change("entity", ent.id)
        deleted += 1
    return deleted


def delete_observations(w: Writer, items: Sequence[tuple[str, list[str]]]) -> int:
    """Delete the named observations of visible entities (unknown ones are ignored).

    An observation shared with a scope this server may not write (a memory
    of another repository that is also ``global``) refuses the whole call
    before anything is deleted (``store.ownership``).
    """
    conn, sc = w.conn, w.sc
    found = resolve(conn, sc, [name for name, _ in items])
    chosen: dict[tuple[int, int], None] = {}  # (memory id, entity id), once each
    for i, (name, contents) in enumerate(items):
        ent = found.get(ops.canonical_name(name))
        if ent is None:
            continue  # as the reference server: unknown entities are ignored
        wanted = set(contents)
        for mid, content in observations_of(conn, sc, [ent.id])[ent.id]:
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
    conn, sc = w.conn, w.sc
    found = resolve(conn, sc, [n for s, _, t in items for n in (s, t)])
    removed = 0
    for src, rtype, tgt in items:
        s, t = found.get(ops.canonical_name(src)), found.get(ops.canonical_name(tgt))
        if s is None or t is None:
            continue
        row = conn.execute(
            f"SELECT r.id FROM relations r WHERE r.source_id = ? AND r.relation_type = ? AND r.target_id = ? AND {sc.relation()}",
            (s.id, rtype, t.id),
        ).fetchone()
        if row is not None:
            w.drop_relation(row[0])
            removed += 1
    return removed


def merge_entities(
    w: Writer, sources: Sequence[str], target: str, entity_type: str | None
) -> dict[str, Any]:
    """Fold ``sources`` into ``target``: observations (deduplicated), memory links, relations, scopes.

    Relations are re-pointed at the target; one that would duplicate an
    existing relation is folded into it, one that would become a self-loop
    between merged entities is dropped. The sources are deleted. The target is
    created (with ``entity_type`` or the first source's type) if it does not exist.
    """
    conn, sc = w.conn, w.sc
    found = resolve(conn, sc, sources)
    require(found, sources, "merge_entities")
    tcanon = ops.canonical_name(target)
    srcs = list({ops.canonical_name(s): found[ops.canonical_name(s)] for s in sources}.values())
    if any(s.canonical == tcanon for s in srcs):
        raise ToolError(
            "merge_entities: the target is also listed in `sources`; list only the entities to fold into it"
        )
    # Ownership (store.ownership), checked before anything changes: the sources are
    # renamed into the target and deleted, so each must be owned here; a shared
    # target only gains this server's rows, and keeps its type.
    for s in srcs:
        w.own.require(
            "entity", s.id, f"entity {s.name!r}", f"merge entity {s.name!r} into {target!r}",
            "merge_entities",
        )  # fmt: skip
    tgt = resolve(conn, sc, [target], visible_only=False).get(tcanon)
    if tgt is not None and entity_type is not None and entity_type != tgt.kind:
        w.own.require(
            "entity", tgt.id, f"entity {tgt.name!r}",
            f"change its entityType from `{tgt.kind}` to `{entity_type}`", "merge_entities",
        )  # fmt: skip
    if tgt is None:
        tgt = w.create_entity(target, entity_type if entity_type is not None else srcs[0].kind)
    elif not tgt.visible:
        w.link_entity(tgt.id)  # known in another scope only: now part of this one too
    if entity_type is not None and entity_type != tgt.kind:
        conn.execute(
            "UPDATE entities SET kind = ?, updated_at = ? WHERE id = ?", (entity_type, w.ts, tgt.id)
        )
        tgt.kind = entity_type
    have = {c for _, c in observations_of(conn, sc, [tgt.id])[tgt.id]}
    merged_ids = {s.id for s in srcs} | {tgt.id}
    moved = dropped = rel_moved = rel_dropped = 0
    for s in srcs:
        for mid, content in observations_of(conn, sc, [s.id])[s.id]:
            if content in have:
                w.drop_observation(mid, s.id)
                dropped += 1
            else:
                have.add(content)
                moved += 1
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
        conn.execute(
            "INSERT OR IGNORE INTO entity_scopes (entity_id, scope_id) SELECT ?, scope_id FROM entity_scopes WHERE entity_id = ?",
            (tgt.id, s.id),
        )
        for rid, src_id, rtype, tgt_id in conn.execute(
            "SELECT id, source_id, relation_type, target_id FROM relations WHERE source_id = ? OR target_id = ? ORDER BY id",
            (s.id, s.id),
        ).fetchall():
            new_src = tgt.id if src_id == s.id else src_id
            new_tgt = tgt.id if tgt_id == s.id else tgt_id
            if new_src == new_tgt and src_id != tgt_id and {src_id, tgt_id} <= merged_ids:
                conn.execute("DELETE FROM relations WHERE id = ?", (rid,))
                w.change("relation", rid, deleted=True)
                rel_dropped += 1
                continue
            same = conn.execute(
                "SELECT id FROM relations WHERE source_id = ? AND relation_type = ? AND target_id = ?",
                (new_src, rtype, new_tgt),
            ).fetchone()
            if same is not None:
                for table, col in (
                    ("memory_relations", "memory_id"),
                    ("relation_scopes", "scope_id"),
                ):
                    conn.execute(
                        f"INSERT OR IGNORE INTO {table} ({col}, relation_id) SELECT {col}, ? FROM {table} WHERE relation_id = ?",
                        (same[0], rid),
                    )
                conn.execute("DELETE FROM relations WHERE id = ?", (rid,))
                w.change("relation", rid, deleted=True)
                w.change("relation", same[0])
                rel_dropped += 1
            else:
                conn.execute(
                    "UPDATE relations SET source_id = ?, target_id = ? WHERE id = ?",
                    (new_src, new_tgt, rid),
                )
                ops.drop_vector(conn, "relation", rid)  # its document names the old entity
                w.change("relation", rid)
                rel_moved += 1
        conn.execute("DELETE FROM entities WHERE id = ?", (s.id,))
        w.change("entity", s.id, deleted=True)
    w.touch([tgt.id])
    w.change("entity", tgt.id)
    entity = entities_out(conn, sc, [tgt], "full")[0]
    return {
        "target": entity,
        "merged": [s.name for s in srcs],
        "observationsMoved": moved,
        "duplicateObservationsDropped": dropped,
        "relationsMoved": rel_moved,
        "relationsDropped": rel_dropped,
    }


def compact(w: Writer) -> dict[str, Any]:
    """Drop repeated observations of an entity (keeping the oldest) and optimize the FTS indexes.

    Only copies owned here are dropped: one shared with a scope this server
    may not write stays (``store.ownership``).
    """
    conn, sc = w.conn, w.sc
    removed = 0
    dupes = conn.execute(
        f"""SELECT me.entity_id, group_concat(m.id) FROM memory_entities me JOIN memories m ON m.id = me.memory_id
            WHERE {OBS_TYPE_SQL} AND {sc.memory()} GROUP BY me.entity_id, m.content HAVING count(*) > 1"""
    ).fetchall()
    for eid, ids in dupes:
        for mid in sorted(int(i) for i in ids.split(","))[1:]:
            if w.own.owned("memory", mid):  # another repository's copy stays (store.ownership)
                w.drop_observation(mid, eid)
                removed += 1
    indexes = ["entities_fts", "entities_trigram", "memories_fts"]
    for index in indexes:
        conn.execute(f"INSERT INTO {index} ({index}) VALUES ('optimize')")
    return {"duplicateObservationsRemoved": removed, "indexesOptimized": indexes}


# -- reads ---------------------------------------------------------------------------


def _type_filter(entity_type: str | None) -> tuple[str, list[Any]]:
    return ("AND e.kind = ?", [entity_type]) if entity_type is not None else ("", [])


def read_graph(
    conn: sqlite3.Connection,
    sc: Scoped,
    offset: int,
    limit: int,
    mode: str,
    entity_type: str | None,
) -> dict[str, Any]:
    tsql, tparams = _type_filter(entity_type)
    total = conn.execute(
        f"SELECT count(*) FROM entities e WHERE {sc.entity()} {tsql}", tparams
    ).fetchone()[0]
    ents = [
        Ent(*row)
        for row in conn.execute(
            f"SELECT e.id, e.name, e.kind, e.canonical_name FROM entities e WHERE {sc.entity()} {tsql} ORDER BY e.id LIMIT ? OFFSET ?",
            [*tparams, limit, offset],
        )
    ]
    result: dict[str, Any] = {"entities": entities_out(conn, sc, ents, mode)}
    if mode != "names":
        result["relations"] = relations_touching(conn, sc, [e.id for e in ents], sources_only=True)
    result["total"] = total
    result["nextOffset"] = page(total, offset, len(ents))
    return result


def search_terms(query: str) -> list[str]:
    return ops.query_terms(query)


def search_nodes(
    conn: sqlite3.Connection,
    sc: Scoped,
    query: str,
    offset: int,
    limit: int,
    mode: str,
    entity_type: str | None,
) -> dict[str, Any]:
    """Entities whose name, type or observations contain every word of ``query``.

    Each word matches as a prefix of a word (FTS5 prefix queries over
    ``entities_fts`` for names and types, ``memories_fts`` for observations)
    or, for words of 3+ characters, anywhere inside a name or type (the
    trigram index ``entities_trigram``); an entity matches when each word
    matches somewhere in it.
    Ranked by name/type matches (weight 3 per word) plus matching observations.
    """
    terms = search_terms(query)
    if not terms:
        raise ToolError(
            "search_nodes: the query has no words to search for; use read_graph to list entities"
        )
    scores: Counter[int] | None = None
    for term in terms:
        match = f'"{term}"*'
        hits: Counter[int] = Counter()
        in_name = {
            r[0]
            for r in conn.execute(
                "SELECT rowid FROM entities_fts WHERE entities_fts MATCH ?", (match,)
            )
        }
        if len(term) >= 3:  # the trigram index finds it inside a name or type, too
            in_name.update(
                r[0]
                for r in conn.execute(
                    "SELECT rowid FROM entities_trigram WHERE entities_trigram MATCH ?",
                    (f'"{term}"',),
                )
            )
        for eid in in_name:
            hits[eid] += 3
        for eid, n in conn.execute(
            f"""SELECT me.entity_id, count(*) FROM memories_fts f JOIN memories m ON m.id = f.rowid
                JOIN memory_entities me ON me.memory_id = m.id
                WHERE memories_fts MATCH ? AND {OBS_TYPE_SQL} AND {sc.memory()} GROUP BY me.entity_id""",
            (match,),
        ):
            hits[eid] += n
        if scores is None:
            scores = hits
        else:
            scores = Counter({k: v + hits[k] for k, v in scores.items() if k in hits})
        if not scores:
            break
    candidates = list((scores or {}).keys())
    tsql, tparams = _type_filter(entity_type)
    ents: dict[int, Ent] = {}
    for part in chunks(candidates):
        for row in conn.execute(
            f"SELECT e.id, e.name, e.kind, e.canonical_name FROM entities e WHERE e.id IN ({marks(len(part))}) AND {sc.entity()} {tsql}",
            [*part, *tparams],
        ):
            ents[row[0]] = Ent(*row)
    assert scores is not None or not ents
    ranked = sorted(ents.values(), key=lambda e: (-(scores or {})[e.id], e.id))
    chosen = ranked[offset : offset + limit]
    result: dict[str, Any] = {"entities": entities_out(conn, sc, chosen, mode)}
    if mode != "names":
        result["relations"] = relations_touching(conn, sc, [e.id for e in chosen])
    result["total"] = len(ranked)
    result["nextOffset"] = page(len(ranked), offset, len(chosen))
    return result


def open_nodes(
    conn: sqlite3.Connection, sc: Scoped, names: Sequence[str], offset: int, limit: int, mode: str
) -> dict[str, Any]:
    found = resolve(conn, sc, names)
    ordered = list(
        {
            ops.canonical_name(n): found[ops.canonical_name(n)]
            for n in names
            if ops.canonical_name(n) in found
        }.values()
    )
    chosen = ordered[offset : offset + limit]
    result: dict[str, Any] = {"entities": entities_out(conn, sc, chosen, mode)}
    if mode != "names":
        result["relations"] = relations_touching(conn, sc, [e.id for e in chosen])
    result["missing"] = [n for n in dict.fromkeys(names) if ops.canonical_name(n) not in found]
    result["total"] = len(ordered)
    result["nextOffset"] = page(len(ordered), offset, len(chosen))
    return result


def batch_get(
    conn: sqlite3.Connection, sc: Scoped, names: Sequence[str], offset: int, limit: int, mode: str
) -> dict[str, Any]:
    result = open_nodes(conn, sc, names, offset, limit, mode)
    result.pop("relations", None)
    return result


def get_one(conn: sqlite3.Connection, sc: Scoped, name: str) -> Ent:
    ent = resolve(conn, sc, [name]).get(ops.canonical_name(name))
    if ent is None:
        raise ToolError(
            f"entity {name!r} not found (search_nodes finds entities by words of their names or observations)"
        )
    return ent


def degree_of(conn: sqlite3.Connection, sc: Scoped, eid: int) -> dict[str, int]:
    out_deg = conn.execute(
        f"SELECT count(*) FROM relations r WHERE r.source_id = ? AND {sc.relation()}", (eid,)
    ).fetchone()[0]
    in_deg = conn.execute(
        f"SELECT count(*) FROM relations r WHERE r.target_id = ? AND {sc.relation()}", (eid,)
    ).fetchone()[0]
    return {"in": in_deg, "out": out_deg, "total": in_deg + out_deg}


def graph_stats(conn: sqlite3.Connection, sc: Scoped) -> dict[str, Any]:
    one = lambda sql: conn.execute(sql).fetchone()[0]  # noqa: E731
    return {
        "entities": one(f"SELECT count(*) FROM entities e WHERE {sc.entity()}"),
        "relations": one(f"SELECT count(*) FROM relations r WHERE {sc.relation()}"),
        "observations": one(
            f"""SELECT count(*) FROM memory_entities me JOIN memories m ON m.id = me.memory_id
                WHERE {OBS_TYPE_SQL} AND {sc.memory()}"""
        ),
        "entityTypes": one(f"SELECT count(DISTINCT e.kind) FROM entities e WHERE {sc.entity()}"),
        "relationTypes": one(
            f"SELECT count(DISTINCT r.relation_type) FROM relations r WHERE {sc.relation()}"
        ),
        "scopes": list(sc.view.selection),
    }


def search_relations(
    conn: sqlite3.Connection,
    sc: Scoped,
    src: str | None,
    tgt: str | None,
    rtype: str | None,
    offset: int,
    limit: int,
) -> dict[str, Any]:
    conds = [sc.relation()]
    params: list[Any] = []
    for name, col in ((src, "r.source_id"), (tgt, "r.target_id")):
        if name is not None:
            ent = resolve(conn, sc, [name]).get(ops.canonical_name(name))
            if ent is None:
                return {"relations": [], "total": 0, "nextOffset": None}
            conds.append(f"{col} = ?")
            params.append(ent.id)
    if rtype is not None:
        conds.append("r.relation_type = ?")
        params.append(rtype)
    where = " AND ".join(conds)
    total = conn.execute(f"SELECT count(*) FROM relations r WHERE {where}", params).fetchone()[0]
    rows = conn.execute(
        f"""SELECT s.name, r.relation_type, t.name FROM relations r JOIN entities s ON s.id = r.source_id
            JOIN entities t ON t.id = r.target_id WHERE {where} ORDER BY r.id LIMIT ? OFFSET ?""",
        [*params, limit, offset],
    ).fetchall()
    return {
        "relations": [relation_out(*r) for r in rows],
        "total": total,
        "nextOffset": page(total, offset, len(rows)),
    }


def describe_entity(
    conn: sqlite3.Connection, sc: Scoped, name: str, offset: int, limit: int
) -> dict[str, Any]:
    ent = get_one(conn, sc, name)
    rows = conn.execute(
        f"""SELECT s.name, r.relation_type, t.name, r.source_id = ? FROM relations r
            JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id
            WHERE (r.source_id = ? OR r.target_id = ?) AND {sc.relation()}
            ORDER BY r.source_id != ?, r.id""",
        (ent.id, ent.id, ent.id, ent.id),
    ).fetchall()
    chosen = rows[offset : offset + limit]
    return {
        "entity": entities_out(conn, sc, [ent], "full")[0],
        "degree": degree_of(conn, sc, ent.id),
        "outgoing": [{"relationType": r[1], "to": r[2]} for r in chosen if r[3]],
        "incoming": [{"from": r[0], "relationType": r[1]} for r in chosen if not r[3]],
        "total": len(rows),
        "nextOffset": page(len(rows), offset, len(chosen)),
    }


# -- traversal -------------------------------------------------------------------------

Edge = tuple[int, int, str, int]  # relation id, source id, type, target id


class Adjacency:
    """Visible relations around nodes, fetched a frontier at a time and cached."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        sc: Scoped,
        direction: str = "both",
        relation_type: str | None = None,
    ) -> None:
        self.conn, self.sc, self.direction, self.rtype = conn, sc, direction, relation_type
        self.cache: dict[int, list[Edge]] = {}

    def load(self, nodes: Iterable[int]) -> None:
        todo = [n for n in dict.fromkeys(nodes) if n not in self.cache]
        for n in todo:
            self.cache[n] = []
        cols = []
        if self.direction in ("outgoing", "both"):
            cols.append("r.source_id")
        if self.direction in ("incoming", "both"):
            cols.append("r.target_id")
        tsql = "AND r.relation_type = ?" if self.rtype is not None else ""
        for part in chunks(todo):
            for col in cols:
                for edge in self.conn.execute(
                    f"""SELECT r.id, r.source_id, r.relation_type, r.target_id FROM relations r
                        WHERE {col} IN ({marks(len(part))}) {tsql} AND {self.sc.relation()} ORDER BY r.id""",
                    [*part, *([self.rtype] if self.rtype is not None else [])],
                ):
                    key = edge[1] if col == "r.source_id" else edge[3]
                    if edge[1] == edge[3] and col == "r.target_id" and len(cols) == 2:
                        continue  # a self-loop, already listed as outgoing
                    self.cache[key].append(edge)

    def edges(self, node: int) -> list[Edge]:
        if node not in self.cache:
            self.load([node])
        return self.cache[node]


def other_end(edge: Edge, node: int) -> int:
    return edge[3] if edge[1] == node else edge[1]


def bfs(adj: Adjacency, starts: Sequence[int], depth: int) -> dict[int, int]:
    """Distance of every node within ``depth`` hops of ``starts``."""
    dist = {s: 0 for s in starts}
    frontier = list(starts)
    for d in range(1, depth + 1):
        adj.load(frontier)
        nxt = []
        for node in frontier:
            for edge in adj.edges(node):
                other = other_end(edge, node)
                if other not in dist:
                    dist[other] = d
                    nxt.append(other)
        if not nxt:
            break
        frontier = nxt
    return dist


def _path_out(conn: sqlite3.Connection, nodes: list[int], edges: list[Edge]) -> dict[str, Any]:
    rows = entity_rows(conn, list({*nodes, *(e[1] for e in edges), *(e[3] for e in edges)}))
    return {
        "entities": [rows[n].name for n in nodes],
        "relations": [relation_out(rows[e[1]].name, e[2], rows[e[3]].name) for e in edges],
        "length": len(edges),
    }


def find_path(
    conn: sqlite3.Connection, sc: Scoped, src: str, tgt: str, depth: int, directed: bool
) -> dict[str, Any]:
    """A shortest path (fewest relations) from ``src`` to ``tgt``, breadth first."""
    a, b = get_one(conn, sc, src), get_one(conn, sc, tgt)
    if a.id == b.id:
        return {"found": True, **_path_out(conn, [a.id], [])}
    adj = Adjacency(conn, sc, "outgoing" if directed else "both")
    parent: dict[int, tuple[int, Edge] | None] = {a.id: None}
    frontier = [a.id]
    for _ in range(depth):
        adj.load(frontier)
        nxt = []
        for node in frontier:
            for edge in adj.edges(node):
                other = other_end(edge, node)
                if other in parent:
                    continue
                parent[other] = (node, edge)
                if other == b.id:
                    nodes, edges = [b.id], []
                    step = parent[b.id]
                    while step is not None:
                        edges.append(step[1])
                        nodes.append(step[0])
                        step = parent[step[0]]
                    return {"found": True, **_path_out(conn, nodes[::-1], edges[::-1])}
                nxt.append(other)
        if not nxt:
            break
        frontier = nxt
    return {"found": False, "entities": [], "relations": [], "length": 0, "maxDepth": depth}


def find_all_paths(
    conn: sqlite3.Connection,
    sc: Scoped,
    src: str,
    tgt: str,
    depth: int,
    limit: int,
    directed: bool,
) -> dict[str, Any]:
    """Simple paths (no entity twice, so cycles end) from ``src`` to ``tgt``, shortest first."""
    a, b = get_one(conn, sc, src), get_one(conn, sc, tgt)
    adj = Adjacency(conn, sc, "outgoing" if directed else "both")
    # Prune: only nodes that can still reach b within the remaining hops.
    rev = Adjacency(conn, sc, "incoming" if directed else "both")
    to_b = bfs(rev, [b.id], depth)
    found: list[tuple[list[int], list[Edge]]] = []
    expansions = 0
    truncated = False
    stack: list[tuple[int, list[int], list[Edge]]] = [(a.id, [a.id], [])]
    # Iterative deepening keeps results shortest first.
    for limit_depth in range(1, depth + 1):
        stack = [(a.id, [a.id], [])]
        while stack:
            node, nodes, edges = stack.pop()
            remaining = limit_depth - len(edges)
            if remaining == 0:
                continue
            for edge in reversed(adj.edges(node)):
                expansions += 1
                if expansions > MAX_PATH_EXPANSIONS:
                    truncated = True
                    break
                other = other_end(edge, node)
                if other in nodes or to_b.get(other, depth + 1) > remaining - 1:
                    continue
                if other == b.id:
                    if len(edges) + 1 == limit_depth:
                        found.append(([*nodes, other], [*edges, edge]))
                        if len(found) >= limit:
                            truncated = True
                            break
                    continue
                stack.append((other, [*nodes, other], [*edges, edge]))
            if truncated:
                break
        if truncated or a.id == b.id:
            break
    return {
        "paths": [_path_out(conn, n, e) for n, e in found],
        "truncated": truncated,
    }


def extract_subgraph(
    conn: sqlite3.Connection,
    sc: Scoped,
    names: Sequence[str],
    depth: int,
    offset: int,
    limit: int,
    mode: str,
) -> dict[str, Any]:
    found = resolve(conn, sc, names)
    seeds = [found[ops.canonical_name(n)].id for n in names if ops.canonical_name(n) in found]
    adj = Adjacency(conn, sc)
    dist = bfs(adj, list(dict.fromkeys(seeds)), depth)
    ordered = sorted(dist, key=lambda n: (dist[n], n))
    chosen_ids = ordered[offset : offset + limit]
    rows = entity_rows(conn, chosen_ids)
    chosen = [rows[i] for i in chosen_ids if i in rows]
    result: dict[str, Any] = {"entities": entities_out(conn, sc, chosen, mode)}
    if mode != "names":
        inside = set(dist)
        adj.load(chosen_ids)
        rels: dict[int, Edge] = {}
        for n in chosen_ids:
            for edge in adj.edges(n):
                if edge[1] in inside and edge[3] in inside and edge[1] == n:
                    rels[edge[0]] = edge
        names_by_id = entity_rows(conn, list({i for e in rels.values() for i in (e[1], e[3])}))
        result["relations"] = [
            relation_out(names_by_id[e[1]].name, e[2], names_by_id[e[3]].name)
            for _, e in sorted(rels.items())
        ]
    result["missing"] = [n for n in dict.fromkeys(names) if ops.canonical_name(n) not in found]
    result["total"] = len(ordered)
    result["nextOffset"] = page(len(ordered), offset, len(chosen_ids))
    return result


def get_neighbors(
    conn: sqlite3.Connection,
    sc: Scoped,
    name: str,
    depth: int,
    direction: str,
    rtype: str | None,
    offset: int,
    limit: int,
    mode: str,
) -> dict[str, Any]:
    ent = get_one(conn, sc, name)
    adj = Adjacency(conn, sc, direction, rtype)
    dist = bfs(adj, [ent.id], depth)
    dist.pop(ent.id)
    ordered = sorted(dist, key=lambda n: (dist[n], n))
    chosen_ids = ordered[offset : offset + limit]
    rows = entity_rows(conn, chosen_ids)
    if mode == "names":
        neighbors: list[Any] = [rows[i].name for i in chosen_ids]
    else:
        obs = observations_of(conn, sc, chosen_ids) if mode == "full" else {}
        neighbors = []
        for i in chosen_ids:
            item = entity_out(rows[i], "full" if mode == "full" else "summary", obs)
            assert isinstance(item, dict)
            if mode != "full":
                item.pop("observationCount", None)
            item["distance"] = dist[i]
            neighbors.append(item)
    return {
        "entity": ent.name,
        "neighbors": neighbors,
        "total": len(ordered),
        "nextOffset": page(len(ordered), offset, len(chosen_ids)),
    }


def list_types(
    conn: sqlite3.Connection, sc: Scoped, what: str, offset: int, limit: int
) -> dict[str, Any]:
    if what == "entity":
        sql = f"SELECT e.kind, count(*) FROM entities e WHERE {sc.entity()} GROUP BY e.kind"
        key = "entityType"
    else:
        sql = f"SELECT r.relation_type, count(*) FROM relations r WHERE {sc.relation()} GROUP BY r.relation_type"
        key = "relationType"
    rows = conn.execute(f"{sql} ORDER BY 2 DESC, 1").fetchall()
    chosen = rows[offset : offset + limit]
    return {
        "types": [{key: t, "count": n} for t, n in chosen],
        "total": len(rows),
        "nextOffset": page(len(rows), offset, len(chosen)),
    }
