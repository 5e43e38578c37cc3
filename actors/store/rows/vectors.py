"""Vectors' checks and rows, the same on both backends (`interfaces.vectors`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

from ..interfaces.vectors import EntityEmbedding, StoredWindow, Visibility, Windows
from .snapshot import as_text
from .sql import Rows

# The table of each kind of item a vector belongs to (names from here, never from input).
TABLES = {"memory": "memories", "entity": "entities", "relation": "relations"}


def item_table(kind: str) -> str:
    """The table of ``kind``'s items; an unknown kind: ValueError."""
    try:
        return TABLES[kind]
    except KeyError:
        raise ValueError(f"no such kind of item: {kind!r}") from None


def later_windows(windows: Windows) -> Iterator[tuple[int, bytes]]:
    """(chunk, bytes) of each window after the first (the first is the ``vectors`` row)."""
    return enumerate(windows.chunks[1:], start=1)


class VectorsBase(Rows):
    """The vector interfaces' shared bodies (`interfaces.vectors`). Each backend names its
    statements (class attributes in its dialect; a stored ``vec`` is read with a second
    column, its type on SQLite: see `stored`), writes `visible`, and writes
    the writes and reads that its dialect does its own way."""

    MARK: ClassVar[str]  # the dialect's positional placeholder
    DROP: ClassVar[str]  # (kind, item id)
    LACKING: ClassVar[str]  # (kind, model, revision, after, limit); {table}
    COUNT_LACKING: ClassVar[str]  # (kind, model, revision); {table}
    WINDOWS_AFTER: ClassVar[str]  # (kind, item id, limit): (kind, id, dim, vec, type) rows
    CHUNKS_AFTER: ClassVar[str]  # (kind, item id, chunk, limit): (kind, id, chunk, dim, vec, type)
    DELETE_EMBEDDING: ClassVar[str]  # (entity id,)
    EMBEDDINGS_AFTER: ClassVar[str]  # (after, limit): (id, model, dim, vec, type) rows
    EMBEDDINGS_AFTER_DIM: ClassVar[str]  # (after, dim, limit): the same
    EMBEDDING_COUNTS: ClassVar[str]  # (dim, dim): (of that dim, of another)

    def visible(
        self, scopes: Visibility, table: str, col: str, alias: str
    ) -> tuple[str, list[Any]]:
        """The dialect's condition that row ``alias`` (linked through ``table``, its column
        ``col``) is visible in ``scopes``, and its parameters."""
        raise NotImplementedError

    def stored(self, value: object, kind: str | None) -> Any:
        """A ``vec`` as read with its second column, as stored (``Any``: the interface's
        Structs hold it as stored, the feature checks it). SQLite reads a TEXT ``vec`` as
        its bytes with ``kind`` ``text`` (one that is not UTF-8 cannot fail the read): a
        ``str``, invalid sequences replaced; psycopg may give a ``bytea`` as a memoryview:
        bytes; anything else as it is."""
        if kind == "text" and isinstance(value, bytes):
            return value.decode("utf-8", "replace")
        return bytes(value) if isinstance(value, memoryview) else value

    def drop(self, kind: str, item_id: int) -> None:
        self.run(self.DROP, (kind, item_id))

    def lacking(self, kind: str, model: str, revision: str, after: int, limit: int) -> list[int]:
        sql = self.LACKING.format(table=item_table(kind))
        return [int(r[0]) for r in self.all(sql, (kind, model, revision, after, limit))]

    def count_lacking(self, kind: str, model: str, revision: str) -> int:
        sql = self.COUNT_LACKING.format(table=item_table(kind))
        return self.number(sql, (kind, model, revision))

    def existing(self, kind: str, ids: Sequence[int]) -> set[int]:
        table = item_table(kind)
        out: set[int] = set()
        for part in self.parts([int(i) for i in ids]):
            test, params = self.one_of(part)
            out.update(
                int(r[0]) for r in self.all(f"SELECT id FROM {table} WHERE id {test}", params)
            )
        return out

    def windows_after(self, after: tuple[str, int] | None, limit: int) -> list[StoredWindow]:
        rows = self.all(self.WINDOWS_AFTER, (*(after or ("", -1)), limit))
        return [StoredWindow(k, int(i), 0, d, self.stored(v, t)) for k, i, d, v, t in rows]

    def chunks_after(self, after: tuple[str, int, int] | None, limit: int) -> list[StoredWindow]:
        rows = self.all(self.CHUNKS_AFTER, (*(after or ("", -1, -1)), limit))
        return [StoredWindow(k, int(i), int(c), d, self.stored(v, t)) for k, i, c, d, v, t in rows]

    def delete_embedding(self, entity_id: int) -> bool:
        return self.run(self.DELETE_EMBEDDING, (entity_id,)).rowcount > 0

    def embeddings_after(self, after: int, dim: int | None, limit: int) -> list[EntityEmbedding]:
        if dim is None:
            rows = self.all(self.EMBEDDINGS_AFTER, (after, limit))
        else:
            rows = self.all(self.EMBEDDINGS_AFTER_DIM, (after, dim, limit))
        return [EntityEmbedding(int(e), as_text(m), d, self.stored(v, t)) for e, m, d, v, t in rows]

    def embedding_counts(self, dim: int) -> tuple[int, int]:
        row = self.first(self.EMBEDDING_COUNTS, (dim, dim))
        return (int(row[0]), int(row[1])) if row else (0, 0)

    def embedded_entities(self, dim: int, scopes: Visibility, entity_type: str | None) -> set[int]:
        vis, params = self.visible(scopes, "entity_scopes", "entity_id", "e")
        typed = "" if entity_type is None else f"AND e.kind = {self.MARK}"
        rows = self.all(
            "SELECT e.id FROM entity_embeddings v JOIN entities e ON e.id = v.entity_id"
            f" WHERE v.dim = {self.MARK} AND {vis} {typed}",
            [dim, *params, *([] if entity_type is None else [entity_type])],
        )
        return {int(r[0]) for r in rows}

    def count_embedded(self, dim: int, scopes: Visibility) -> int:
        vis, params = self.visible(scopes, "entity_scopes", "entity_id", "e")
        return self.number(
            "SELECT count(*) FROM entity_embeddings v JOIN entities e ON e.id = v.entity_id"
            f" WHERE v.dim = {self.MARK} AND {vis}",
            [dim, *params],
        )

    def relation_ends(self, scopes: Visibility) -> list[tuple[int, int]]:
        vis, params = self.visible(scopes, "relation_scopes", "relation_id", "r")
        rows = self.all(f"SELECT r.source_id, r.target_id FROM relations r WHERE {vis}", params)
        return [(int(s), int(t)) for s, t in rows]
