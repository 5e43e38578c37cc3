"""`interfaces.graph.Graph` on SQLite, in SQLite's dialect."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import TypeVar

import msgspec

from ..interfaces.graph import (
    Counts,
    Edge,
    Entity,
    Found,
    Link,
    NamedRelation,
    NewEntity,
    NewObservation,
    Observation,
    RowKind,
    View,
)
from ..rows.graph import (
    edge,
    entity,
    found,
    link,
    named,
    observation,
    relation_filter,
    seen_entity,
)
from .params import chunks, id_list, marks

CHUNK = 500  # ids or names per ``IN (...)`` list (SQLite's parameter limit is far above)
OBS = "m.memory_type = 'observation' COLLATE NOCASE"
LINK = """SELECT r.id, s.name, r.relation_type, t.name
    FROM relations r JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id"""
NAMED = """SELECT r.id, r.source_id, s.name, s.kind, r.relation_type, r.target_id, t.name, t.kind
    FROM relations r JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id"""
# SQLite has its JSON functions built in from 3.38 (before, only when compiled with them).
JSON_ROWS = sqlite3.sqlite_version_info >= (3, 38, 0)
_rows = msgspec.json.Encoder()
T = TypeVar("T")


def _vis(view: View, table: str, col: str, alias: str) -> str:
    """The condition that ``alias``'s row is visible in ``view`` (ids are ints: no parameter)."""
    if view.sees_all:
        return "(1 = 1)"
    inner = id_list(view.read_ids)
    return (
        f"(EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id AND x.scope_id IN ({inner}))"
        f" OR NOT EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id))"
    )


def _ent(view: View, alias: str = "e") -> str:
    return _vis(view, "entity_scopes", "entity_id", alias)


def _rel(view: View, alias: str = "r") -> str:
    return _vis(view, "relation_scopes", "relation_id", alias)


def _mem(view: View, alias: str = "m") -> str:
    return _vis(view, "memory_scopes", "memory_id", alias)


