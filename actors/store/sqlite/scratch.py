"""Scratch tables of an import, off the heap: a temporary SQLite database on disk of its own
(not the store), so checking and writing a file of millions of records keeps memory bounded.

`KeySet` holds what a file defined so far (`transfer.check`); `ImportMap` the file's memory
ids and entity keys mapped to the store's (`transfer.import_records`).
"""

from __future__ import annotations

import sqlite3

Key = int | str


class KeySet:
    """A set of (kind, key) pairs."""

    def __init__(self) -> None:
        self._db = sqlite3.connect("", isolation_level=None)
        self._db.execute(
            "CREATE TABLE seen (kind TEXT, key, PRIMARY KEY (kind, key)) WITHOUT ROWID"
        )
        self._db.execute("BEGIN")

    def add(self, kind: str, key: Key) -> bool:
        """Record ``key``; False when it was already there."""
        try:
            self._db.execute("INSERT INTO seen VALUES (?, ?)", (kind, key))
        except sqlite3.IntegrityError:
            return False
        return True

    def has(self, kind: str, key: Key) -> bool:
        found = self._db.execute(
            "SELECT 1 FROM seen WHERE kind = ? AND key = ?", (kind, key)
        ).fetchone()
        return found is not None

    def close(self) -> None:
        self._db.close()


class ImportMap:
    """The file's memory ids -> the store's (and the content's length); the file's entity
    keys -> the store's ids."""

    def __init__(self) -> None:
        self._db = sqlite3.connect("", isolation_level=None)
        self._db.execute("CREATE TABLE m (old INTEGER PRIMARY KEY, new INTEGER, length INTEGER)")
        self._db.execute("CREATE TABLE e (key TEXT PRIMARY KEY, id INTEGER) WITHOUT ROWID")
        self._db.execute("BEGIN")

    def put_memory(self, old: int, new: int, length: int) -> None:
        self._db.execute("INSERT INTO m VALUES (?, ?, ?)", (old, new, length))

    def memory(self, old: int) -> tuple[int, int]:
        """(the store's id, the content's length) of the file's memory ``old``."""
        new, length = self._db.execute("SELECT new, length FROM m WHERE old = ?", (old,)).fetchone()
        return int(new), int(length)

    def put_entity(self, key: str, entity_id: int) -> None:
        self._db.execute("INSERT INTO e VALUES (?, ?)", (key, entity_id))

    def entity(self, key: str) -> int:
        """The store's id of the entity the file refers to as ``key``."""
        return int(self._db.execute("SELECT id FROM e WHERE key = ?", (key,)).fetchone()[0])

    def close(self) -> None:
        self._db.close()
