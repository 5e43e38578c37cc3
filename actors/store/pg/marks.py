"""`interfaces.marks.IdMarks` on PostgreSQL: the ``id_marks`` table, which the tables' ``next_id``
trigger keeps (`pg.schema`): never below the highest id a row was given."""

from __future__ import annotations

from ..interfaces.marks import MARKED_TABLES, MarkedTable
from .conn import PgConnection


class PgIdMarks:
    def __init__(self, conn: PgConnection) -> None:
        self.conn = conn

    def high_mark(self, table: MarkedTable) -> int:
        if table not in MARKED_TABLES:
            raise ValueError(f"no id high-water mark for table {table!r}")
        row = self.conn.native("SELECT seq FROM id_marks WHERE name = %s", (table,)).fetchone()
        return int(row[0]) if row else 0

    def next_id(self, table: MarkedTable) -> int:
        return self.high_mark(table) + 1
