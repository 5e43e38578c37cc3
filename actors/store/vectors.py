"""Stored embeddings: the vectors of memories, entities and relations, window by window."""

from __future__ import annotations

import sqlite3
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from . import db
from .dialect import is_postgres
from .writer import Change

ItemKind = Literal["memory", "entity", "relation"]


class Matrix(Protocol):
    """A float32 array of vectors, one a row (numpy's, without importing numpy here)."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    def astype(self, dtype: str) -> Matrix: ...

    def tobytes(self) -> bytes: ...


class Embedding(Protocol):
    """What `vecs_of` reads of an embedder result (``embedder.pool.EmbedResult``)."""

    vectors: Matrix
    truncated: list[bool]
    model: str
    revision: str

    def rows(self, i: int) -> Matrix: ...


@dataclass
class Vec:
    """The embedding of one item to store: float32 bytes with the model that made it.

    ``data`` holds ``count`` vectors of ``dim`` float32 values back to back:
    the windows (chunks) of a text longer than the model's token limit, in
    order; a short text has one.
    """

    data: bytes
    dim: int
    model: str
    revision: str

    @property
    def count(self) -> int:
        return len(self.data) // (4 * self.dim) if self.dim > 0 else 0

    def chunk(self, i: int) -> bytes:
        size = 4 * self.dim
        return self.data[i * size : (i + 1) * size]


def vecs_of(result: Embedding) -> list[Vec]:
    """One `Vec` per text of an embedder result (``EmbedResult``: every window of the text)."""
    model = str(result.model)
    revision = str(result.revision)
    dim = int(result.vectors.shape[1])
    return [
        Vec(result.rows(i).astype("<f4").tobytes(), dim, model, revision)
        for i in range(len(result.truncated))
    ]


def put_vector(
    conn: sqlite3.Connection, kind: str, item_id: int, vec: Vec, replace: bool = True
) -> bool:
    """Store an item's vectors; with ``replace=False`` an existing set of the same model is kept.

    Chunk 0 goes to ``vectors``, the other windows to ``vector_chunks``
    (writing the ``vectors`` row deletes the item's old chunks: a trigger).

    A vector with a value that is not a finite float32 (a model gone wrong) is
    not stored, and with ``replace`` the item's old vector goes too: the item
    then has none, which recall and ``memtrio reembed`` treat as missing.
    False then, as when an existing set is kept.
    """
    if not _finite(vec.data):
        if replace:
            drop_vector(conn, kind, item_id)
        return False
    first = vec.chunk(0)
    if replace:
        conn.execute(
            """INSERT INTO vectors (kind, item_id, model, revision, dim, vec) VALUES (?, ?, ?, ?, ?, ?)
               ON CONFLICT (kind, item_id) DO UPDATE SET model = excluded.model, revision = excluded.revision,
                   dim = excluded.dim, vec = excluded.vec""",
            (kind, item_id, vec.model, vec.revision, vec.dim, first),
        )
    else:
        cur = conn.execute(
            """INSERT INTO vectors (kind, item_id, model, revision, dim, vec) VALUES (?, ?, ?, ?, ?, ?)
               ON CONFLICT (kind, item_id) DO UPDATE SET model = excluded.model, revision = excluded.revision,
                   dim = excluded.dim, vec = excluded.vec
               WHERE vectors.model != excluded.model OR vectors.revision != excluded.revision""",
            (kind, item_id, vec.model, vec.revision, vec.dim, first),
        )
        if cur.rowcount == 0:
            return False
    if vec.count > 1:
        conn.executemany(
            "INSERT INTO vector_chunks (kind, item_id, chunk, model, revision, dim, vec) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (kind, item_id, i, vec.model, vec.revision, vec.dim, vec.chunk(i))
                for i in range(1, vec.count)
            ],
        )
    if is_postgres(conn):
        _put_embeddings(conn, kind, item_id, vec)
    return True


def _finite(data: bytes) -> bool:
    """Are ``data``'s float32 values all finite (whole vectors of a positive dimension)?"""
    import numpy as np  # loaded already wherever vectors are made (embedder, import)

    return len(data) % 4 == 0 and bool(np.isfinite(np.frombuffer(data, dtype="<f4")).all())


def _put_embeddings(conn: sqlite3.Connection, kind: str, item_id: int, vec: Vec) -> None:
    """PostgreSQL: the pgvector copies of the windows just stored (``embedding``, HNSW)."""
    floats = [list(struct.unpack(f"<{vec.dim}f", vec.chunk(i))) for i in range(vec.count)]
    conn.execute(
        "UPDATE vectors SET embedding = ?::real[]::vector WHERE kind = ? AND item_id = ?",
        (floats[0], kind, item_id),
    )
    if vec.count > 1:
        conn.executemany(
            "UPDATE vector_chunks SET embedding = ?::real[]::vector WHERE kind = ? AND item_id = ? AND chunk = ?",
            [(floats[i], kind, item_id, i) for i in range(1, vec.count)],
        )


def drop_vector(conn: sqlite3.Connection, kind: str, item_id: int) -> None:
    """Delete an item's vectors (its chunks go with the ``vectors`` row: a trigger)."""
    conn.execute("DELETE FROM vectors WHERE kind = ? AND item_id = ?", (kind, item_id))


def item_vectors(
    conn: sqlite3.Connection, kind: str, ids: Sequence[int], model: str, revision: str, dim: int
) -> dict[int, list[bytes]]:
    """The stored windows of ``ids`` under ``model``/``revision``, chunk 0 first.

    Chunks count only under a ``vectors`` row of the same model (a set is
    whole or absent).
    """
    out: dict[int, list[bytes]] = {}
    ids = list(ids)
    for start in range(0, len(ids), db.SQL_CHUNK):
        part = ids[start : start + db.SQL_CHUNK]
        marks = ",".join("?" * len(part))
        for item_id, blob in conn.execute(
            f"""SELECT item_id, vec FROM vectors
                WHERE kind = ? AND model = ? AND revision = ? AND dim = ? AND item_id IN ({marks})""",
            (kind, model, revision, dim, *part),
        ):
            out[item_id] = [blob]
        if not out:
            continue
        for item_id, blob in conn.execute(
            f"""SELECT c.item_id, c.vec FROM vector_chunks c
                WHERE c.kind = ? AND c.model = ? AND c.revision = ? AND c.dim = ? AND c.item_id IN ({marks})
                ORDER BY c.item_id, c.chunk""",
            (kind, model, revision, dim, *part),
        ):
            if item_id in out:
                out[item_id].append(blob)
    return out


def change_of(kind: ItemKind, item_id: int, vec: Vec | None, deleted: bool = False) -> Change:
    """The `Change` a listener gets for a row written with ``vec`` (None: no vector now)."""
    if vec is None:
        return Change(kind=kind, id=item_id, deleted=deleted)
    return Change(kind=kind, id=item_id, vector=vec.data, model=vec.model, revision=vec.revision)


def note_vector(
    conn: sqlite3.Connection,
    kind: ItemKind,
    item_id: int,
    vec: Vec | None,
    created: bool,
    changes: list[Change],
) -> None:
    """Store ``vec`` for a row a write linked (an existing vector of the model is kept) and
    record the `Change` listeners need: the new vector, or a new row without one."""
    if vec is not None and put_vector(conn, kind, item_id, vec, replace=False):
        changes.append(change_of(kind, item_id, vec))
    elif created:
        changes.append(change_of(kind, item_id, None))
