"""`interfaces.recall_log.RecallLog` on PostgreSQL: `rows.recall_log.RecallLogBase` with
PostgreSQL's own statements (`PgConnection.native`)."""

from __future__ import annotations

from ..rows.recall_log import COLUMNS, RecallLogBase
from .statements import PgRows


class PgRecallLog(RecallLogBase, PgRows):
    COUNT_ACCESS = (
        "UPDATE memories SET access_count = access_count + 1, last_accessed_at = %s WHERE id = %s"
    )
    APPEND = f"INSERT INTO recall_log ({COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s)"
    FIND = "SELECT 1 FROM recall_log WHERE ts = %s AND kind = %s AND query = %s"
    NEWEST = f"SELECT {COLUMNS} FROM recall_log ORDER BY id DESC LIMIT %s"
    NEWEST_OF_KIND = f"SELECT {COLUMNS} FROM recall_log WHERE kind = %s ORDER BY id DESC LIMIT %s"
