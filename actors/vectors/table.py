"""The ``entity_embeddings`` table: the clients' own entity vectors, the truth the index follows.

One row per entity: ``vec`` holds ``dim`` little-endian float32 values and
``model`` the label the client gave (empty when none). Deleting the entity
deletes its row (a trigger, ``store.schema`` version 6), so ``delete_entities``
and ``merge_entities`` need no code here; the index learns of it from the
store's change notifications.

These functions run inside a transaction their caller opened (a write op on
the StoreWriter, or a read on the read pool); none of them commits.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ..kg.lookup import chunks, marks
from ..store import ops

LOAD_BATCH = 4096  # rows fetched at a time while the index is built


@dataclass(frozen=True)
class Row:
    """One stored embedding."""

    entity_id: int
    model: str
    dim: int
    vec: bytes


def put(conn: sqlite3.Connection, entity_id: int, vec: bytes, dim: int, model: str) -> bool:
    """Store (or replace) an entity's embedding; True when it had none before."""
    had = conn.execute(
        "SELECT 1 FROM entity_embeddings WHERE entity_id = ?", (entity_id,)
    ).fetchone()
    conn.execute(
        """INSERT INTO entity_embeddings (entity_id, model, dim, vec, updated_at) VALUES (?, ?, ?, ?, ?)
           ON CONFLICT (entity_id) DO UPDATE SET model = excluded.model, dim = excluded.dim,
               vec = excluded.vec, updated_at = excluded.updated_at""",
        (entity_id, model, dim, vec, ops.now()),
    )
    return had is None


def delete(conn: sqlite3.Connection, entity_id: int) -> bool:
    """Delete an entity's embedding; True when it had one."""
    cur = conn.execute("DELETE FROM entity_embeddings WHERE entity_id = ?", (entity_id,))
    return cur.rowcount > 0


def rows_of(conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, Row]:
    """The stored embeddings of ``ids`` (those that have one)."""
    out: dict[int, Row] = {}
    for part in chunks(list(ids)):
        for eid, model, dim, vec in conn.execute(
            f"SELECT entity_id, model, dim, vec FROM entity_embeddings WHERE entity_id IN ({marks(len(part))})",
            list(part),
        ):
            out[eid] = Row(eid, model, dim, vec)
    return out


def scan(conn: sqlite3.Connection, dim: int) -> Iterator[tuple[int, bytes]]:
    """Every (entity id, vector bytes) of dimension ``dim``, in id order, a batch at a time."""
    last = -1
    while True:
        batch = conn.execute(
            "SELECT entity_id, vec FROM entity_embeddings WHERE entity_id > ? AND dim = ? "
            "ORDER BY entity_id LIMIT ?",
            (last, dim, LOAD_BATCH),
        ).fetchall()
        if not batch:
            return
        yield from batch
        last = batch[-1][0]


def counts(conn: sqlite3.Connection, dim: int) -> tuple[int, int]:
    """(embeddings of dimension ``dim``, embeddings of any other dimension) in the whole table."""
    row = conn.execute(
        "SELECT count(*) FILTER (WHERE dim = ?), count(*) FILTER (WHERE dim != ?) FROM entity_embeddings",
        (dim, dim),
    ).fetchone()
    return int(row[0]), int(row[1])
