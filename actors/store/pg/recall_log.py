"""`interfaces.recall_log.RecallLog` on PostgreSQL, in PostgreSQL's own dialect (`PgConnection.native`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..interfaces.recall_log import RecallEntry
from .conn import PgConnection

_COLUMNS = "ts, kind, query, scopes, ids, scores"


def _entry(row: tuple[Any, ...]) -> RecallEntry:
    ts, kind, query, scopes, ids, scores = row
    return RecallEntry(ts=ts, kind=kind, query=query, scopes=scopes, ids=ids, scores=scores)


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
            f"INSERT INTO recall_log ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s)",
            (entry.ts, entry.kind, entry.query, entry.scopes, entry.ids, entry.scores),
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
                f"SELECT {_COLUMNS} FROM recall_log ORDER BY id DESC LIMIT %s", (limit,)
            )
        else:
            cur = self.conn.native(
                f"SELECT {_COLUMNS} FROM recall_log WHERE kind = %s ORDER BY id DESC LIMIT %s",
                (kind, limit),
            )
        return [_entry(r) for r in cur.fetchall()]

    def entries(self) -> Iterator[RecallEntry]:
        cur = self.conn.native(f"SELECT {_COLUMNS} FROM recall_log ORDER BY id")
        while rows := cur.fetchmany(500):
            for row in rows:
                yield _entry(row)
