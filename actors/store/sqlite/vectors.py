"""`interfaces.vectors.Vectors` on SQLite, in SQLite's dialect."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from ..interfaces.vectors import (
    EntityEmbedding,
    EntityRef,
    EntityText,
    MemoryText,
    RelationText,
    Visibility,
    Windows,
)
from ..rows.vectors import VectorsBase, later_windows
from .params import id_list, marks
from .statements import SqliteRows

SQL_CHUNK = 500  # ids per statement: well under SQLite's bound parameter limit


def _parts(ids: Sequence[int]) -> Iterator[list[int]]:
    items = [int(i) for i in ids]
    for start in range(0, len(items), SQL_CHUNK):
        yield items[start : start + SQL_CHUNK]


def _visible(scopes: Visibility, table: str, col: str, alias: str) -> str:
    """The condition that row ``alias`` of ``table``'s owner is visible in ``scopes``."""
    if scopes is None:
        return "(1 = 1)"
    inner = id_list(list(scopes))
    return (
        f"(EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id AND x.scope_id IN ({inner}))"
        f" OR NOT EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id))"
    )


def _text(value: object) -> str:
    """A text column read as bytes (``CAST(... AS BLOB)``), as ``str``: SQLite keeps any bytes
    in a TEXT column (written by hand, by an older memtrio) and the driver refuses to hand
    over a text that is not UTF-8, which would fail the whole read; invalid sequences are
    replaced instead (as `sqlite.snapshot` reads them)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


# A ``vec`` as stored, its type kept for the feature's checks (``doctor`` reports a vector
# stored as text): a TEXT is read as its bytes (``typeof`` says it was text), so one that
# is not UTF-8 cannot fail the read.
_AS_STORED = "CASE typeof({col}) WHEN 'text' THEN CAST({col} AS BLOB) ELSE {col} END, typeof({col})"


_UPSERT = """INSERT INTO vectors (kind, item_id, model, revision, dim, vec) VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT (kind, item_id) DO UPDATE SET model = excluded.model, revision = excluded.revision,
        dim = excluded.dim, vec = excluded.vec"""


# The columns of an ``entity_embeddings`` row: model, dim, and the vec as stored (`_AS_STORED`).
_EMBEDDING = "CAST(model AS BLOB), dim, " + _AS_STORED.format(col="vec")


class SqliteVectors(VectorsBase, SqliteRows):
    MARK = "?"
    DROP = "DELETE FROM vectors WHERE kind = ? AND item_id = ?"
    LACKING = """SELECT t.id FROM {table} t
        LEFT JOIN vectors v ON v.kind = ? AND v.item_id = t.id AND v.model = ? AND v.revision = ?
        WHERE t.id > ? AND v.item_id IS NULL ORDER BY t.id LIMIT ?"""
    COUNT_LACKING = """SELECT count(*) FROM {table} t
        LEFT JOIN vectors v ON v.kind = ? AND v.item_id = t.id AND v.model = ? AND v.revision = ?
        WHERE v.item_id IS NULL"""
    WINDOWS_AFTER = (
        f"SELECT kind, item_id, dim, {_AS_STORED.format(col='vec')} FROM vectors"
        " WHERE (kind, item_id) > (?, ?) ORDER BY kind, item_id LIMIT ?"
    )
    CHUNKS_AFTER = (
        f"SELECT kind, item_id, chunk, dim, {_AS_STORED.format(col='vec')} FROM vector_chunks"
        " WHERE (kind, item_id, chunk) > (?, ?, ?) ORDER BY kind, item_id, chunk LIMIT ?"
    )
    DELETE_EMBEDDING = "DELETE FROM entity_embeddings WHERE entity_id = ?"
    EMBEDDINGS_AFTER = (
        f"SELECT entity_id, {_EMBEDDING} FROM entity_embeddings WHERE entity_id > ?"
        " ORDER BY entity_id LIMIT ?"
    )
    EMBEDDINGS_AFTER_DIM = (
        f"SELECT entity_id, {_EMBEDDING} FROM entity_embeddings"
        " WHERE entity_id > ? AND dim = ? ORDER BY entity_id LIMIT ?"
    )
    EMBEDDING_COUNTS = (
        "SELECT count(*) FILTER (WHERE dim = ?), count(*) FILTER (WHERE dim != ?)"
        " FROM entity_embeddings"
    )

    def visible(
        self, scopes: Visibility, table: str, col: str, alias: str
    ) -> tuple[str, list[Any]]:
        return _visible(scopes, table, col, alias), []

    # -- the local model's windows -----------------------------------------------------------

    def put(self, kind: str, item_id: int, windows: Windows, *, replace: bool) -> bool:
        first = (kind, item_id, windows.model, windows.revision, windows.dim, windows.chunks[0])
        if replace:
            self.conn.execute(_UPSERT, first)
        else:
            cur = self.conn.execute(
                _UPSERT
                + " WHERE vectors.model != excluded.model OR vectors.revision != excluded.revision",
                first,
            )
            if cur.rowcount == 0:
                return False
        # Writing the ``vectors`` row deleted the item's old chunks (a trigger).
        if len(windows.chunks) > 1:
            self.conn.executemany(
                "INSERT INTO vector_chunks (kind, item_id, chunk, model, revision, dim, vec) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (kind, item_id, i, windows.model, windows.revision, windows.dim, blob)
                    for i, blob in later_windows(windows)
                ],
            )
        return True

    def windows_of(
        self, kind: str, ids: Sequence[int], model: str, revision: str, dim: int
    ) -> dict[int, list[bytes]]:
        out: dict[int, list[bytes]] = {}
        for part in _parts(ids):
            key = (kind, model, revision, dim, *part)
            for item_id, blob in self.conn.execute(
                f"""SELECT item_id, CAST(vec AS BLOB) FROM vectors
                    WHERE kind = ? AND model = ? AND revision = ? AND dim = ?
                      AND item_id IN ({marks(len(part))})""",
                key,
            ):
                out[item_id] = [blob]
            if not out:
                continue
            for item_id, blob in self.conn.execute(
                f"""SELECT item_id, CAST(vec AS BLOB) FROM vector_chunks
                    WHERE kind = ? AND model = ? AND revision = ? AND dim = ?
                      AND item_id IN ({marks(len(part))})
                    ORDER BY item_id, chunk""",
                key,
            ):
                if item_id in out:
                    out[item_id].append(blob)
        return out

    def memory_texts(self, ids: Sequence[int]) -> list[MemoryText]:
        out: list[MemoryText] = []
        for part in _parts(ids):
            rows = self.conn.execute(
                "SELECT id, CAST(content AS BLOB) FROM memories"
                f" WHERE id IN ({marks(len(part))}) ORDER BY id",
                part,
            )
            out.extend(MemoryText(int(i), _text(c)) for i, c in rows)
        return out

    def entity_texts(self, ids: Sequence[int]) -> list[EntityText]:
        out: list[EntityText] = []
        for part in _parts(ids):
            rows = self.conn.execute(
                "SELECT id, CAST(name AS BLOB), CAST(kind AS BLOB) FROM entities"
                f" WHERE id IN ({marks(len(part))}) ORDER BY id",
                part,
            )
            out.extend(EntityText(int(i), _text(n), _text(k)) for i, n, k in rows)
        return out

    def relation_texts(self, ids: Sequence[int]) -> list[RelationText]:
        out: list[RelationText] = []
        for part in _parts(ids):
            rows = self.conn.execute(
                f"""SELECT r.id, CAST(s.name AS BLOB), CAST(r.relation_type AS BLOB),
                        CAST(t.name AS BLOB) FROM relations r
                    JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id
                    WHERE r.id IN ({marks(len(part))}) ORDER BY r.id""",
                part,
            )
            out.extend(RelationText(int(i), _text(s), _text(rt), _text(t)) for i, s, rt, t in rows)
        return out

    # -- the clients' entity embeddings ------------------------------------------------------

    def put_embedding(
        self, entity_id: int, model: str, dim: int, vec: bytes, updated_at: float
    ) -> bool:
        had = self.conn.execute(
            "SELECT 1 FROM entity_embeddings WHERE entity_id = ?", (entity_id,)
        ).fetchone()
        self.conn.execute(
            """INSERT INTO entity_embeddings (entity_id, model, dim, vec, updated_at)
               VALUES (?, ?, ?, ?, ?)
               ON CONFLICT (entity_id) DO UPDATE SET model = excluded.model, dim = excluded.dim,
                   vec = excluded.vec, updated_at = excluded.updated_at""",
            (entity_id, model, dim, vec, updated_at),
        )
        return had is None

    def embeddings_of(self, ids: Sequence[int]) -> dict[int, EntityEmbedding]:
        out: dict[int, EntityEmbedding] = {}
        for part in _parts(ids):
            for eid, model, dim, vec, kind in self.conn.execute(
                f"SELECT entity_id, {_EMBEDDING} FROM entity_embeddings "
                f"WHERE entity_id IN ({marks(len(part))})",
                part,
            ):
                out[eid] = EntityEmbedding(eid, _text(model), dim, self.stored(vec, kind))
        return out

    # -- the entities the vector tools read --------------------------------------------------

    def visible_entities(
        self, ids: Sequence[int], scopes: Visibility, entity_type: str | None
    ) -> dict[int, EntityRef]:
        vis = _visible(scopes, "entity_scopes", "entity_id", "e")
        typed = "" if entity_type is None else "AND e.kind = ?"
        out: dict[int, EntityRef] = {}
        for part in _parts(ids):
            params: list[object] = [*part] if entity_type is None else [*part, entity_type]
            for i, name, kind, canonical in self.conn.execute(
                "SELECT e.id, CAST(e.name AS BLOB), CAST(e.kind AS BLOB),"
                " CAST(e.canonical_name AS BLOB) FROM entities e "
                f"WHERE e.id IN ({marks(len(part))}) AND {vis} {typed}",
                params,
            ):
                out[int(i)] = EntityRef(int(i), _text(name), _text(kind), _text(canonical))
        return out
