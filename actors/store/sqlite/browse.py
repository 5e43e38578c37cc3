"""`interfaces.browse.Browse` on SQLite, in SQLite's dialect."""

from __future__ import annotations

import sqlite3


class SqliteBrowse:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
