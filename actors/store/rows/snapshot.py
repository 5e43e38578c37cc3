"""The ranker's bulk reads (`interfaces.snapshot.Snapshot`) written once for both backends;
each backend names the statements that read its columns (SQLite reads text as bytes:
see `as_text`) and writes the reads that its dialect answers its own way."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

from ..interfaces.snapshot import EntityItem, Kind, MemoryItem, RelationItem, TextEnds
from .scopes import scope_link
from .sql import Rows


def as_text(value: object) -> str:
    """A text column as ``str``. SQLite's statements read text as bytes (``CAST(... AS
    BLOB)``): SQLite stores any bytes in a TEXT column (by hand, or an older memtrio) and
    its driver refuses to hand over a text that is not UTF-8, which would fail the whole
    read; invalid sequences are replaced instead."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


class SnapshotBase(Rows):
    """`interfaces.snapshot.Snapshot`'s shared bodies."""

    SCOPE_IDS: ClassVar[str]  # (id, name) rows
    MEMORIES: ClassVar[str]  # (id, type, created, {content}) rows; {content}: it or NULL
    CONTENT: ClassVar[str]  # the content column as `MEMORIES` reads it
    MEMORY_TEXTS: ClassVar[str]  # (id, content) rows; {where}
    HAS_YEAR: ClassVar[str]  # SQL true for a content with a 4-digit number in it
    ENTITIES: ClassVar[str]  # (id, canonical name) rows
    VECTORS: ClassVar[str]  # (item id, vec) of every window: (kind, model, revision, dim) x 2
    WINDOWS: ClassVar[str]  # (item id, vec): (kind, model, revision, dim, *ids); {ids}
    LATER_WINDOWS: ClassVar[str]  # (item id, vec) by item and chunk: the same; {ids}
    TEXT_ENDS: ClassVar[str]  # (id, length, last 3, first `head`): (head, *ids); {ids}

    def _rows(self, sql: str, ids: Sequence[int] | None, column: str = "id") -> Iterator[Any]:
        """The rows of ``sql`` (a SELECT without WHERE), of every id or of ``ids``."""
        if ids is None:
            yield from self.run(sql)
            return
        for part in self.parts(ids):
            test, params = self.one_of(part)
            yield from self.run(f"{sql} WHERE {column} {test}", params)

    def change_mark(self) -> int:
        return self.number("SELECT seq FROM change_mark")

    def scope_ids(self) -> dict[str, int]:
        return {as_text(name): int(sid) for sid, name in self.run(self.SCOPE_IDS)}

    def item_scopes(self, kind: Kind, ids: list[int] | None = None) -> Iterator[tuple[int, int]]:
        table, col = scope_link(kind)
        yield from self._rows(f"SELECT {col}, scope_id FROM {table}", ids, col)

    def memories(self, ids: list[int] | None = None, text: bool = False) -> Iterator[MemoryItem]:
        sql = self.MEMORIES.format(content=self.CONTENT if text else "NULL")
        for i, kind, created, body in self._rows(sql, ids):
            yield MemoryItem(i, as_text(kind), created, None if body is None else as_text(body))

    def memory_texts(self, dated_only: bool = False) -> Iterator[tuple[int, str]]:
        where = f" WHERE {self.HAS_YEAR}" if dated_only else ""
        for i, content in self.run(self.MEMORY_TEXTS.format(where=where)):
            yield i, as_text(content)

    def entities(self, ids: list[int] | None = None) -> Iterator[EntityItem]:
        for i, name in self._rows(self.ENTITIES, ids):
            yield EntityItem(i, as_text(name))

    def relations(
        self, ids: list[int] | None = None, touching: list[int] | None = None
    ) -> Iterator[RelationItem]:
        sql = "SELECT id, source_id, target_id FROM relations"
        if ids is None and touching is None:
            for row in self.run(sql):
                yield RelationItem(*row)
            return
        if ids is not None:
            for row in self._rows(sql, ids):
                yield RelationItem(*row)
        seen: set[int] = set()
        for part in self.parts(touching or []):
            test, params = self.one_of(part)
            for row in self.run(f"{sql} WHERE source_id {test} OR target_id {test}", params * 2):
                if row[0] not in seen:  # one relation may touch two parts
                    seen.add(row[0])
                    yield RelationItem(*row)

    def vector_count(self, kind: Kind, model: str, revision: str, dim: int) -> int:
        params = (kind, model, revision, dim) * 2
        return self.number(f"SELECT count(*) FROM ({self.VECTORS}) v", params)

    def vector_rows(
        self, kind: Kind, model: str, revision: str, dim: int
    ) -> Iterator[tuple[int, bytes]]:
        yield from self.run(self.VECTORS, (kind, model, revision, dim) * 2)

    def item_windows(
        self, kind: Kind, ids: list[int], model: str, revision: str, dim: int
    ) -> dict[int, list[bytes]]:
        out: dict[int, list[bytes]] = {}
        key = (kind, model, revision, dim)
        for part in self.parts(ids):
            test, params = self.one_of(part)
            for item_id, blob in self.run(self.WINDOWS.format(ids=test), [*key, *params]):
                out[item_id] = [blob]
            found = [i for i in part if i in out]
            if not found:
                continue
            test, params = self.one_of(found)
            for item_id, blob in self.run(self.LATER_WINDOWS.format(ids=test), [*key, *params]):
                if item_id in out:
                    out[item_id].append(blob)
        return out

    def text_ends(self, ids: list[int], head: int) -> list[TextEnds]:
        out: list[TextEnds] = []
        for part in self.parts(ids):
            test, params = self.one_of(part)
            for memory_id, length, tail, start in self.run(
                self.TEXT_ENDS.format(ids=test), [head, *params]
            ):
                out.append(TextEnds(int(memory_id), int(length), as_text(tail), as_text(start)))
        return out
