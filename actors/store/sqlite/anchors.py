"""`interfaces.anchors.Anchors` on SQLite, in SQLite's dialect (the ``memory_anchors`` table)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from ..interfaces.anchors import Anchor, check_anchors, no_memory, wanted
from .params import chunks, id_list, marks

_COLUMNS = "path, symbol, kind, git_commit, digest, written_at"
MAX_ID = 2**63 - 1  # SQLite's INTEGER


def _bounded(value: int) -> int:
    """An id or count as SQLite binds it (a larger Python int would fail the statement)."""
    return max(-1, min(int(value), MAX_ID))


def _in_scopes(scope_ids: Sequence[int]) -> str:
    """SQL true for an anchor (``a``) of a memory linked to one of the scope ids."""
    return (
        "EXISTS (SELECT 1 FROM memory_scopes ms WHERE ms.memory_id = a.memory_id"
        f" AND ms.scope_id IN ({id_list(scope_ids)}))"
    )


class SqliteAnchors:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def set(self, memory_id: int, anchors: Sequence[Anchor]) -> None:
        rows = check_anchors(anchors)
        if not 1 <= memory_id <= MAX_ID or (
            self.conn.execute("SELECT 1 FROM memories WHERE id = ?", (memory_id,)).fetchone()
            is None
        ):
            raise no_memory(memory_id)
        self.conn.execute("DELETE FROM memory_anchors WHERE memory_id = ?", (memory_id,))
        self.conn.executemany(
            f"INSERT INTO memory_anchors (memory_id, position, {_COLUMNS})"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (memory_id, i, a.path, a.symbol, a.kind, a.commit, a.digest, float(a.written_at))
                for i, a in enumerate(rows)
            ],
        )

    def of(self, memory_ids: Sequence[int]) -> dict[int, list[Anchor]]:
        out: dict[int, list[Anchor]] = {}
        for part in chunks(sorted({i for i in memory_ids if 1 <= i <= MAX_ID})):
            for memory_id, *fields in self.conn.execute(
                f"SELECT memory_id, {_COLUMNS} FROM memory_anchors"
                f" WHERE memory_id IN ({id_list(part)}) ORDER BY memory_id, position"
            ):
                path, symbol, kind, commit, digest, written_at = fields
                out.setdefault(int(memory_id), []).append(
                    Anchor(
                        str(path),
                        str(symbol),
                        str(kind),
                        str(commit),
                        str(digest),
                        float(written_at),
                    )
                )
        return out

    def at(
        self, paths: Sequence[str], symbols: Sequence[str], scope_ids: Sequence[int]
    ) -> list[int]:
        if not scope_ids:
            return []
        found: set[int] = set()
        scoped = _in_scopes(scope_ids)
        by_path, by_symbol = wanted(paths, symbols)
        for column, values in (("path", by_path), ("symbol", by_symbol)):
            for part in chunks(values):
                found.update(
                    int(r[0])
                    for r in self.conn.execute(
                        f"SELECT DISTINCT a.memory_id FROM memory_anchors a"
                        f" WHERE a.{column} IN ({marks(len(part))}) AND {scoped}",
                        part,
                    )
                )
        return sorted(found)

    def anchored(self, scope_ids: Sequence[int], after: int, limit: int) -> list[int]:
        if limit <= 0 or not scope_ids:
            return []  # a negative LIMIT is no limit in SQLite
        rows = self.conn.execute(
            "SELECT DISTINCT a.memory_id FROM memory_anchors a"
            f" WHERE a.memory_id > ? AND {_in_scopes(scope_ids)} ORDER BY a.memory_id LIMIT ?",
            (_bounded(after), _bounded(limit)),
        )
        return [int(r[0]) for r in rows]

    def count(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM memory_anchors").fetchone()[0])
