"""`interfaces.recall_log.RecallLog` on PostgreSQL, in PostgreSQL's own dialect (`PgConnection.native`)."""

from __future__ import annotations

from collections.abc import Iterator

from ..interfaces.recall_log import RecallEntry
from ..rows.recall_log import COLUMNS, recall_entry, values
from .conn import PgConnection


class PgRecallLog:
    def __init__(self, conn: PgConnection) -> None:
        self.conn = conn

    def count_access(self, memory_id: int, at: float) -> None:
        self.conn.native(
            "UPDATE memories SET access_count = access_count + 1, last_accessed_at = %s "
            "WHERE id = %s",
            (at, memory_id),
        )

    def append(self, entry: RecallEntry) -> None:
        self.conn.native(
            f"INSERT INTO recall_log ({COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s)",
            values(entry),
        )

    def append_new(self, entry: RecallEntry) -> bool:
        exists = self.conn.native(
            "SELECT 1 FROM recall_log WHERE ts = %s AND kind = %s AND query = %s",
            (entry.ts, entry.kind, entry.query),
        ).fetchone()
        if exists:
            return False
        self.append(entry)
        return True

    def newest(self, limit: int, kind: str | None = None) -> list[RecallEntry]:
        if kind is None:
            cur = self.conn.native(
                f"SELECT {COLUMNS} FROM recall_log ORDER BY id DESC LIMIT %s", (limit,)
            )
        else:
            cur = self.conn.native(
                f"SELECT {COLUMNS} FROM recall_log WHERE kind = %s ORDER BY id DESC LIMIT %s",
                (kind, limit),
            )
        return [recall_entry(r) for r in cur.fetchall()]

    def entries(self) -> Iterator[RecallEntry]:
        cur = self.conn.native(f"SELECT {COLUMNS} FROM recall_log ORDER BY id")
        while rows := cur.fetchmany(500):
            for row in rows:
                yield recall_entry(row)
