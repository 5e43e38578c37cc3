"""`rows.sql.Rows` on a PostgreSQL connection: its statements run with `PgConnection.native`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..rows.sql import Cursor, Params, Rows
from .conn import PgConnection


class PgRows(Rows):
    """A concept's statements on one PostgreSQL connection (``%s`` and ``%(name)s``
    placeholders, PostgreSQL's own dialect, nothing rewritten)."""

    def __init__(self, conn: PgConnection) -> None:
        self.conn = conn

    def run(self, sql: str, params: Params = ()) -> Cursor:
        return self.conn.native(sql, dict(params) if isinstance(params, Mapping) else params)

    def run_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self.conn.native_many(sql, rows)

    def insert_id(self, sql: str, params: Params) -> int:
        """``sql`` ends ``RETURNING id``."""
        row = self.run(sql, params).fetchone()
        assert row is not None
        return int(row[0])

    def one_of(self, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return "= ANY(%s)", [list(values)]
