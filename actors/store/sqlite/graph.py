"""`interfaces.graph.Graph` on SQLite, in SQLite's dialect."""

from __future__ import annotations

import sqlite3


class SqliteGraph:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
