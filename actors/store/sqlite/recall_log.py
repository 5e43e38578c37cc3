"""`interfaces.recall_log.RecallLog` on SQLite: `rows.recall_log.RecallLogBase` with SQLite's
statements."""

from __future__ import annotations

from ..rows.recall_log import COLUMNS, RecallLogBase
from .statements import SqliteRows


class SqliteRecallLog(RecallLogBase, SqliteRows):
    COUNT_ACCESS = (
        "UPDATE memories SET access_count = access_count + 1, last_accessed_at = ? WHERE id = ?"
    )
    APPEND = f"INSERT INTO recall_log ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)"
    FIND = "SELECT 1 FROM recall_log WHERE ts = ? AND kind = ? AND query = ?"
    NEWEST = f"SELECT {COLUMNS} FROM recall_log ORDER BY id DESC LIMIT ?"
    NEWEST_OF_KIND = f"SELECT {COLUMNS} FROM recall_log WHERE kind = ? ORDER BY id DESC LIMIT ?"
