"""`rows.sql.Rows` on a SQLite connection: its statements run with sqlite3's ``execute``."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

from ..rows.sql import Cursor, Params, Rows
from .params import chunks, marks

T = TypeVar("T")
# Values in one ``IN (...)`` list (SQLite's parameter limit is far above).
CHUNK = 500


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

    def one_of(self, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"IN ({marks(len(values))})", list(values)

    def parts(self, values: Sequence[T]) -> Iterator[list[T]]:
        return chunks(values, CHUNK)
