"""`Writer`: one graph write call's state and its row-level writes.

Each write runs inside the transaction its caller opened (the StoreWriter for
the tools, the CLI's import for a file) and never commits, so one tool call is
one transaction. Writes go to the current scope. Who may change or delete a
row is ``store.ownership``'s rule, checked through the Writer: a row shared
with a scope this server may not write keeps its attributes (a change is
refused before anything is written, a link keeps them with a warning), and
deleting a shared entity or relation only unlinks the writable scopes, so
another repository's view is never changed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import msgspec

from ..store import ops
from ..store.dialect import is_postgres
from ..store.ops import Vec
from ..store.ownership import Ownership
from ..store.writer import Change
from .lookup import OBSERVATION, Ent
from .view import Scoped, View


@dataclass
class Vectors:
    """Embeddings computed before the write: by observation text and by entity name."""

    observations: dict[str, Vec] = field(default_factory=dict)
    entities: dict[str, Vec] = field(default_factory=dict)


def _next_id(conn: sqlite3.Connection, table: str) -> int:
    """The id AUTOINCREMENT gives the next row of ``table`` (the caller holds the write lock)."""
    if is_postgres(conn):  # its high-water mark is never below max(id) (store.pg.schema)
        return (
            int(conn.execute(f"SELECT seq FROM id_marks WHERE name = '{table}'").fetchone()[0]) + 1
        )
    row = conn.execute(
        f"SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = '{table}'), 0),"
        f" coalesce((SELECT max(id) FROM {table}), 0))"
    ).fetchone()
    return int(row[0]) + 1


_rows = msgspec.json.Encoder()
# SQLite has its JSON functions built in from 3.38 (before, only when compiled with them).
JSON_ROWS = sqlite3.sqlite_version_info >= (3, 38, 0)


class RowBatch:
    """New entities and observations of one call, written at `flush` with one INSERT per table.

    Each INSERT statement ends with FTS5 writing out its pending terms (the
    statement's savepoint), so a statement per row costs about twice as much
    per row as one statement for the batch (docs/benchmarks.md, "Knowledge
    graph"). Ids are given here as AUTOINCREMENT would give them: the
    transaction holds the write lock, so nobody else takes one meanwhile.
    """

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.next_entity = _next_id(conn, "entities")
        self.next_memory = _next_id(conn, "memories")
        self.entities: list[tuple[int, str, str, str]] = []
        self.memories: list[tuple[int, str, int]] = []
        self.vectors: list[tuple[str, int, Vec]] = []

    def entity(self, name: str, canon: str, kind: str) -> int:
        eid = self.next_entity
        self.next_entity += 1
        self.entities.append((eid, name, canon, kind))
        return eid

    def memory(self, content: str, entity_id: int) -> int:
        mid = self.next_memory
        self.next_memory += 1
        self.memories.append((mid, content, entity_id))
        return mid

    def flush(self, ts: float, scope_id: int) -> None:
        """Write the rows (entities, their scope links, memories, theirs, the entity links, vectors)."""
        conn, ents, mems = self.conn, self.entities, self.memories
        if (
            not JSON_ROWS
            or is_postgres(conn)  # psycopg pipelines executemany: one round trip
            or any("\x00" in t for row in ents for t in row[1:])
            or any("\x00" in m[1] for m in mems)
        ):
            self._flush_rows(ts, scope_id)  # JSON text in SQLite ends at a NUL: bind each row
        else:
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
                    f"SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), '{OBSERVATION}', 0.0, ?, ? "
                    "FROM json_each(?)",
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
        for kind, item, vec in self.vectors:
            ops.put_vector(conn, kind, item, vec)
        self.entities, self.memories, self.vectors = [], [], []

    def _flush_rows(self, ts: float, scope_id: int) -> None:
        conn = self.conn
        conn.executemany(
            "INSERT INTO entities (id, name, canonical_name, kind, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
            [(*row, ts, ts) for row in self.entities],
        )
        conn.executemany(
            "INSERT OR IGNORE INTO entity_scopes (entity_id, scope_id) VALUES (?, ?)",
            [(row[0], scope_id) for row in self.entities],
        )
        conn.executemany(
            "INSERT INTO memories (id, content, memory_type, importance, created_at, updated_at) VALUES (?, ?, ?, 0.0, ?, ?)",
            [(mid, content, OBSERVATION, ts, ts) for mid, content, _ in self.memories],
        )
        conn.executemany(
            "INSERT INTO memory_scopes (memory_id, scope_id) VALUES (?, ?)",
            [(mid, scope_id) for mid, _, _ in self.memories],
        )
        conn.executemany(
            "INSERT INTO memory_entities (memory_id, entity_id) VALUES (?, ?)",
            [(mid, eid) for mid, _, eid in self.memories],
        )


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
        self.batch: RowBatch | None = None

    def start_batch(self) -> None:
        """Collect new entities and observations (`RowBatch`) until `flush`: no read of
        this call may look for them in the database before then."""
        self.batch = RowBatch(self.conn)

    def flush(self) -> None:
        """Write the rows collected since `start_batch`; later writes go straight to the database."""
        if self.batch is not None:
            self.batch.flush(self.ts, self.scope_id)
            self.batch = None

    def change(self, kind: str, item: int, vec: Vec | None = None, deleted: bool = False) -> None:
        self.changes.append(ops.change_of(kind, item, vec, deleted))

    def add_observation(self, entity_id: int, content: str) -> int:
        vec = self.vectors.observations.get(content)
        if self.batch is not None:
            mid = self.batch.memory(content, entity_id)
            if vec is not None:
                self.batch.vectors.append(("memory", mid, vec))
            self.change("memory", mid, vec)
            return mid
        conn = self.conn
        mid = conn.execute(
            "INSERT INTO memories (content, memory_type, importance, created_at, updated_at) VALUES (?, ?, 0.0, ?, ?)",
            (content, OBSERVATION, self.ts, self.ts),
        ).lastrowid
        assert mid is not None
        conn.execute(
            "INSERT INTO memory_scopes (memory_id, scope_id) VALUES (?, ?)", (mid, self.scope_id)
        )
        conn.execute(
            "INSERT INTO memory_entities (memory_id, entity_id) VALUES (?, ?)", (mid, entity_id)
        )
        if vec is not None:
            ops.put_vector(conn, "memory", mid, vec)
        self.change("memory", mid, vec)
        return mid

    def add_new_observations(
        self, entity_id: int, contents: Sequence[str], have: set[str], repeats: bool = False
    ) -> list[str]:
        """Add the ``contents`` not in ``have`` (all of them with ``repeats``); returns those added.

        ``have`` (the entity's observation texts) grows with each one added.
        """
        added = []
        for content in contents:
            if content in have and not repeats:
                continue
            self.add_observation(entity_id, content)
            have.add(content)
            added.append(content)
        return added

    def create_entity(self, name: str, kind: str) -> Ent:
        canon = ops.canonical_name(name)  # not the identity: the key of forgiving lookups
        vec = self.vectors.entities.get(name)
        if self.batch is not None:
            eid = self.batch.entity(name, canon, kind)
            if vec is not None:
                self.batch.vectors.append(("entity", eid, vec))
            self.change("entity", eid, vec)
            return Ent(eid, name, kind, canon)
        eid = self.conn.execute(
            "INSERT INTO entities (name, canonical_name, kind, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
            (name, canon, kind, self.ts, self.ts),
        ).lastrowid
        assert eid is not None
        self.link_entity(eid)
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

    def set_type(self, ent: Ent, kind: str) -> None:
        """Change an entity's type (the caller checked it is owned here)."""
        self.conn.execute(
            "UPDATE entities SET kind = ?, updated_at = ? WHERE id = ?", (kind, self.ts, ent.id)
        )
        ent.kind = kind

    def drop_observation(self, mid: int, entity_id: int) -> None:
        """Remove an observation (a memory owned here) from an entity.

        The memory row is deleted when this entity is its only link; otherwise
        only the link goes. Error handling: a memory
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
            return
        conn.execute(
            "DELETE FROM memory_entities WHERE memory_id = ? AND entity_id = ?", (mid, entity_id)
        )
        self.change("memory", mid)

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
