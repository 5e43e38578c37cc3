"""`rows.sql.Rows` on a SQLite connection: its statements run with sqlite3's ``execute``."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from ..rows.sql import Cursor, Params, Rows


class SqliteRows(Rows):
    """A concept's statements on one SQLite connection (``?`` and ``:name`` placeholders)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def run(self, sql: str, params: Params = ()) -> Cursor:
        return self.conn.execute(sql, params)

    def run_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self.conn.executemany(sql, rows)

    def insert_id(self, sql: str, params: Params) -> int:
        rowid = self.conn.execute(sql, params).lastrowid
        assert rowid is not None
        return rowid
