"""The ``entity_embeddings`` table: the clients' own entity vectors, the truth the index follows.

One row per entity: ``vec`` holds ``dim`` little-endian float32 values and
``model`` the label the client gave (empty when none). Deleting the entity
deletes its row (a trigger, ``store.sqlite.schema`` version 6), so ``delete_entities``
and ``merge_entities`` need no code here; the index learns of it from the
store's change notifications.

These functions run inside a transaction (`StoreTx`) their caller opened (a write op on
the StoreWriter, or a read on the read pool); none of them commits.

A stored row may be unusable: written by an older memtrio, by hand, or under
another ``[vectors] quantization``. `usable_rows` sorts the rows read into the
vectors an index may hold and, for the others, why not (``VectorService``
skips them and reports them; no row can stop the server).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from ..store.domain.memories import now
from ..store.interfaces import ReadTx, StoreTx
from ..store.interfaces.vectors import EntityEmbedding
from ..vector_index.arrays import Ids, ValueRule, Vectors

LOAD_BATCH = 4096  # rows fetched at a time while the index is built


Row = EntityEmbedding
"""One stored embedding (`interfaces.vectors.EntityEmbedding`)."""


def put(tx: StoreTx, entity_id: int, vec: bytes, dim: int, model: str) -> bool:
    """Store (or replace) an entity's embedding; True when it had none before."""
    return tx.embeddings.put_embedding(entity_id, model, dim, vec, now())


def delete(tx: StoreTx, entity_id: int) -> bool:
    """Delete an entity's embedding; True when it had one."""
    return tx.embeddings.delete_embedding(entity_id)


def rows_of(tx: ReadTx, ids: Sequence[int]) -> dict[int, Row]:
    """The stored embeddings of ``ids`` (those that have one)."""
    return tx.embeddings.embeddings_of(ids)


def scan(tx: ReadTx, dim: int | None) -> Iterator[Row]:
    """Every stored embedding (of dimension ``dim``; None: of any) in id order, a batch at
    a time."""
    last = -1
    while True:
        batch = tx.embeddings.embeddings_after(last, dim, LOAD_BATCH)
        if not batch:
            return
        yield from batch
        last = batch[-1].entity_id


def counts(tx: ReadTx, dim: int) -> tuple[int, int]:
    """(embeddings of dimension ``dim``, embeddings of any other dimension) in the whole table."""
    return tx.embeddings.embedding_counts(dim)


def blob_problem(vec: object, dim: int) -> str | None:
    """Why a stored ``vec`` is not ``dim`` float32 values; None when it is."""
    if not isinstance(vec, bytes | bytearray | memoryview):
        return f"its vector is stored as {type(vec).__name__}, not as bytes"
    if len(vec) != 4 * dim:
        return f"its vector holds {len(vec)} bytes, not {4 * dim} ({dim} float32 values)"
    return None


def usable_rows(
    rows: Sequence[tuple[int, object]], dim: int, rule: ValueRule
) -> tuple[Ids, Vectors, dict[int, str]]:
    """(entity id, stored vector) rows as the ids and (n, dim) float32 vectors an index may
    hold, and the ids of the rest with why each cannot be used (`blob_problem`, `ValueRule`)."""
    bad: dict[int, str] = {}
    ids: list[int] = []
    blobs: list[bytes] = []
    for eid, vec in rows:
        problem = blob_problem(vec, dim)
        if problem is None:
            ids.append(int(eid))
            blobs.append(bytes(vec))  # type: ignore[call-overload] # blob_problem: bytes-like
        else:
            bad[int(eid)] = problem
    matrix = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(ids), dim)
    id_arr = np.asarray(ids, dtype=np.int64)
    ok = rule.usable(matrix)
    if not ok.all():
        for i in np.flatnonzero(~ok).tolist():
            bad[ids[i]] = rule.problem(matrix[i], "vec") or "its vector is not usable"
        id_arr, matrix = id_arr[ok], matrix[ok]
    return id_arr, matrix, bad


def stored_vector(row: Row, dim: int, rule: ValueRule) -> Vectors | str:
    """The (dim,) float32 vector of a row read with `rows_of`, or why it cannot be used."""
    _, matrix, bad = usable_rows([(row.entity_id, row.vec)], dim, rule)
    return bad[row.entity_id] if bad else matrix[0]
