"""Stored embeddings: the vectors of memories, entities and relations, window by window."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from ..interfaces import StoreTx
from ..interfaces.vectors import Windows
from ..messages import Change

ItemKind = Literal["memory", "entity", "relation"]


class Matrix(Protocol):
    """A float32 array of vectors, one a row (numpy's, without importing numpy here)."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    def astype(self, dtype: str) -> Matrix: ...

    def tobytes(self) -> bytes: ...


class Embedding(Protocol):
    """What `vecs_of` reads of an embedder result (``embedder.pool.EmbedResult``)."""

    @property
    def vectors(self) -> Matrix: ...

    @property
    def truncated(self) -> list[bool]: ...

    @property
    def model(self) -> str: ...

    @property
    def revision(self) -> str: ...

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


def windows_of(vec: Vec) -> Windows:
    """A `Vec` as the storage interface takes it (`interfaces.vectors.Windows`)."""
    return Windows(
        vec.model, vec.revision, vec.dim, [vec.chunk(i) for i in range(max(vec.count, 1))]
    )


def put_vector(tx: StoreTx, kind: str, item_id: int, vec: Vec, replace: bool = True) -> bool:
    """Store an item's vectors; with ``replace=False`` an existing set of the same model is kept.

    Chunk 0 goes to ``vectors``, the other windows to ``vector_chunks``
    (writing the ``vectors`` row deletes the item's old chunks).

    A vector with a value that is not a finite float32 (a model gone wrong) is
    not stored, and with ``replace`` the item's old vector goes too: the item
    then has none, which recall and ``memtrio reembed`` treat as missing.
    False then, as when an existing set is kept.
    """
    if not _finite(vec.data):
        if replace:
            drop_vector(tx, kind, item_id)
        return False
    return tx.vectors.put(kind, item_id, windows_of(vec), replace=replace)


def _finite(data: bytes) -> bool:
    """Are ``data``'s float32 values all finite (whole vectors of a positive dimension)?"""
    import numpy as np  # loaded already wherever vectors are made (embedder, import)

    return len(data) % 4 == 0 and bool(np.isfinite(np.frombuffer(data, dtype="<f4")).all())


def drop_vector(tx: StoreTx, kind: str, item_id: int) -> None:
    """Delete an item's vectors (its chunks go with the ``vectors`` row)."""
    tx.vectors.drop(kind, item_id)


def item_vectors(
    tx: StoreTx, kind: str, ids: Sequence[int], model: str, revision: str, dim: int
) -> dict[int, list[bytes]]:
    """The stored windows of ``ids`` under ``model``/``revision``, chunk 0 first.

    Chunks count only under a ``vectors`` row of the same model (a set is
    whole or absent).
    """
    return tx.vectors.windows_of(kind, ids, model, revision, dim)


def change_of(kind: ItemKind, item_id: int, vec: Vec | None, deleted: bool = False) -> Change:
    """The `Change` a listener gets for a row written with ``vec`` (None: no vector now)."""
    if vec is None:
        return Change(kind=kind, id=item_id, deleted=deleted)
    return Change(kind=kind, id=item_id, vector=vec.data, model=vec.model, revision=vec.revision)


def note_vector(
    tx: StoreTx,
    kind: ItemKind,
    item_id: int,
    vec: Vec | None,
    created: bool,
    changes: list[Change],
) -> None:
    """Store ``vec`` for a row a write linked (an existing vector of the model is kept) and
    record the `Change` listeners need: the new vector, or a new row without one."""
    if vec is not None and put_vector(tx, kind, item_id, vec, replace=False):
        changes.append(change_of(kind, item_id, vec))
    elif created:
        changes.append(change_of(kind, item_id, None))
