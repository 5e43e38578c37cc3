"""`interfaces.anchors.Anchors` on SQLite: `rows.anchors.AnchorsBase` with SQLite's
statements (the ``memory_anchors`` table)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..rows.anchors import COLUMNS, AnchorsBase
from .params import id_list
from .statements import SqliteRows


class SqliteAnchors(AnchorsBase, SqliteRows):
    MARK = "?"
    MEMORY_EXISTS = "SELECT 1 FROM memories WHERE id = ?"
    DELETE = "DELETE FROM memory_anchors WHERE memory_id = ?"
    INSERT = (
        f"INSERT INTO memory_anchors (memory_id, position, {COLUMNS})"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
    )

    def in_scopes(self, scope_ids: Sequence[int]) -> tuple[str, list[Any]]:
        return (
            "EXISTS (SELECT 1 FROM memory_scopes ms WHERE ms.memory_id = a.memory_id"
            f" AND ms.scope_id IN ({id_list(scope_ids)}))"
        ), []
