"""What gets embedded for a stored row, and how vectors are written back.

The document texts come from the store (``store.ops``: `memory_document`,
`entity_document`, `relation_document`), so lazy re-embedding (the ranker)
and ``memtrio reembed`` embed exactly what ``remember`` / ``relate`` embed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

from ..store.ops import (
    entity_document,
    memory_document,
    put_vector,
    relation_document,
    vecs_of,
)
from ..store.writer import Change, Written
from .handle import EmbedResult

SQL_BATCH = 500


def read_documents(
    conn: sqlite3.Connection, ids: dict[str, Sequence[int]]
) -> list[tuple[str, int, str]]:
    """(kind, id, document text) of the given items that still exist."""
    out: list[tuple[str, int, str]] = []
    for kind, wanted in ids.items():
        wanted = list(wanted)
        for start in range(0, len(wanted), SQL_BATCH):
            chunk = wanted[start : start + SQL_BATCH]
            marks = ",".join("?" * len(chunk))
            if kind == "memory":
                rows = conn.execute(
                    f"SELECT id, content FROM memories WHERE id IN ({marks})", chunk
                )
                out.extend(("memory", i, memory_document(c)) for i, c in rows)
            elif kind == "entity":
                rows = conn.execute(
                    f"SELECT id, name, kind FROM entities WHERE id IN ({marks})", chunk
                )
                out.extend(("entity", i, entity_document(n, k)) for i, n, k in rows)
            elif kind == "relation":
                rows = conn.execute(
                    f"""SELECT r.id, s.name, r.relation_type, t.name FROM relations r
                        JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id
                        WHERE r.id IN ({marks})""",
                    chunk,
                )
                out.extend(("relation", i, relation_document(s, rt, t)) for i, s, rt, t in rows)
    return out


def stale_items(
    conn: sqlite3.Connection, kind: str, model: str, revision: str, after: int, limit: int
) -> list[int]:
    """Ids of ``kind`` after ``after`` (ascending) with no vector of ``model``/``revision``."""
    table = {"memory": "memories", "entity": "entities", "relation": "relations"}[kind]
    rows = conn.execute(
        f"""SELECT t.id FROM {table} t
            LEFT JOIN vectors v ON v.kind = ? AND v.item_id = t.id AND v.model = ? AND v.revision = ?
            WHERE t.id > ? AND v.item_id IS NULL ORDER BY t.id LIMIT ?""",
        (kind, model, revision, after, limit),
    )
    return [r[0] for r in rows]


def count_stale(conn: sqlite3.Connection, model: str, revision: str) -> dict[str, int]:
    out = {}
    for kind, table in (("memory", "memories"), ("entity", "entities"), ("relation", "relations")):
        out[kind] = conn.execute(
            f"""SELECT count(*) FROM {table} t
                LEFT JOIN vectors v ON v.kind = ? AND v.item_id = t.id AND v.model = ? AND v.revision = ?
                WHERE v.item_id IS NULL""",
            (kind, model, revision),
        ).fetchone()[0]
    return out


def vector_writer(
    keys: Sequence[tuple[str, int]], result: EmbedResult
) -> Callable[[sqlite3.Connection], Written]:
    """A store write op saving text ``i``'s vectors (every window) for ``keys[i]``.

    Rows deleted meanwhile are skipped.
    """
    vecs = vecs_of(result)

    def op(conn: sqlite3.Connection) -> Written:
        changes: list[Change] = []
        tables = {"memory": "memories", "entity": "entities", "relation": "relations"}
        for (kind, item_id), vec in zip(keys, vecs, strict=True):
            if (
                conn.execute(f"SELECT 1 FROM {tables[kind]} WHERE id = ?", (item_id,)).fetchone()
                is None
            ):
                continue
            put_vector(conn, kind, item_id, vec)
            changes.append(
                Change(
                    kind=kind,  # type: ignore[arg-type]
                    id=item_id,
                    vector=vec.data,
                    model=vec.model,
                    revision=vec.revision,
                )
            )
        return Written(len(changes), changes)

    return op
