"""`interfaces.upkeep.Upkeep` on SQLite, in SQLite's dialect."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ..interfaces.upkeep import (
    Checkpoint,
)
from ..rows import upkeep as shared
from ..rows.sql import Params
from . import schema
from .statements import SqliteRows

_AUTO_VACUUM = {0: "none", 1: "full", 2: "incremental"}


class SqliteUpkeep(shared.UpkeepBase, SqliteRows):
    MARK = "?"
    SCOPES_OF = (
        "SELECT s.name FROM {table} x JOIN scopes s ON s.id = x.scope_id WHERE x.{kind}_id = ?"
    )
    TRIPLE = """SELECT s.name, r.relation_type, t.name FROM relations r
        JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id
        WHERE r.id = ?"""
    ENTITY_NAME = "SELECT name FROM entities WHERE id = ?"
    MEMORY_ENTITIES = (
        "SELECT e.name FROM memory_entities me JOIN entities e ON e.id = me.entity_id"
        " WHERE me.memory_id = ?"
    )
    MEMORY_RELATIONS = "SELECT relation_id FROM memory_relations WHERE memory_id = ?"
    LATER_WINDOWS = (
        "SELECT vec FROM vector_chunks WHERE kind = ? AND item_id = ? AND model = ?"
        " AND revision = ? ORDER BY chunk"
    )
    SEQ = "SELECT seq FROM sqlite_sequence WHERE name = ?"
    ID_TAKEN = "SELECT 1 FROM {table} WHERE id = ?"
    SCOPE_ID = "SELECT id FROM scopes WHERE name = ?"
    ADD_SCOPE = "INSERT INTO scopes (name) VALUES (?)"
    LINK_SCOPE = "INSERT OR IGNORE INTO {table} ({kind}_id, scope_id) VALUES (?, ?)"
    ENTITY_ID = "SELECT id FROM entities WHERE name = ?"
    ADD_ENTITY = f"INSERT INTO entities ({shared.ENTITY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)"
    RELATION_ID = (
        "SELECT id FROM relations WHERE source_id = ? AND relation_type = ? AND target_id = ?"
    )
    ADD_RELATION = (
        "INSERT INTO relations (id, source_id, target_id, relation_type, metadata, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?)"
    )
    MEMORY_PRESENT = "SELECT 1 FROM memories WHERE id = ? AND content = ? AND created_at = ?"
    ADD_MEMORY = f"INSERT INTO memories ({shared.MEMORY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
    LINK_ENTITY = "INSERT OR IGNORE INTO memory_entities (memory_id, entity_id) VALUES (?, ?)"
    LINK_RELATION = "INSERT OR IGNORE INTO memory_relations (memory_id, relation_id) VALUES (?, ?)"

    def only_writable(self, ids: list[int]) -> tuple[str, Params]:
        inner = ",".join(str(int(i)) for i in ids) or "-1"  # none: no row is only theirs
        return (
            "NOT EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id"
            f" AND x.scope_id NOT IN ({inner}))"
        ), ()

    # -- health and maintenance ---------------------------------------------------------

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

    # -- export -----------------------------------------------------------------------------

    # -- import -----------------------------------------------------------------------------
