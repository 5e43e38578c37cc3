"""`interfaces.snapshot.Snapshot` on SQLite, in SQLite's dialect."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

from ..interfaces.snapshot import (
    EntityItem,
    Kind,
    MemoryItem,
    RelationItem,
    TextEnds,
)
from ..rows.scopes import scope_link
from . import params as sql_params

BATCH = 500  # ids per IN (...) list (well under SQLite's parameter limit)

# Every stored vector of one kind and model: chunk 0 (``vectors``), then the other
# windows of long texts (``vector_chunks``), counted only under a chunk 0 of the same
# model. Parameters: (kind, model, revision, dim) twice. ``vec`` as bytes whatever the
# row holds (a TEXT, even one that is not UTF-8, would fail the read or the join).
_VECTORS = """
    SELECT item_id, CAST(vec AS BLOB) FROM vectors
    WHERE kind = ? AND model = ? AND revision = ? AND dim = ?
    UNION ALL
    SELECT c.item_id, CAST(c.vec AS BLOB) FROM vector_chunks c
    JOIN vectors v ON v.kind = c.kind AND v.item_id = c.item_id
        AND v.model = c.model AND v.revision = c.revision
    WHERE c.kind = ? AND c.model = ? AND c.revision = ? AND c.dim = ?"""
# A 4-digit number somewhere in the text (ASCII digits, as PostgreSQL's ``~ '[0-9]{4}'``).
_HAS_YEAR = "content GLOB '*[0-9][0-9][0-9][0-9]*'"
# (kind, peer) -> the links of the frontier ``f`` to its peers ``p``, from the first
# ``limit`` peers of each by id; ``{marks}`` is the frontier's ids.
_PEERS: dict[tuple[str, str], str] = {
    ("memory", "entity"): "SELECT memory_id AS f, entity_id AS p FROM memory_entities"
    " WHERE memory_id IN ({marks})",
    ("memory", "relation"): "SELECT memory_id AS f, relation_id AS p FROM memory_relations"
    " WHERE memory_id IN ({marks})",
    ("entity", "memory"): "SELECT entity_id AS f, memory_id AS p FROM memory_entities"
    " WHERE entity_id IN ({marks})",
    ("entity", "relation"): "SELECT source_id AS f, id AS p FROM relations"
    " WHERE source_id IN ({marks})"
    " UNION SELECT target_id AS f, id AS p FROM relations WHERE target_id IN ({marks})",
    ("relation", "memory"): "SELECT relation_id AS f, memory_id AS p FROM memory_relations"
    " WHERE relation_id IN ({marks})",
}


def _text(value: object) -> str:
    """A text column read as bytes (`CAST(... AS BLOB)`), as ``str``: SQLite stores any
    bytes in a TEXT column (by hand, or an older memtrio), and the driver refuses to
    hand over a text that is not UTF-8, which would fail the whole read; invalid
    sequences are replaced instead."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def _batches(ids: list[int]) -> Iterator[tuple[list[int], str]]:
    """``ids`` in lists of at most `BATCH`, each with its ``?,?,...`` marks."""
    for part in sql_params.chunks(ids, BATCH):
        yield part, sql_params.marks(len(part))


