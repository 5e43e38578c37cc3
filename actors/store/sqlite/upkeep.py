"""`interfaces.upkeep.Upkeep` on SQLite, in SQLite's dialect."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path

from ..interfaces.memories import StoreCounts
from ..interfaces.upkeep import (
    Checkpoint,
    EntityRow,
    FlushCounts,
    IdTable,
    MemoryRow,
    RelationRow,
    Scoped,
    ScopeRow,
    VectorRow,
)
from ..rows import upkeep as shared
from ..rows.scopes import SCOPE_LINKS
from . import schema

_AUTO_VACUUM = {0: "none", 1: "full", 2: "incremental"}
_TRIPLE = """SELECT s.name, r.relation_type, t.name FROM relations r
    JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id WHERE r.id = ?"""


class SqliteUpkeep:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    # -- health and maintenance ---------------------------------------------------------

    def _count(self, table: str) -> int:
        return int(self.conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])

    def counts(self) -> StoreCounts:
        return shared.store_counts(self._count)

    def fts_tables(self) -> list[str]:
        return [
            row[0]
            for row in self.conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND sql LIKE 'CREATE VIRTUAL TABLE%USING fts5%' ORDER BY name"
            )
        ]

    def _file_bytes(self) -> int:
        row = self.conn.execute("PRAGMA database_list").fetchone()
        if not row or not row[2]:
            return 0
        path = Path(row[2])
        return sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file())

    def report(self) -> dict[str, str | int]:
        conn = self.conn
        integrity = [r[0] for r in conn.execute("PRAGMA integrity_check").fetchall()]
        problems = []
        for table in self.fts_tables():  # each external-content index agrees with its table
            try:
                conn.execute(f'INSERT INTO "{table}" ("{table}") VALUES (\'integrity-check\')')
            except sqlite3.DatabaseError as exc:
                problems.append(f"{table}: {exc}")
        return {
            "database_bytes": self._file_bytes(),
            "sqlite": sqlite3.sqlite_version,
            "latest_schema_version": schema.LATEST,
            "schema_version": self.record_version(),
            "journal_mode": conn.execute("PRAGMA journal_mode").fetchone()[0],
            # none: a store made before memtrio set incremental (docs/memory.md: how to switch)
            "auto_vacuum": self.auto_vacuum(),
            "free_pages": self.free_pages(),
            "integrity": "ok" if integrity == ["ok"] else "; ".join(integrity[:5]),
            "fts_integrity": "ok" if not problems else "failed: " + "; ".join(problems),
        }

    def record_version(self) -> int:
        return int(self.conn.execute("PRAGMA user_version").fetchone()[0])

    def auto_vacuum(self) -> str:
        mode = self.conn.execute("PRAGMA auto_vacuum").fetchone()[0]
        return _AUTO_VACUUM.get(mode, "unknown")

    def free_pages(self) -> int:
        return int(self.conn.execute("PRAGMA freelist_count").fetchone()[0])

    def vacuum_step(self, pages: int) -> tuple[int, int]:
        # Python's sqlite3 steps ``PRAGMA incremental_vacuum(N)`` once, which frees one
        # page, so the step runs it once per page.
        free = self.free_pages()
        for _ in range(min(free, pages)):
            self.conn.execute("PRAGMA incremental_vacuum")
        left = self.free_pages()
        return free - left, left

    def fts_merge_step(self, table: str, pages: int) -> bool:
        if table not in self.fts_tables():
            raise ValueError(f"not a full-text index: {table!r}")
        # FTS5's rule: the merge is complete when a step writes fewer than two rows.
        before = self.conn.total_changes
        self.conn.execute(
            f'INSERT INTO "{table}" ("{table}", rank) VALUES (\'merge\', ?)', (-pages,)
        )
        return self.conn.total_changes - before < 2

    def checkpoint(self) -> Checkpoint:
        busy, log, done = self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return Checkpoint(busy=bool(busy), wal_frames=int(log), checkpointed=int(done))

    def data_version(self) -> int:
        return int(self.conn.execute("PRAGMA data_version").fetchone()[0])

    # -- flush ----------------------------------------------------------------------------

    def _counts(self) -> list[int]:
        return [self._count(table) for table in shared.FLUSHED]

    def flush(self, writable: Sequence[str], everything: bool) -> FlushCounts:
        conn = self.conn
        before = self._counts()
        if everything:
            for table in ("memories", "relations", "entities", "vectors", "recall_log", "scopes"):
                conn.execute(f"DELETE FROM {table}")
        else:
            ids = [i for name in writable if (i := self._scope_id(name)) is not None]
            inner = ",".join(str(int(i)) for i in ids) or "-1"  # none: no row is only theirs

            def only_writable(table: str, col: str, alias: str) -> str:
                return (
                    f"NOT EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id "
                    f"AND x.scope_id NOT IN ({inner}))"
                )

            conn.execute(
                "DELETE FROM memories WHERE id IN (SELECT m.id FROM memories m "
                f"WHERE {only_writable('memory_scopes', 'memory_id', 'm')})"
            )
            conn.execute(
                "DELETE FROM relations WHERE id IN (SELECT r.id FROM relations r "
                f"WHERE {only_writable('relation_scopes', 'relation_id', 'r')} "
                "AND NOT EXISTS (SELECT 1 FROM memory_relations mr WHERE mr.relation_id = r.id))"
            )
            conn.execute(
                "DELETE FROM entities WHERE id IN (SELECT e.id FROM entities e "
                f"WHERE {only_writable('entity_scopes', 'entity_id', 'e')} "
                "AND NOT EXISTS (SELECT 1 FROM memory_entities me WHERE me.entity_id = e.id) "
                "AND NOT EXISTS (SELECT 1 FROM relations r "
                "WHERE r.source_id = e.id OR r.target_id = e.id))"
            )
        return shared.flush_counts(before, self._counts())

    # -- export -----------------------------------------------------------------------------

    def _scopes_of(self, kind: Scoped, item: int) -> list[str]:
        table = SCOPE_LINKS[kind]
        rows = self.conn.execute(
            f"SELECT s.name FROM {table} x JOIN scopes s ON s.id = x.scope_id "
            f"WHERE x.{kind}_id = ?",
            (item,),
        )
        return sorted(r[0] for r in rows)

    def _triple(self, relation_id: int) -> list[str] | None:
        row = self.conn.execute(_TRIPLE, (relation_id,)).fetchone()
        return list(row) if row else None

    def scopes(self) -> Iterator[ScopeRow]:
        for sid, name in self.conn.execute("SELECT id, name FROM scopes ORDER BY id"):
            yield ScopeRow(id=sid, name=name)

    def entities(self) -> Iterator[EntityRow]:
        for row in self.conn.execute(f"SELECT {shared.ENTITY_COLUMNS} FROM entities ORDER BY id"):
            yield shared.entity_row(row, self._scopes_of("entity", row[0]))

    def relations(self) -> Iterator[RelationRow]:
        for row in self.conn.execute(
            """SELECT r.id, s.name, r.relation_type, t.name, r.metadata, r.created_at
               FROM relations r JOIN entities s ON s.id = r.source_id
               JOIN entities t ON t.id = r.target_id ORDER BY r.id"""
        ):
            yield shared.relation_row(row, self._scopes_of("relation", row[0]))

    def memories(self) -> Iterator[MemoryRow]:
        for row in self.conn.execute(f"SELECT {shared.MEMORY_COLUMNS} FROM memories ORDER BY id"):
            mid = row[0]
            entities = self.conn.execute(
                "SELECT e.name FROM memory_entities me JOIN entities e ON e.id = me.entity_id "
                "WHERE me.memory_id = ?",
                (mid,),
            ).fetchall()
            relations = self.conn.execute(
                "SELECT relation_id FROM memory_relations WHERE memory_id = ?", (mid,)
            ).fetchall()
            triples = [self._triple(rid) for (rid,) in relations]
            yield shared.memory_row(row, self._scopes_of("memory", mid), entities, triples)

    def vectors(self) -> Iterator[VectorRow]:
        for row in self.conn.execute(
            f"SELECT {shared.VECTOR_COLUMNS} FROM vectors ORDER BY kind, item_id"
        ):
            kind, item, model, revision = row[:4]
            key: int | str | list[str] | None
            if kind == "memory":
                key = item
            elif kind == "entity":
                found = self.conn.execute(
                    "SELECT name FROM entities WHERE id = ?", (item,)
                ).fetchone()
                key = found[0] if found else None
            else:
                key = self._triple(item)
            if key is None:
                continue  # a vector of a row that no longer exists
            # A long text's windows: chunk 0 is in `vectors`, the others (same model) follow it.
            chunks = self.conn.execute(
                "SELECT vec FROM vector_chunks WHERE kind = ? AND item_id = ? AND model = ? "
                "AND revision = ? ORDER BY chunk",
                (kind, item, model, revision),
            )
            yield shared.vector_row(row, key, chunks)

    # -- import -----------------------------------------------------------------------------

    def next_id(self, table: IdTable, at_least: int) -> int:
        name = shared.id_table(table)
        top = self.conn.execute(f"SELECT max(id) FROM {name}").fetchone()[0] or 0
        seq = self.conn.execute(
            "SELECT seq FROM sqlite_sequence WHERE name = ?", (name,)
        ).fetchone()
        return int(max(top, seq[0] if seq else 0, at_least)) + 1

    def id_free(self, table: IdTable, item: int) -> bool:
        name = shared.id_table(table)
        return self.conn.execute(f"SELECT 1 FROM {name} WHERE id = ?", (item,)).fetchone() is None

    def _scope_id(self, name: str) -> int | None:
        row = self.conn.execute("SELECT id FROM scopes WHERE name = ?", (name,)).fetchone()
        return int(row[0]) if row else None

    def add_scope(self, name: str) -> int:
        found = self._scope_id(name)
        if found is not None:
            return found
        return int(
            self.conn.execute("INSERT INTO scopes (name) VALUES (?)", (name,)).lastrowid or 0
        )

    def link_scopes(self, kind: Scoped, item: int, names: Sequence[str]) -> None:
        table = SCOPE_LINKS[kind]
        for name in names:
            self.conn.execute(
                f"INSERT OR IGNORE INTO {table} ({kind}_id, scope_id) VALUES (?, ?)",
                (item, self.add_scope(name)),
            )

    def entity_id(self, name: str) -> int | None:
        row = self.conn.execute("SELECT id FROM entities WHERE name = ?", (name,)).fetchone()
        return int(row[0]) if row else None

    def add_entity(self, row: EntityRow) -> int:
        cur = self.conn.execute(
            f"INSERT INTO entities ({shared.ENTITY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
            shared.entity_values(row),
        )
        return int(cur.lastrowid or row.id)

    def relation_id(self, source_id: int, relation_type: str, target_id: int) -> int | None:
        row = self.conn.execute(
            "SELECT id FROM relations WHERE source_id = ? AND relation_type = ? AND target_id = ?",
            (source_id, relation_type, target_id),
        ).fetchone()
        return int(row[0]) if row else None

    def add_relation(self, row: RelationRow, source_id: int, target_id: int) -> int:
        cur = self.conn.execute(
            "INSERT INTO relations (id, source_id, target_id, relation_type, metadata, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (row.id, source_id, target_id, row.relation_type, row.metadata, row.created_at),
        )
        return int(cur.lastrowid or row.id)

    def memory_present(self, memory_id: int, content: str, created_at: float) -> bool:
        return (
            self.conn.execute(
                "SELECT 1 FROM memories WHERE id = ? AND content = ? AND created_at = ?",
                (memory_id, content, created_at),
            ).fetchone()
            is not None
        )

    def add_memory(self, row: MemoryRow) -> int:
        cur = self.conn.execute(
            f"INSERT INTO memories ({shared.MEMORY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            shared.memory_values(row),
        )  # fmt: skip
        return int(cur.lastrowid or row.id)

    def link_memory(
        self, memory_id: int, entity_ids: Sequence[int], relation_ids: Sequence[int]
    ) -> None:
        for eid in entity_ids:
            self.conn.execute(
                "INSERT OR IGNORE INTO memory_entities (memory_id, entity_id) VALUES (?, ?)",
                (memory_id, eid),
            )
        for rid in relation_ids:
            self.conn.execute(
                "INSERT OR IGNORE INTO memory_relations (memory_id, relation_id) VALUES (?, ?)",
                (memory_id, rid),
            )
