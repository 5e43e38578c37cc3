"""Invariants of a memory store after chaos, checked on the database file itself.

Run these only when no server has the database open (after a clean exit or a
``kill -9``): they open their own connection, and the FTS check writes to the
FTS shadow tables' integrity machinery (no rows change).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class StoreCheck:
    acked: int = 0  # acknowledged writes checked
    lost: int = 0  # acknowledged writes missing or different
    phantom: int = 0  # refused writes that are present anyway (half-written)
    rows: int = 0
    vectors: int = 0
    violations: list[str] = field(default_factory=list)


def check_store(
    db: Path,
    acked: Mapping[int, str],
    refused: Iterable[str] = (),
    *,
    embeddings: bool = False,
) -> StoreCheck:
    """Check ``db`` against what the client saw.

    - every acknowledged write (memory id -> content) is present with that content;
    - no refused write (content whose call failed definitively) is present;
    - ``PRAGMA integrity_check`` is ``ok`` and the FTS index matches its content
      table (FTS5 ``integrity-check`` with rank 1: every row indexed, nothing else);
    - vectors agree with the rows: no vector without its row, each vector's blob
      has ``dim`` float32 values, and with embeddings on every memory has one;
      extra windows (``vector_chunks``) belong to a current vectors row.
    """
    out = StoreCheck(acked=len(acked))
    if not db.exists():
        if acked:
            out.lost = len(acked)
            out.violations.append(
                f"database {db} is missing but {len(acked)} writes were acknowledged"
            )
        return out
    conn = sqlite3.connect(str(db), isolation_level=None, timeout=30)
    try:
        _check_integrity(conn, out)
        check_rows(conn.execute("SELECT id, content FROM memories").fetchall(), acked, refused, out)
        _check_vectors(conn, out, embeddings=embeddings)
    except sqlite3.DatabaseError as exc:
        out.violations.append(f"the database cannot be read: {exc}")
        out.lost = len(acked)
    finally:
        conn.close()
    return out


def _check_integrity(conn: sqlite3.Connection, out: StoreCheck) -> None:
    """SQLite's own integrity check, and the FTS index against its content table."""
    integrity = [row[0] for row in conn.execute("PRAGMA integrity_check")]
    if integrity != ["ok"]:
        out.violations.append(f"PRAGMA integrity_check: {'; '.join(integrity)[:300]}")
    try:
        # rank 1: compare the index with the content table (external content)
        conn.execute("INSERT INTO memories_fts (memories_fts, rank) VALUES ('integrity-check', 1)")
    except sqlite3.DatabaseError as exc:
        out.violations.append(f"FTS integrity-check failed: {exc}")


def check_rows(
    stored: Iterable[tuple[int, str]],
    acked: Mapping[int, str],
    refused: Iterable[str],
    out: StoreCheck,
) -> None:
    """Every acknowledged write present in ``stored`` (id, content) with its content; no
    refused write present (either store's rows)."""
    rows = dict(stored)
    out.rows = len(rows)
    for mid, content in acked.items():
        if mid not in rows:
            out.lost += 1
            if out.lost <= 5:
                out.violations.append(f"acknowledged memory {mid} is missing")
        elif rows[mid] != content:
            out.lost += 1
            if out.lost <= 5:
                out.violations.append(f"acknowledged memory {mid} has different content")
    present = set(rows.values())
    for content in refused:
        if content in present:
            out.phantom += 1
            if out.phantom <= 5:
                out.violations.append(f"a refused write is present: {content[:60]!r}")


def _count(conn: sqlite3.Connection, sql: str) -> int:
    return int(conn.execute(sql).fetchone()[0])


def _check_vectors(conn: sqlite3.Connection, out: StoreCheck, *, embeddings: bool) -> None:
    """Vectors agree with the rows (and, with embeddings on, every memory has one)."""
    orphans = _count(
        conn,
        "SELECT count(*) FROM vectors v WHERE "
        "(v.kind = 'memory' AND NOT EXISTS (SELECT 1 FROM memories m WHERE m.id = v.item_id)) OR "
        "(v.kind = 'entity' AND NOT EXISTS (SELECT 1 FROM entities e WHERE e.id = v.item_id)) OR "
        "(v.kind = 'relation' AND NOT EXISTS (SELECT 1 FROM relations r WHERE r.id = v.item_id))",
    )
    if orphans:
        out.violations.append(f"{orphans} vectors without their row")
    bad_blobs = _count(conn, "SELECT count(*) FROM vectors WHERE length(vec) != 4 * dim")
    if bad_blobs:
        out.violations.append(f"{bad_blobs} vectors whose blob is not dim float32 values")
    has_chunks = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'vector_chunks'"
    ).fetchone()
    if has_chunks:  # schema 4+: extra windows of long items, owned by their vectors row
        stray = _count(
            conn,
            "SELECT count(*) FROM vector_chunks c WHERE NOT EXISTS (SELECT 1 FROM vectors v "
            "WHERE v.kind = c.kind AND v.item_id = c.item_id AND v.model = c.model "
            "AND v.revision = c.revision) OR length(c.vec) != 4 * c.dim",
        )
        if stray:
            out.violations.append(
                f"{stray} vector chunks without their vectors row (or with a bad blob)"
            )
    out.vectors = _count(conn, "SELECT count(*) FROM vectors WHERE kind = 'memory'")
    if embeddings:
        missing = _count(
            conn,
            "SELECT count(*) FROM memories m WHERE NOT EXISTS "
            "(SELECT 1 FROM vectors v WHERE v.kind = 'memory' AND v.item_id = m.id)",
        )
        if missing:
            out.violations.append(f"{missing} memories without a vector while embeddings are on")
