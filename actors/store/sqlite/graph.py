"""`interfaces.graph.Graph` on SQLite, in SQLite's dialect."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import TypeVar

import msgspec

from ..interfaces.graph import (
    Link,
    NewEntity,
    NewObservation,
    RowKind,
    View,
)
from ..rows.graph import (
    LINK,
    GraphBase,
    link,
    mem,
    rel,
)
from .params import chunks, marks
from .statements import SqliteRows

CHUNK = 500  # ids or names per ``IN (...)`` list (SQLite's parameter limit is far above)
OBS = "m.memory_type = 'observation' COLLATE NOCASE"
# SQLite has its JSON functions built in from 3.38 (before, only when compiled with them).
JSON_ROWS = sqlite3.sqlite_version_info >= (3, 38, 0)
_rows = msgspec.json.Encoder()
T = TypeVar("T")


class SqliteGraph(GraphBase, SqliteRows):
    MARK = "?"
    OBS = OBS
    ENTITY_NAMED = "SELECT id, name, kind, canonical_name FROM entities WHERE name = ?"
    ENTITIES_CANONICAL = (
        "SELECT id, name, kind, canonical_name FROM entities WHERE canonical_name = ?"
        " ORDER BY id LIMIT ?"
    )
    KIND_IS = " AND e.kind = ?"
    ENTITY_PAGE = (
        "SELECT e.id, e.name, e.kind, e.canonical_name FROM entities e"
        " WHERE {ent}{kind} ORDER BY e.id LIMIT ? OFFSET ?"
    )
    ENTITIES_AFTER = (
        "SELECT e.id, e.name, e.kind, e.canonical_name FROM entities e"
        " WHERE e.id > ? AND {ent} ORDER BY e.id LIMIT ?"
    )
    RELATIONS_AFTER = "{link} WHERE r.id > ? AND {rel} ORDER BY r.id LIMIT ?"
    RELATIONS_OF = (
        "{named} WHERE (r.source_id = ? OR r.target_id = ?) AND {rel}"
        " ORDER BY r.source_id != ?, r.id"
    )
    OUT_DEGREE = "SELECT count(*) FROM relations r WHERE r.source_id = ? AND {rel}"
    IN_DEGREE = "SELECT count(*) FROM relations r WHERE r.target_id = ? AND {rel}"
    PAGE = " LIMIT ? OFFSET ?"
    EDGES_NAMED = "{named} WHERE {col} = ? AND {rel} ORDER BY r.relation_type, r.id"
    RELATION = (
        "SELECT r.id, {rel} FROM relations r"
        " WHERE r.source_id = ? AND r.relation_type = ? AND r.target_id = ?"
    )
    RELATION_IDS_TOUCHING = (
        "SELECT r.id FROM relations r WHERE (r.source_id = ? OR r.target_id = ?) AND {rel}"
    )
    RELATION_METADATA = "SELECT metadata FROM relations WHERE id = ?"
    CREATE_ENTITY = (
        "INSERT INTO entities (name, canonical_name, kind, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, ?)"
    )
    ADD_OBSERVATION = (
        "INSERT INTO memories (content, memory_type, importance, created_at, updated_at)"
        " VALUES (?, 'observation', 0.0, ?, ?)"
    )
    OBSERVATION_SCOPE = "INSERT INTO memory_scopes (memory_id, scope_id) VALUES (?, ?)"
    OBSERVATION_ENTITY = "INSERT INTO memory_entities (memory_id, entity_id) VALUES (?, ?)"
    SET_KIND = "UPDATE entities SET kind = ?, updated_at = ? WHERE id = ?"
    OBSERVATION_ELSEWHERE = (
        "SELECT 1 FROM memory_entities WHERE memory_id = ? AND entity_id != ? LIMIT 1"
    )
    DELETE_MEMORY = "DELETE FROM memories WHERE id = ?"
    UNLINK_OBSERVATION = "DELETE FROM memory_entities WHERE memory_id = ? AND entity_id = ?"
    LINKED_MEMORIES = "SELECT memory_id FROM memory_entities WHERE entity_id = ?"
    DELETE_ENTITY = "DELETE FROM entities WHERE id = ?"
    CREATE_RELATION = (
        "INSERT INTO relations (source_id, target_id, relation_type, metadata, created_at)"
        " VALUES (?, ?, ?, ?, ?)"
    )
    SET_RELATION_METADATA = "UPDATE relations SET metadata = ? WHERE id = ?"
    DELETE_RELATION = "DELETE FROM relations WHERE id = ?"
    ALL_EDGES_OF = (
        "SELECT id, source_id, relation_type, target_id FROM relations"
        " WHERE source_id = ? OR target_id = ? ORDER BY id"
    )
    REPOINT_RELATION = "UPDATE relations SET source_id = ?, target_id = ? WHERE id = ?"
    DROP_RELATION_VECTOR = "DELETE FROM vectors WHERE kind = 'relation' AND item_id = ?"

    # -- views and lookups ---------------------------------------------------------------

    # -- reads ---------------------------------------------------------------------------

    def relations_touching(
        self, entity_ids: Sequence[int], view: View, sources_only: bool
    ) -> list[Link]:
        rows: dict[int, Link] = {}
        cols = ["r.source_id"] if sources_only else ["r.source_id", "r.target_id"]
        for part in chunks(list(dict.fromkeys(entity_ids)), CHUNK):
            for col in cols:
                for row in self.conn.execute(
                    f"{LINK} WHERE {col} IN ({marks(len(part))}) AND {rel(view)}", part
                ):
                    rows[row[0]] = link(row)
        return [rows[rid] for rid in sorted(rows)]

    # -- writes ----------------------------------------------------------------------------

    def _next_id(self, table: str) -> int:
        return 1 + self.number(
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

    def link(self, kind: RowKind, row_id: int, scope_ids: Sequence[int]) -> None:
        table = "entity_scopes" if kind == "entity" else "relation_scopes"
        col = "entity_id" if kind == "entity" else "relation_id"
        self.conn.executemany(
            f"INSERT OR IGNORE INTO {table} ({col}, scope_id) VALUES (?, ?)",
            [(row_id, sid) for sid in scope_ids],
        )

    def touch(self, entity_ids: Sequence[int], ts: float) -> None:
        self.conn.executemany(
            "UPDATE entities SET updated_at = ? WHERE id = ?", [(ts, i) for i in entity_ids]
        )

    def duplicate_observations(self, view: View) -> list[tuple[int, list[int]]]:
        rows = self.conn.execute(
            f"""SELECT me.entity_id, group_concat(m.id) FROM memory_entities me
                JOIN memories m ON m.id = me.memory_id
                WHERE {OBS} AND {mem(view)} GROUP BY me.entity_id, m.content HAVING count(*) > 1"""
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

    def fold_relation(self, relation_id: int, into: int) -> None:
        for table, col in (("memory_relations", "memory_id"), ("relation_scopes", "scope_id")):
            self.conn.execute(
                f"INSERT OR IGNORE INTO {table} ({col}, relation_id) "
                f"SELECT {col}, ? FROM {table} WHERE relation_id = ?",
                (into, relation_id),
            )
        self.conn.execute("DELETE FROM relations WHERE id = ?", (relation_id,))