class SqliteGraph:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def _one(self, sql: str, params: Sequence[object] = ()) -> int:
        return int(self.conn.execute(sql, params).fetchone()[0])

    # -- views and lookups ---------------------------------------------------------------

    def view(self, read: Sequence[str], write: Sequence[str]) -> View:
        names = list(dict.fromkeys([*read, *write]))
        ids: dict[str, int] = {}
        for part in chunks(names, CHUNK):
            for name, sid in self.conn.execute(
                f"SELECT name, id FROM scopes WHERE name IN ({marks(len(part))})", part
            ):
                ids[name] = sid
        read_ids = tuple(sorted({ids[s] for s in read if s in ids}))
        write_ids = tuple(sorted({ids[s] for s in write if s in ids}))
        total = self._one("SELECT count(*) FROM scopes")
        return View(read_ids, write_ids, len(read_ids) == total)

    def entity_named(self, name: str) -> Entity | None:
        row = self.conn.execute(
            "SELECT id, name, kind, canonical_name FROM entities WHERE name = ?", (name,)
        ).fetchone()
        return entity(row) if row else None

    def entities_canonical(self, canonical: str, limit: int) -> list[Entity]:
        return [
            entity(row)
            for row in self.conn.execute(
                "SELECT id, name, kind, canonical_name FROM entities WHERE canonical_name = ? "
                "ORDER BY id LIMIT ?",
                (canonical, limit),
            )
        ]

    def entities_by_names(self, names: Sequence[str], view: View) -> list[Entity]:
        out = []
        for part in chunks(list(dict.fromkeys(names)), CHUNK):
            for row in self.conn.execute(
                f"SELECT e.id, e.name, e.kind, e.canonical_name, {_ent(view)} FROM entities e "
                f"WHERE e.name IN ({marks(len(part))})",
                part,
            ):
                out.append(seen_entity(row))
        return out

    def entities_by_ids(self, ids: Sequence[int]) -> list[Entity]:
        out = []
        for part in chunks(list(dict.fromkeys(ids)), CHUNK):
            for row in self.conn.execute(
                "SELECT id, name, kind, canonical_name FROM entities "
                f"WHERE id IN ({marks(len(part))})",
                part,
            ):
                out.append(entity(row))
        return out

    def names_near(self, canonicals: Sequence[str], view: View, limit: int) -> list[str]:
        canon = list(dict.fromkeys(canonicals))[:CHUNK]
        if not canon:
            return []
        rows = self.conn.execute(
            f"SELECT e.name FROM entities e WHERE e.canonical_name IN ({marks(len(canon))}) "
            f"AND {_ent(view)} ORDER BY e.id LIMIT ?",
            [*canon, limit],
        )
        return [r[0] for r in rows]

    def observations(self, entity_ids: Sequence[int], view: View) -> list[Observation]:
        out = []
        for part in chunks(list(dict.fromkeys(entity_ids)), CHUNK):
            for row in self.conn.execute(
                f"""SELECT me.entity_id, m.id, m.content FROM memory_entities me
                    JOIN memories m ON m.id = me.memory_id
                    WHERE me.entity_id IN ({marks(len(part))}) AND {OBS} AND {_mem(view)}
                    ORDER BY me.entity_id, me.memory_id""",
                part,
            ):
                out.append(observation(row))
        return out

    def observation_texts(self, entity_ids: Sequence[int], view: View) -> list[tuple[int, str]]:
        out: list[tuple[int, str]] = []
        for part in chunks(list(dict.fromkeys(entity_ids)), CHUNK):
            out += self.conn.execute(
                f"""SELECT me.entity_id, m.content FROM memory_entities me
                    JOIN memories m ON m.id = me.memory_id
                    WHERE me.entity_id IN ({marks(len(part))}) AND {OBS} AND {_mem(view)}
                    ORDER BY me.entity_id, me.memory_id""",
                part,
            ).fetchall()
        return out

    def observation_counts(self, entity_ids: Sequence[int], view: View) -> dict[int, int]:
        out: dict[int, int] = {}
        for part in chunks(list(dict.fromkeys(entity_ids)), CHUNK):
            for eid, n in self.conn.execute(
                f"""SELECT me.entity_id, count(*) FROM memory_entities me
                    JOIN memories m ON m.id = me.memory_id
                    WHERE me.entity_id IN ({marks(len(part))}) AND {OBS} AND {_mem(view)}
                    GROUP BY me.entity_id""",
                part,
            ):
                out[eid] = n
        return out

    # -- reads ---------------------------------------------------------------------------

    def count_entities(self, view: View, kind: str | None) -> int:
        tsql, tparams = ("AND e.kind = ?", [kind]) if kind is not None else ("", [])
        return self._one(f"SELECT count(*) FROM entities e WHERE {_ent(view)} {tsql}", tparams)

    def entity_page(self, view: View, kind: str | None, offset: int, limit: int) -> list[Entity]:
        tsql, tparams = ("AND e.kind = ?", [kind]) if kind is not None else ("", [])
        return [
            entity(row)
            for row in self.conn.execute(
                f"SELECT e.id, e.name, e.kind, e.canonical_name FROM entities e "
                f"WHERE {_ent(view)} {tsql} ORDER BY e.id LIMIT ? OFFSET ?",
                [*tparams, limit, offset],
            )
        ]

    def entities_after(self, view: View, after_id: int, limit: int) -> list[Entity]:
        return [
            entity(row)
            for row in self.conn.execute(
                f"SELECT e.id, e.name, e.kind, e.canonical_name FROM entities e "
                f"WHERE e.id > ? AND {_ent(view)} ORDER BY e.id LIMIT ?",
                (after_id, limit),
            )
        ]

    def relations_after(self, view: View, after_id: int, limit: int) -> list[Link]:
        return [
            link(row)
            for row in self.conn.execute(
                f"{LINK} WHERE r.id > ? AND {_rel(view)} ORDER BY r.id LIMIT ?", (after_id, limit)
            )
        ]

    def relations_touching(
        self, entity_ids: Sequence[int], view: View, sources_only: bool
    ) -> list[Link]:
        rows: dict[int, Link] = {}
        cols = ["r.source_id"] if sources_only else ["r.source_id", "r.target_id"]
        for part in chunks(list(dict.fromkeys(entity_ids)), CHUNK):
            for col in cols:
                for row in self.conn.execute(
                    f"{LINK} WHERE {col} IN ({marks(len(part))}) AND {_rel(view)}", part
                ):
                    rows[row[0]] = link(row)
        return [rows[rid] for rid in sorted(rows)]

    def relations_of(self, entity_id: int, view: View) -> list[NamedRelation]:
        return [
            named(row)
            for row in self.conn.execute(
                f"{NAMED} WHERE (r.source_id = ? OR r.target_id = ?) AND {_rel(view)} "
                "ORDER BY r.source_id != ?, r.id",
                (entity_id, entity_id, entity_id),
            )
        ]

    def degree(self, entity_id: int, view: View) -> tuple[int, int]:
        out_deg = self._one(
            f"SELECT count(*) FROM relations r WHERE r.source_id = ? AND {_rel(view)}",
            (entity_id,),
        )
        in_deg = self._one(
            f"SELECT count(*) FROM relations r WHERE r.target_id = ? AND {_rel(view)}",
            (entity_id,),
        )
        return in_deg, out_deg

    def counts(self, view: View) -> Counts:
        return Counts(
            entities=self._one(f"SELECT count(*) FROM entities e WHERE {_ent(view)}"),
            relations=self._one(f"SELECT count(*) FROM relations r WHERE {_rel(view)}"),
            observations=self._one(
                f"""SELECT count(*) FROM memory_entities me JOIN memories m ON m.id = me.memory_id
                    WHERE {OBS} AND {_mem(view)}"""
            ),
            entity_types=self._one(
                f"SELECT count(DISTINCT e.kind) FROM entities e WHERE {_ent(view)}"
            ),
            relation_types=self._one(
                f"SELECT count(DISTINCT r.relation_type) FROM relations r WHERE {_rel(view)}"
            ),
        )

    def find_relations(
        self,
        view: View,
        source_id: int | None,
        target_id: int | None,
        relation_type: str | None,
        offset: int,
        limit: int,
    ) -> tuple[int, list[Link]]:
        conds = [_rel(view)]
        params: list[int | str] = []
        for col, value in relation_filter(source_id, target_id, relation_type):
            conds.append(f"{col} = ?")
            params.append(value)
        where = " AND ".join(conds)
        total = self._one(f"SELECT count(*) FROM relations r WHERE {where}", params)
        rows = self.conn.execute(
            f"{LINK} WHERE {where} ORDER BY r.id LIMIT ? OFFSET ?", [*params, limit, offset]
        )
        return total, [link(r) for r in rows]

    def type_counts(self, view: View, what: RowKind) -> list[tuple[str, int]]:
        if what == "entity":
            sql = f"SELECT e.kind, count(*) FROM entities e WHERE {_ent(view)} GROUP BY e.kind"
        else:
            sql = (
                "SELECT r.relation_type, count(*) FROM relations r "
                f"WHERE {_rel(view)} GROUP BY r.relation_type"
            )
        return [(t, n) for t, n in self.conn.execute(f"{sql} ORDER BY 2 DESC, 1")]

    def edges(
        self, node_ids: Sequence[int], view: View, outgoing: bool, relation_type: str | None
    ) -> list[Edge]:
        col = "r.source_id" if outgoing else "r.target_id"
        tsql = "AND r.relation_type = ?" if relation_type is not None else ""
        extra = [relation_type] if relation_type is not None else []
        out = []
        for part in chunks(list(dict.fromkeys(node_ids)), CHUNK):
            for row in self.conn.execute(
                f"""SELECT r.id, r.source_id, r.relation_type, r.target_id FROM relations r
                    WHERE {col} IN ({marks(len(part))}) {tsql} AND {_rel(view)} ORDER BY r.id""",
                [*part, *extra],
            ):
                out.append(edge(row))
        out.sort(key=lambda e: e.id)
        return out

    def edges_named(self, node_id: int, view: View, outgoing: bool) -> list[NamedRelation]:
        col = "r.source_id" if outgoing else "r.target_id"
        return [
            named(row)
            for row in self.conn.execute(
                f"{NAMED} WHERE {col} = ? AND {_rel(view)} ORDER BY r.relation_type, r.id",
                (node_id,),
            )
        ]

    def relation(
        self, source_id: int, relation_type: str, target_id: int, view: View
    ) -> Found | None:
        row = self.conn.execute(
            f"SELECT r.id, {_rel(view)} FROM relations r "
            "WHERE r.source_id = ? AND r.relation_type = ? AND r.target_id = ?",
            (source_id, relation_type, target_id),
        ).fetchone()
        return found(row)

    def relation_ids_touching(self, entity_id: int, view: View) -> list[int]:
        return [
            r[0]
            for r in self.conn.execute(
                "SELECT r.id FROM relations r WHERE (r.source_id = ? OR r.target_id = ?) "
                f"AND {_rel(view)}",
                (entity_id, entity_id),
            )
        ]

    def relation_metadata(self, relation_id: int) -> str | None:
        row = self.conn.execute(
            "SELECT metadata FROM relations WHERE id = ?", (relation_id,)
        ).fetchone()
        return None if row is None else str(row[0] or "")

    def without_vectors(self, kind: RowKind, ids: Sequence[int]) -> set[int]:
        have: set[int] = set()
        for part in chunks(list(dict.fromkeys(ids)), CHUNK):
            have.update(
                r[0]
                for r in self.conn.execute(
                    f"SELECT item_id FROM vectors WHERE kind = ? AND item_id IN ({marks(len(part))})",
                    [kind, *part],
                )
            )
        return set(ids) - have

    # -- writes ----------------------------------------------------------------------------

    def _next_id(self, table: str) -> int:
        return 1 + self._one(
            f"SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = '{table}'), 0),"
            f" coalesce((SELECT max(id) FROM {table}), 0))"
        )

    def next_ids(self) -> tuple[int, int]:
        return self._next_id("entities"), self._next_id("memories")

    def insert_batch(
        self,
        entities: Sequence[NewEntity],
        observations: Sequence[NewObservation],
        ts: float,
        scope_id: int,
    ) -> None:
        # Each INSERT statement ends with FTS5 writing out its pending terms, so one
        # statement for the batch (rows as a JSON array) costs about half as much per row.
        # JSON text in SQLite ends at a NUL: rows holding one are bound each.
        conn = self.conn
        ents = [(e.id, e.name, e.canonical, e.kind) for e in entities]
        mems = [(o.id, o.content, o.entity_id) for o in observations]
        if (
            not JSON_ROWS
            or any("\x00" in t for row in ents for t in row[1:])
            or any("\x00" in m[1] for m in mems)
        ):
            conn.executemany(
                "INSERT INTO entities (id, name, canonical_name, kind, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(*row, ts, ts) for row in ents],
            )
            conn.executemany(
                "INSERT OR IGNORE INTO entity_scopes (entity_id, scope_id) VALUES (?, ?)",
                [(row[0], scope_id) for row in ents],
            )
            conn.executemany(
                "INSERT INTO memories (id, content, memory_type, importance, created_at, updated_at) "
                "VALUES (?, ?, 'observation', 0.0, ?, ?)",
                [(mid, content, ts, ts) for mid, content, _ in mems],
            )
            conn.executemany(
                "INSERT INTO memory_scopes (memory_id, scope_id) VALUES (?, ?)",
                [(mid, scope_id) for mid, _, _ in mems],
            )
            conn.executemany(
                "INSERT INTO memory_entities (memory_id, entity_id) VALUES (?, ?)",
                [(mid, eid) for mid, _, eid in mems],
            )
            return
        if ents:
            data = _rows.encode(ents).decode()
            conn.execute(
                "INSERT INTO entities (id, name, canonical_name, kind, created_at, updated_at) "
                "SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), "
                "json_extract(value, '$[2]'), json_extract(value, '$[3]'), ?, ? FROM json_each(?)",
                (ts, ts, data),
            )
            conn.execute(
                "INSERT OR IGNORE INTO entity_scopes (entity_id, scope_id) "
                "SELECT json_extract(value, '$[0]'), ? FROM json_each(?)",
                (scope_id, data),
            )
        if mems:
            data = _rows.encode(mems).decode()
            conn.execute(
                "INSERT INTO memories (id, content, memory_type, importance, created_at, updated_at) "
                "SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), 'observation', "
                "0.0, ?, ? FROM json_each(?)",
                (ts, ts, data),
            )
            conn.execute(
                "INSERT INTO memory_scopes (memory_id, scope_id) "
                "SELECT json_extract(value, '$[0]'), ? FROM json_each(?)",
                (scope_id, data),
            )
            conn.execute(
                "INSERT INTO memory_entities (memory_id, entity_id) "
                "SELECT json_extract(value, '$[0]'), json_extract(value, '$[2]') FROM json_each(?)",
                (data,),
            )

    def create_entity(self, name: str, canonical: str, kind: str, ts: float) -> int:
        eid = self.conn.execute(
            "INSERT INTO entities (name, canonical_name, kind, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (name, canonical, kind, ts, ts),
        ).lastrowid
        assert eid is not None
        return eid

    def add_observation(self, entity_id: int, content: str, ts: float, scope_id: int) -> int:
        conn = self.conn
        mid = conn.execute(
            "INSERT INTO memories (content, memory_type, importance, created_at, updated_at) "
            "VALUES (?, 'observation', 0.0, ?, ?)",
            (content, ts, ts),
        ).lastrowid
        assert mid is not None
        conn.execute(
            "INSERT INTO memory_scopes (memory_id, scope_id) VALUES (?, ?)", (mid, scope_id)
        )
        conn.execute(
            "INSERT INTO memory_entities (memory_id, entity_id) VALUES (?, ?)", (mid, entity_id)
        )
        return mid

    def link(self, kind: RowKind, row_id: int, scope_ids: Sequence[int]) -> None:
        table = "entity_scopes" if kind == "entity" else "relation_scopes"
        col = "entity_id" if kind == "entity" else "relation_id"
        self.conn.executemany(
            f"INSERT OR IGNORE INTO {table} ({col}, scope_id) VALUES (?, ?)",
            [(row_id, sid) for sid in scope_ids],
        )

    def set_kind(self, entity_id: int, kind: str, ts: float) -> None:
        self.conn.execute(
            "UPDATE entities SET kind = ?, updated_at = ? WHERE id = ?", (kind, ts, entity_id)
        )

    def touch(self, entity_ids: Sequence[int], ts: float) -> None:
        self.conn.executemany(
            "UPDATE entities SET updated_at = ? WHERE id = ?", [(ts, i) for i in entity_ids]
        )

    def observation_elsewhere(self, memory_id: int, entity_id: int) -> bool:
        row = self.conn.execute(
            "SELECT 1 FROM memory_entities WHERE memory_id = ? AND entity_id != ? LIMIT 1",
            (memory_id, entity_id),
        ).fetchone()
        return row is not None

    def delete_memory(self, memory_id: int) -> None:
        self.conn.execute("DELETE FROM memories WHERE id = ?", (memory_id,))

    def unlink_observation(self, memory_id: int, entity_id: int) -> None:
        self.conn.execute(
            "DELETE FROM memory_entities WHERE memory_id = ? AND entity_id = ?",
            (memory_id, entity_id),
        )

    def linked_memories(self, entity_id: int) -> list[int]:
        return [
            r[0]
            for r in self.conn.execute(
                "SELECT memory_id FROM memory_entities WHERE entity_id = ?", (entity_id,)
            )
        ]

    def delete_entity(self, entity_id: int) -> None:
        self.conn.execute("DELETE FROM entities WHERE id = ?", (entity_id,))

    def create_relation(
        self, source_id: int, target_id: int, relation_type: str, metadata: str, ts: float
    ) -> int:
        rid = self.conn.execute(
            "INSERT INTO relations (source_id, target_id, relation_type, metadata, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (source_id, target_id, relation_type, metadata, ts),
        ).lastrowid
        assert rid is not None
        return rid

    def set_relation_metadata(self, relation_id: int, metadata: str) -> None:
        self.conn.execute("UPDATE relations SET metadata = ? WHERE id = ?", (metadata, relation_id))

    def delete_relation(self, relation_id: int) -> None:
        self.conn.execute("DELETE FROM relations WHERE id = ?", (relation_id,))

    def duplicate_observations(self, view: View) -> list[tuple[int, list[int]]]:
        rows = self.conn.execute(
            f"""SELECT me.entity_id, group_concat(m.id) FROM memory_entities me
                JOIN memories m ON m.id = me.memory_id
                WHERE {OBS} AND {_mem(view)} GROUP BY me.entity_id, m.content HAVING count(*) > 1"""
        )
        return [(eid, sorted(int(i) for i in ids.split(","))) for eid, ids in rows]

    # -- merge -----------------------------------------------------------------------------

    def copy_scopes(self, from_entity: int, to_entity: int) -> None:
        self.conn.execute(
            "INSERT OR IGNORE INTO entity_scopes (entity_id, scope_id) "
            "SELECT ?, scope_id FROM entity_scopes WHERE entity_id = ?",
            (to_entity, from_entity),
        )

    def move_memories(self, from_entity: int, to_entity: int) -> list[int]:
        links = self.linked_memories(from_entity)
        self.conn.executemany(
            "INSERT OR IGNORE INTO memory_entities (memory_id, entity_id) VALUES (?, ?)",
            [(mid, to_entity) for mid in links],
        )
        self.conn.execute("DELETE FROM memory_entities WHERE entity_id = ?", (from_entity,))
        return links

    def all_edges_of(self, entity_id: int) -> list[Edge]:
        return [
            edge(row)
            for row in self.conn.execute(
                "SELECT id, source_id, relation_type, target_id FROM relations "
                "WHERE source_id = ? OR target_id = ? ORDER BY id",
                (entity_id, entity_id),
            )
        ]

    def repoint_relation(self, relation_id: int, source_id: int, target_id: int) -> None:
        self.conn.execute(
            "UPDATE relations SET source_id = ?, target_id = ? WHERE id = ?",
            (source_id, target_id, relation_id),
        )
        self.conn.execute(
            "DELETE FROM vectors WHERE kind = 'relation' AND item_id = ?", (relation_id,)
        )

    def fold_relation(self, relation_id: int, into: int) -> None:
        for table, col in (("memory_relations", "memory_id"), ("relation_scopes", "scope_id")):
            self.conn.execute(
                f"INSERT OR IGNORE INTO {table} ({col}, relation_id) "
                f"SELECT {col}, ? FROM {table} WHERE relation_id = ?",
                (into, relation_id),
            )
        self.conn.execute("DELETE FROM relations WHERE id = ?", (relation_id,))
