"""`interfaces.anchors.Anchors` on PostgreSQL, in PostgreSQL's own dialect (`PgConnection.native`)."""

from __future__ import annotations

from collections.abc import Sequence

from ..interfaces.anchors import Anchor, check_anchors, no_memory, wanted
from .conn import PgConnection

_COLUMNS = "path, symbol, kind, git_commit, digest, written_at"
MAX_ID = 2**63 - 1  # bigint

# An anchor (``a``) of a memory linked to one of the scope ids ``%(scopes)s``.
_IN_SCOPES = """EXISTS (SELECT 1 FROM memory_scopes ms WHERE ms.memory_id = a.memory_id
                        AND ms.scope_id = ANY(%(scopes)s::bigint[]))"""


def _bounded(value: int) -> int:
    """An id or count as a bigint (a larger Python int would fail the statement)."""
    return max(-1, min(int(value), MAX_ID))


def _ids(values: Sequence[int]) -> list[int]:
    return sorted({int(i) for i in values if 1 <= i <= MAX_ID})


class PgAnchors:
    def __init__(self, conn: PgConnection) -> None:
        self.conn = conn

    def set(self, memory_id: int, anchors: Sequence[Anchor]) -> None:
        rows = check_anchors(anchors)
        if not 1 <= memory_id <= MAX_ID or (
            self.conn.native("SELECT 1 FROM memories WHERE id = %s", (memory_id,)).fetchone()
            is None
        ):
            raise no_memory(memory_id)
        self.conn.native("DELETE FROM memory_anchors WHERE memory_id = %s", (memory_id,))
        if rows:
            self.conn.native_many(
                f"INSERT INTO memory_anchors (memory_id, position, {_COLUMNS})"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                [
                    (
                        memory_id,
                        i,
                        a.path,
                        a.symbol,
                        a.kind,
                        a.commit,
                        a.digest,
                        float(a.written_at),
                    )
                    for i, a in enumerate(rows)
                ],
            )

    def of(self, memory_ids: Sequence[int]) -> dict[int, list[Anchor]]:
        out: dict[int, list[Anchor]] = {}
        ids = _ids(memory_ids)
        if not ids:
            return out
        for memory_id, path, symbol, kind, commit, digest, written_at in self.conn.native(
            f"SELECT memory_id, {_COLUMNS} FROM memory_anchors"
            " WHERE memory_id = ANY(%s::bigint[]) ORDER BY memory_id, position",
            (ids,),
        ).fetchall():
            out.setdefault(int(memory_id), []).append(
                Anchor(
                    str(path), str(symbol), str(kind), str(commit), str(digest), float(written_at)
                )
            )
        return out

    def at(
        self, paths: Sequence[str], symbols: Sequence[str], scope_ids: Sequence[int]
    ) -> list[int]:
        scopes = _ids(scope_ids)
        wanted_paths, wanted_symbols = wanted(paths, symbols)
        if not scopes or not (wanted_paths or wanted_symbols):
            return []
        rows = self.conn.native(
            "SELECT a.memory_id FROM memory_anchors a"
            " WHERE a.path = ANY(%(paths)s::text[]) AND " + _IN_SCOPES + " UNION "
            "SELECT a.memory_id FROM memory_anchors a"
            " WHERE a.symbol = ANY(%(symbols)s::text[]) AND " + _IN_SCOPES + " ORDER BY 1",
            {"paths": wanted_paths, "symbols": wanted_symbols, "scopes": scopes},
        ).fetchall()
        return [int(r[0]) for r in rows]

    def anchored(self, scope_ids: Sequence[int], after: int, limit: int) -> list[int]:
        scopes = _ids(scope_ids)
        if limit <= 0 or not scopes:
            return []
        rows = self.conn.native(
            "SELECT DISTINCT a.memory_id FROM memory_anchors a"
            " WHERE a.memory_id > %(after)s AND "
            + _IN_SCOPES
            + " ORDER BY a.memory_id LIMIT %(limit)s",
            {"after": _bounded(after), "limit": _bounded(limit), "scopes": scopes},
        ).fetchall()
        return [int(r[0]) for r in rows]

    def count(self) -> int:
        row = self.conn.native("SELECT count(*) FROM memory_anchors").fetchone()
        assert row is not None
        return int(row[0])
