"""The scopes one graph call sees and writes, and the SQL filters that apply them.

Scopes follow the memory tools' rules (``store.scopes``): reads see the
entities, relations and observations of the selected scopes (the current
repository plus ``global``); writes go to the current scope. A row linked to
no scope at all is visible everywhere.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from ..store import ops


@dataclass
class View:
    """The scopes one call reads (``selection``) and may write (``writable``, ``current`` first)."""

    selection: list[str]
    writable: list[str]
    current: str


class Scoped:
    """SQL visibility filters of a `View`, resolved to scope ids inside the transaction."""

    def __init__(self, conn: sqlite3.Connection, view: View) -> None:
        self.view = view
        ids = ops.scope_ids(conn, [*view.selection, *view.writable])
        self.read_ids = sorted({ids[s] for s in view.selection if s in ids})
        self.write_ids = sorted({ids[s] for s in view.writable if s in ids})
        self._inner = ",".join(str(i) for i in self.read_ids) or "NULL"
        # Every scope of the store is read (one repository, or none but ``global``):
        # every row is visible, linked to a read scope or to none, so no filter is needed.
        scopes = conn.execute("SELECT count(*) FROM scopes").fetchone()[0]
        self.sees_all = len(self.read_ids) == scopes

    def _vis(self, table: str, col: str, alias: str) -> str:
        if self.sees_all:
            return "(1 = 1)"
        return (
            f"(EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id AND x.scope_id IN ({self._inner}))"
            f" OR NOT EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id))"
        )

    def entity(self, alias: str = "e") -> str:
        return self._vis("entity_scopes", "entity_id", alias)

    def relation(self, alias: str = "r") -> str:
        return self._vis("relation_scopes", "relation_id", alias)

    def memory(self, alias: str = "m") -> str:
        return self._vis("memory_scopes", "memory_id", alias)
