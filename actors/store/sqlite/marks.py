"""`interfaces.marks.IdMarks` on SQLite: AUTOINCREMENT's high-water marks (``sqlite_sequence``)."""

from __future__ import annotations

import sqlite3

from ..interfaces.marks import MARKED_TABLES, MarkedTable


class SqliteIdMarks:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def high_mark(self, table: MarkedTable) -> int:
        if table not in MARKED_TABLES:  # a table name is part of the statement
            raise ValueError(f"no id high-water mark for table {table!r}")
        row = self.conn.execute(
            f"SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = ?), 0),"
            f" coalesce((SELECT max(id) FROM {table}), 0))",
            (table,),
        ).fetchone()
        return int(row[0])

    def next_id(self, table: MarkedTable) -> int:
        return self.high_mark(table) + 1
