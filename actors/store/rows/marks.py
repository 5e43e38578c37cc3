"""Id high-water marks, the same on both backends (`interfaces.marks`)."""

from __future__ import annotations

from typing import ClassVar

from ..interfaces.marks import MARKED_TABLES, MarkedTable
from .sql import Rows


class IdMarksBase(Rows):
    """`interfaces.marks.IdMarks`'s bodies; each backend names its statement."""

    HIGH_MARK: ClassVar[str]  # (table,): the mark; a statement per table ({table} in it)

    def high_mark(self, table: MarkedTable) -> int:
        if table not in MARKED_TABLES:  # a table name is part of the statement
            raise ValueError(f"no id high-water mark for table {table!r}")
        return self.number(self.HIGH_MARK.format(table=table), (table,))

    def next_id(self, table: MarkedTable) -> int:
        return self.high_mark(table) + 1