class SqliteSnapshot:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def change_mark(self) -> int:
        row = self.conn.execute("SELECT seq FROM change_mark").fetchone()
        return int(row[0]) if row else 0

    def keeps_graph(self) -> bool:
        return True

    def scope_ids(self) -> dict[str, int]:
        return {
            _text(name): sid
            for sid, name in self.conn.execute("SELECT id, CAST(name AS BLOB) FROM scopes")
        }

    def item_scopes(self, kind: Kind, ids: list[int] | None = None) -> Iterator[tuple[int, int]]:
        table, col = scope_link(kind)
        if ids is None:
            yield from self.conn.execute(f"SELECT {col}, scope_id FROM {table}")
            return
        for part, marks in _batches(ids):
            yield from self.conn.execute(
                f"SELECT {col}, scope_id FROM {table} WHERE {col} IN ({marks})", part
            )

    def memories(self, ids: list[int] | None = None, text: bool = False) -> Iterator[MemoryItem]:
        content = "CAST(content AS BLOB)" if text else "NULL"
        sql = f"SELECT id, CAST(memory_type AS BLOB), created_at, {content} FROM memories"
        for i, kind, created, body in self._rows(sql, ids):
            yield MemoryItem(i, _text(kind), created, None if body is None else _text(body))

    def _rows(self, sql: str, ids: list[int] | None) -> Iterator[Any]:
        """The rows of ``sql`` (a SELECT without WHERE), of every id or of ``ids``."""
        if ids is None:
            yield from self.conn.execute(sql)
            return
        for part, marks in _batches(ids):
            yield from self.conn.execute(f"{sql} WHERE id IN ({marks})", part)

    def memory_texts(self, dated_only: bool = False) -> Iterator[tuple[int, str]]:
        where = f" WHERE {_HAS_YEAR}" if dated_only else ""
        for i, content in self.conn.execute(
            f"SELECT id, CAST(content AS BLOB) FROM memories{where}"
        ):
            yield i, _text(content)

    def entities(self, ids: list[int] | None = None) -> Iterator[EntityItem]:
        sql = "SELECT id, CAST(canonical_name AS BLOB) FROM entities"
        for i, name in self._rows(sql, ids):
            yield EntityItem(i, _text(name))

    def relations(
        self, ids: list[int] | None = None, touching: list[int] | None = None
    ) -> Iterator[RelationItem]:
        sql = "SELECT id, source_id, target_id FROM relations"
        if ids is None and touching is None:
            for row in self.conn.execute(sql):
                yield RelationItem(*row)
            return
        if ids is not None:
            for part, marks in _batches(ids):
                for row in self.conn.execute(f"{sql} WHERE id IN ({marks})", part):
                    yield RelationItem(*row)
        if touching is not None:
            seen: set[int] = set()
            for part, marks in _batches(touching):
                for row in self.conn.execute(
                    f"{sql} WHERE source_id IN ({marks}) OR target_id IN ({marks})", part + part
                ):
                    if row[0] not in seen:  # one relation may touch two batches
                        seen.add(row[0])
                        yield RelationItem(*row)

    def _links(
        self, table: str, a: str, b: str, first: list[int] | None, second: list[int] | None
    ) -> Iterator[tuple[int, int]]:
        sql = f"SELECT {a}, {b} FROM {table}"
        if first is None and second is None:
            yield from self.conn.execute(sql)
        elif second is None:
            assert first is not None
            for part, marks in _batches(first):
                yield from self.conn.execute(f"{sql} WHERE {a} IN ({marks})", part)
        elif first is None:
            for part, marks in _batches(second):
                yield from self.conn.execute(f"{sql} WHERE {b} IN ({marks})", part)
        elif first and second:
            # Both lists: the links of the first (memories: a few each, by the primary
            # key) in batches, kept when their other end is in the second.
            others = set(second)
            for part, marks in _batches(first):
                for row in self.conn.execute(f"{sql} WHERE {a} IN ({marks})", part):
                    if row[1] in others:
                        yield row

    def memory_entities(
        self, memories: list[int] | None = None, entities: list[int] | None = None
    ) -> Iterator[tuple[int, int]]:
        return self._links("memory_entities", "memory_id", "entity_id", memories, entities)

    def memory_relations(
        self, memories: list[int] | None = None, relations: list[int] | None = None
    ) -> Iterator[tuple[int, int]]:
        return self._links("memory_relations", "memory_id", "relation_id", memories, relations)

    def peers(self, kind: Kind, ids: list[int], peer: Kind, limit: int) -> list[tuple[int, int]]:
        links = _PEERS[(kind, peer)]
        out: list[tuple[int, int]] = []
        for part, marks in _batches(ids):
            inner = links.format(marks=marks)
            params = part * inner.count("IN (")
            out += self.conn.execute(
                f"""SELECT f, p FROM (SELECT f, p,
                        row_number() OVER (PARTITION BY f ORDER BY p) AS n FROM ({inner}))
                    WHERE n <= ?""",
                [*params, limit],
            ).fetchall()
        return out

    def vector_count(self, kind: Kind, model: str, revision: str, dim: int) -> int:
        params = (kind, model, revision, dim) * 2
        return int(self.conn.execute(f"SELECT count(*) FROM ({_VECTORS})", params).fetchone()[0])

    def vector_rows(
        self, kind: Kind, model: str, revision: str, dim: int
    ) -> Iterator[tuple[int, bytes]]:
        yield from self.conn.execute(_VECTORS, (kind, model, revision, dim) * 2)

    def item_windows(
        self, kind: Kind, ids: list[int], model: str, revision: str, dim: int
    ) -> dict[int, list[bytes]]:
        out: dict[int, list[bytes]] = {}
        for part, marks in _batches(ids):
            for item_id, blob in self.conn.execute(
                f"""SELECT item_id, CAST(vec AS BLOB) FROM vectors
                    WHERE kind = ? AND model = ? AND revision = ? AND dim = ? AND item_id IN ({marks})""",
                (kind, model, revision, dim, *part),
            ):
                out[item_id] = [blob]
            if not out:
                continue
            for item_id, blob in self.conn.execute(
                f"""SELECT c.item_id, CAST(c.vec AS BLOB) FROM vector_chunks c
                    WHERE c.kind = ? AND c.model = ? AND c.revision = ? AND c.dim = ? AND c.item_id IN ({marks})
                    ORDER BY c.item_id, c.chunk""",
                (kind, model, revision, dim, *part),
            ):
                if item_id in out:
                    out[item_id].append(blob)
        return out

    def nearest_memories(
        self, query: list[float], model: str, revision: str, n: int
    ) -> list[tuple[int, float]] | None:
        return None  # no vector index in a SQLite store: the reader's own answers

    def text_ends(self, ids: list[int], head: int) -> list[TextEnds]:
        out: list[TextEnds] = []
        for part, marks in _batches(ids):
            for memory_id, length, tail, start in self.conn.execute(
                "SELECT id, length(content),"
                " CAST(substr(rtrim(content), length(rtrim(content)) - 2) AS BLOB),"
                f" CAST(substr(content, 1, ?) AS BLOB) FROM memories WHERE id IN ({marks})",
                (head, *part),
            ):
                out.append(TextEnds(int(memory_id), int(length), _text(tail), _text(start)))
        return out
