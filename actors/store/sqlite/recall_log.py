"""`interfaces.recall_log.RecallLog` on SQLite, in SQLite's dialect."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

from ..interfaces.recall_log import RecallEntry
from ..rows.recall_log import COLUMNS, recall_entry, values


class SqliteRecallLog:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def count_access(self, memory_id: int, at: float) -> None:
        self.conn.execute(
            "UPDATE memories SET access_count = access_count + 1, last_accessed_at = ? WHERE id = ?",
            (at, memory_id),
        )

    def append(self, entry: RecallEntry) -> None:
        self.conn.execute(
            f"INSERT INTO recall_log ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
            values(entry),
        )

    def append_new(self, entry: RecallEntry) -> bool:
        exists = self.conn.execute(
            "SELECT 1 FROM recall_log WHERE ts = ? AND kind = ? AND query = ?",
            (entry.ts, entry.kind, entry.query),
        ).fetchone()
        if exists:
            return False
        self.append(entry)
        return True

    def newest(self, limit: int, kind: str | None = None) -> list[RecallEntry]:
        if kind is None:
            rows = self.conn.execute(
                f"SELECT {COLUMNS} FROM recall_log ORDER BY id DESC LIMIT ?", (limit,)
            )
        else:
            rows = self.conn.execute(
                f"SELECT {COLUMNS} FROM recall_log WHERE kind = ? ORDER BY id DESC LIMIT ?",
                (kind, limit),
            )
        return [recall_entry(r) for r in rows]

    def entries(self) -> Iterator[RecallEntry]:
        for row in self.conn.execute(f"SELECT {COLUMNS} FROM recall_log ORDER BY id"):
            yield recall_entry(row)
