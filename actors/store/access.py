"""Returning ranked memories: visibility re-checked, each access counted, every recall logged."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from .memories import get_memory, now, visible
from .scopes import GLOBAL


def ranked_rows(
    conn: sqlite3.Connection,
    selection: Sequence[str],
    ranked: Sequence[tuple[int, float]],
    accessed_at: float | None = None,
) -> list[dict[str, Any]]:
    """The ranked memories that still exist and are visible in ``selection``, with their scores.

    Rows come back repository matches first (stable), then in ranked order.
    With ``accessed_at``, each returned memory's access is counted at that time.
    """
    rows: list[dict[str, Any]] = []
    seen: set[int] = set()
    for memory_id, score in ranked:
        if memory_id in seen:
            continue
        seen.add(memory_id)
        memory = get_memory(conn, memory_id, details=False)
        if memory is None or not visible(memory["scopes"], selection):
            continue  # deleted since it was ranked, or never to be returned here
        if accessed_at is not None:
            conn.execute(
                "UPDATE memories SET access_count = access_count + 1, last_accessed_at = ? WHERE id = ?",
                (accessed_at, memory_id),
            )
            memory["access_count"] += 1
            memory["last_accessed_at"] = accessed_at
        memory["score"] = float(score)
        rows.append(memory)
    repos = {s for s in selection if s != GLOBAL}
    rows.sort(key=lambda m: 0 if repos.intersection(m["scopes"]) else 1)
    return rows


def record_access(
    conn: sqlite3.Connection,
    kind: str,
    query: str,
    selection: Sequence[str],
    ranked: Sequence[tuple[int, float]],
    ts: float | None = None,
) -> list[dict[str, Any]]:
    """Count an access of each returned memory (still existing), log the call, return the rows.

    Rows come back repository matches first (stable), then in ranked order.
    """
    ts = now() if ts is None else ts
    rows = ranked_rows(conn, selection, ranked, accessed_at=ts)
    conn.execute(
        "INSERT INTO recall_log (ts, kind, query, scopes, ids, scores) VALUES (?, ?, ?, ?, ?, ?)",
        (
            ts,
            kind,
            query,
            json.dumps(list(selection)),
            json.dumps([m["id"] for m in rows]),
            json.dumps([m["score"] for m in rows]),
        ),
    )
    return rows
