"""`interfaces.marks.IdMarks` on PostgreSQL: the ``id_marks`` table, which the tables' ``next_id``
trigger keeps (`pg.schema`): never below the highest id a row was given."""

from __future__ import annotations

from ..rows.marks import IdMarksBase
from .statements import PgRows


class PgIdMarks(IdMarksBase, PgRows):
    HIGH_MARK = "SELECT seq FROM id_marks WHERE name = %s"
