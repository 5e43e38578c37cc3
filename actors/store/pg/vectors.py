"""`interfaces.vectors.Vectors` on PostgreSQL, in PostgreSQL's own dialect (`PgConnection.native`).

Each window also gets its ``embedding``, the pgvector copy of its values that the HNSW
indexes of ``pg.schema`` cover, written in the same statement as its bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
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
from .statements import PgRows

_UPSERT = """INSERT INTO vectors (kind, item_id, model, revision, dim, vec, embedding)
    VALUES (%s, %s, %s, %s, %s, %s, %s::real[]::vector)
    ON CONFLICT (kind, item_id) DO UPDATE SET model = excluded.model, revision = excluded.revision,
        dim = excluded.dim, vec = excluded.vec, embedding = excluded.embedding"""


def _ids(ids: Sequence[int]) -> list[int]:
    return [int(i) for i in ids]


def _floats(blob: bytes, dim: int) -> list[float]:
    return list(struct.unpack(f"<{dim}f", blob))


def _visible(scopes: Visibility, table: str, col: str, alias: str) -> tuple[str, list[Any]]:
    """The condition that row ``alias`` of ``table``'s owner is visible in ``scopes``, and its
    parameter."""
    if scopes is None:
        return "TRUE", []
    return (
        f"(EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id AND x.scope_id = ANY(%s))"
        f" OR NOT EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id))",
        [[int(i) for i in scopes]],
    )


class PgVectors(VectorsBase, PgRows):
    MARK = "%s"
    DROP = "DELETE FROM vectors WHERE kind = %s AND item_id = %s"
    LACKING = """SELECT t.id FROM {table} t
        WHERE NOT EXISTS (
            SELECT 1 FROM vectors v
            WHERE v.kind = %s AND v.item_id = t.id AND v.model = %s AND v.revision = %s)
        AND t.id > %s ORDER BY t.id LIMIT %s"""
    COUNT_LACKING = """SELECT count(*) FROM {table} t
        WHERE NOT EXISTS (
            SELECT 1 FROM vectors v
            WHERE v.kind = %s AND v.item_id = t.id AND v.model = %s AND v.revision = %s)"""
    WINDOWS_AFTER = (
        "SELECT kind, item_id, dim, vec, NULL FROM vectors WHERE (kind, item_id) > (%s, %s)"
        " ORDER BY kind, item_id LIMIT %s"
    )
    CHUNKS_AFTER = (
        "SELECT kind, item_id, chunk, dim, vec, NULL FROM vector_chunks"
        " WHERE (kind, item_id, chunk) > (%s, %s, %s) ORDER BY kind, item_id, chunk LIMIT %s"
    )
    DELETE_EMBEDDING = "DELETE FROM entity_embeddings WHERE entity_id = %s"
    EMBEDDINGS_AFTER = (
        "SELECT entity_id, model, dim, vec, NULL FROM entity_embeddings WHERE entity_id > %s"
        " ORDER BY entity_id LIMIT %s"
    )
    EMBEDDINGS_AFTER_DIM = (
        "SELECT entity_id, model, dim, vec, NULL FROM entity_embeddings"
        " WHERE entity_id > %s AND dim = %s ORDER BY entity_id LIMIT %s"
    )
    EMBEDDING_COUNTS = (
        "SELECT count(*) FILTER (WHERE dim = %s), count(*) FILTER (WHERE dim <> %s)"
        " FROM entity_embeddings"
    )

    def visible(
        self, scopes: Visibility, table: str, col: str, alias: str
    ) -> tuple[str, list[Any]]:
        return _visible(scopes, table, col, alias)

    # -- the local model's windows -----------------------------------------------------------

    def put(self, kind: str, item_id: int, windows: Windows, *, replace: bool) -> bool:
        dim = windows.dim
        first = (
            kind,
            item_id,
            windows.model,
            windows.revision,
            dim,
            windows.chunks[0],
            _floats(windows.chunks[0], dim),
        )
        if replace:
            self.conn.native(_UPSERT, first)
        else:
            cur = self.conn.native(
                _UPSERT
                + " WHERE vectors.model <> excluded.model OR vectors.revision <> excluded.revision",
                first,
            )
            if cur.rowcount == 0:
                return False
        # Writing the ``vectors`` row deleted the item's old chunks (a trigger).
        if len(windows.chunks) > 1:
            self.conn.native_many(
                "INSERT INTO vector_chunks (kind, item_id, chunk, model, revision, dim, vec, embedding) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s::real[]::vector)",
                [
                    (
                        kind,
                        item_id,
                        i,
                        windows.model,
                        windows.revision,
                        dim,
                        blob,
                        _floats(blob, dim),
                    )
                    for i, blob in later_windows(windows)
                ],
            )
        return True

    def windows_of(
        self, kind: str, ids: Sequence[int], model: str, revision: str, dim: int
    ) -> dict[int, list[bytes]]:
        wanted = _ids(ids)
        out: dict[int, list[bytes]] = {}
        if not wanted:
            return out
        key = (kind, model, revision, dim, wanted)
        for item_id, blob in self.conn.native(
            """SELECT item_id, vec FROM vectors
               WHERE kind = %s AND model = %s AND revision = %s AND dim = %s AND item_id = ANY(%s)""",
            key,
        ):
            out[int(item_id)] = [bytes(blob)]
        if not out:
            return out
        for item_id, blob in self.conn.native(
            """SELECT item_id, vec FROM vector_chunks
               WHERE kind = %s AND model = %s AND revision = %s AND dim = %s AND item_id = ANY(%s)
               ORDER BY item_id, chunk""",
            key,
        ):
            if int(item_id) in out:
                out[int(item_id)].append(bytes(blob))
        return out

    def memory_texts(self, ids: Sequence[int]) -> list[MemoryText]:
        rows = self.conn.native(
            "SELECT id, content FROM memories WHERE id = ANY(%s) ORDER BY id", (_ids(ids),)
        )
        return [MemoryText(int(i), c) for i, c in rows]

    def entity_texts(self, ids: Sequence[int]) -> list[EntityText]:
        rows = self.conn.native(
            "SELECT id, name, kind FROM entities WHERE id = ANY(%s) ORDER BY id", (_ids(ids),)
        )
        return [EntityText(int(i), n, k) for i, n, k in rows]

    def relation_texts(self, ids: Sequence[int]) -> list[RelationText]:
        rows = self.conn.native(
            """SELECT r.id, s.name, r.relation_type, t.name FROM relations r
               JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id
               WHERE r.id = ANY(%s) ORDER BY r.id""",
            (_ids(ids),),
        )
        return [RelationText(int(i), s, rt, t) for i, s, rt, t in rows]

    # -- the clients' entity embeddings ------------------------------------------------------

    def put_embedding(
        self, entity_id: int, model: str, dim: int, vec: bytes, updated_at: float
    ) -> bool:
        # xmax = 0: the row was inserted, not updated (it had no embedding before).
        row = self.conn.native(
            """INSERT INTO entity_embeddings (entity_id, model, dim, vec, updated_at)
               VALUES (%s, %s, %s, %s, %s)
               ON CONFLICT (entity_id) DO UPDATE SET model = excluded.model, dim = excluded.dim,
                   vec = excluded.vec, updated_at = excluded.updated_at
               RETURNING (xmax = 0)""",
            (entity_id, model, dim, vec, updated_at),
        ).fetchone()
        return bool(row and row[0])

    def embeddings_of(self, ids: Sequence[int]) -> dict[int, EntityEmbedding]:
        wanted = _ids(ids)
        if not wanted:
            return {}
        rows = self.conn.native(
            "SELECT entity_id, model, dim, vec FROM entity_embeddings WHERE entity_id = ANY(%s)",
            (wanted,),
        )
        return {int(e): EntityEmbedding(int(e), m, d, self.stored(v, None)) for e, m, d, v in rows}

    # -- the entities the vector tools read --------------------------------------------------

    def visible_entities(
        self, ids: Sequence[int], scopes: Visibility, entity_type: str | None
    ) -> dict[int, EntityRef]:
        wanted = _ids(ids)
        if not wanted:
            return {}
        vis, vparams = _visible(scopes, "entity_scopes", "entity_id", "e")
        typed = "" if entity_type is None else "AND e.kind = %s"
        tparams = [] if entity_type is None else [entity_type]
        rows = self.conn.native(
            "SELECT e.id, e.name, e.kind, e.canonical_name FROM entities e "
            f"WHERE e.id = ANY(%s) AND {vis} {typed}",
            [wanted, *vparams, *tparams],
        )
        return {int(i): EntityRef(int(i), n, k, c) for i, n, k, c in rows}
