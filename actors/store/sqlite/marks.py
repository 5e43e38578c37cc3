"""`interfaces.marks.IdMarks` on SQLite: AUTOINCREMENT's high-water marks (``sqlite_sequence``)."""

from __future__ import annotations

from ..rows.marks import IdMarksBase
from .statements import SqliteRows


class SqliteIdMarks(IdMarksBase, SqliteRows):
    HIGH_MARK = (
        "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = ?), 0),"
        " coalesce((SELECT max(id) FROM {table}), 0))"
    )
