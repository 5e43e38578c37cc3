"""`interfaces.anchors.Anchors` on PostgreSQL: `rows.anchors.AnchorsBase` with PostgreSQL's
own statements (`PgConnection.native`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..rows.anchors import COLUMNS, MAX_ID, AnchorsBase
from .statements import PgRows


class PgAnchors(AnchorsBase, PgRows):
    MARK = "%s"
    MEMORY_EXISTS = "SELECT 1 FROM memories WHERE id = %s"
    DELETE = "DELETE FROM memory_anchors WHERE memory_id = %s"
    INSERT = (
        f"INSERT INTO memory_anchors (memory_id, position, {COLUMNS})"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
    )

    def in_scopes(self, scope_ids: Sequence[int]) -> tuple[str, list[Any]]:
        return (
            "EXISTS (SELECT 1 FROM memory_scopes ms WHERE ms.memory_id = a.memory_id"
            " AND ms.scope_id = ANY(%s::bigint[]))"
        ), [sorted({int(i) for i in scope_ids if 1 <= i <= MAX_ID})]
