"""Code anchors' rows and the bodies of `interfaces.anchors.Anchors`, the same on both
backends (the ``memory_anchors`` table)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from ..interfaces.anchors import Anchor, check_anchors, no_memory, wanted
from .sql import Rows

COLUMNS = "path, symbol, kind, git_commit, digest, written_at"
MAX_ID = 2**63 - 1  # SQLite's INTEGER, PostgreSQL's bigint


def bounded(value: int) -> int:
    """An id or count as both databases bind it (a larger Python int would fail the
    statement)."""
    return max(-1, min(int(value), MAX_ID))


def anchor(fields: Sequence[Any]) -> Anchor:
    """A row of `COLUMNS` as an `Anchor`."""
    path, symbol, kind, commit, digest, written_at = fields
    return Anchor(str(path), str(symbol), str(kind), str(commit), str(digest), float(written_at))


class AnchorsBase(Rows):
    """`interfaces.anchors.Anchors`' bodies; each backend names its statements and writes
    `in_scopes`."""

    MARK: ClassVar[str]  # the dialect's positional placeholder
    MEMORY_EXISTS: ClassVar[str]  # (memory id,)
    DELETE: ClassVar[str]  # (memory id,)
    INSERT: ClassVar[str]  # (memory id, position, *`COLUMNS`)

    def in_scopes(self, scope_ids: Sequence[int]) -> tuple[str, list[Any]]:
        """The dialect's condition that an anchor (``a``) is of a memory linked to one of
        ``scope_ids``, and its parameters."""
        raise NotImplementedError

    def set(self, memory_id: int, anchors: Sequence[Anchor]) -> None:
        rows = check_anchors(anchors)
        if not 1 <= memory_id <= MAX_ID or self.first(self.MEMORY_EXISTS, (memory_id,)) is None:
            raise no_memory(memory_id)
        self.run(self.DELETE, (memory_id,))
        if rows:
            self.run_many(
                self.INSERT,
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
        for part in self.parts(sorted({int(i) for i in memory_ids if 1 <= i <= MAX_ID})):
            test, params = self.one_of(part)
            sql = f"SELECT memory_id, {COLUMNS} FROM memory_anchors WHERE memory_id {test}"
            for memory_id, *fields in self.all(sql + " ORDER BY memory_id, position", params):
                out.setdefault(int(memory_id), []).append(anchor(fields))
        return out

    def at(
        self, paths: Sequence[str], symbols: Sequence[str], scope_ids: Sequence[int]
    ) -> list[int]:
        if not scope_ids:
            return []
        found: set[int] = set()
        scoped, scope_params = self.in_scopes(scope_ids)
        by_path, by_symbol = wanted(paths, symbols)
        for column, values in (("path", by_path), ("symbol", by_symbol)):
            for part in self.parts(values):
                test, params = self.one_of(part)
                sql = f"SELECT DISTINCT a.memory_id FROM memory_anchors a WHERE a.{column} {test}"
                found.update(
                    int(r[0]) for r in self.all(f"{sql} AND {scoped}", [*params, *scope_params])
                )
        return sorted(found)

    def anchored(self, scope_ids: Sequence[int], after: int, limit: int) -> list[int]:
        if limit <= 0 or not scope_ids:
            return []  # a negative LIMIT is no limit in SQLite
        scoped, params = self.in_scopes(scope_ids)
        rows = self.all(
            f"SELECT DISTINCT a.memory_id FROM memory_anchors a WHERE a.memory_id > {self.MARK}"
            f" AND {scoped} ORDER BY a.memory_id LIMIT {self.MARK}",
            [bounded(after), *params, bounded(limit)],
        )
        return [int(r[0]) for r in rows]

    def count(self) -> int:
        return self.number("SELECT count(*) FROM memory_anchors")
