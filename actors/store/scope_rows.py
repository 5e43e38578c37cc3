"""Rows of the ``scopes`` table: ids by name (created on demand), a memory's scopes, counts."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable


def ensure_scope(conn: sqlite3.Connection, name: str) -> int:
    row = conn.execute("SELECT id FROM scopes WHERE name = ?", (name,)).fetchone()
    if row:
        return row[0]
    return conn.execute("INSERT INTO scopes (name) VALUES (?)", (name,)).lastrowid


def scope_ids(conn: sqlite3.Connection, names: Iterable[str]) -> dict[str, int]:
    """Ids of the scopes that exist (never creates one)."""
    names = list(names)
    if not names:
        return {}
    marks = ",".join("?" * len(names))
    return dict(
        conn.execute(f"SELECT name, id FROM scopes WHERE name IN ({marks})", names).fetchall()
    )


def memory_scope_names(conn: sqlite3.Connection, memory_id: int) -> list[str]:
    rows = conn.execute(
        "SELECT s.name FROM memory_scopes ms JOIN scopes s ON s.id = ms.scope_id WHERE ms.memory_id = ? ORDER BY s.name",
        (memory_id,),
    ).fetchall()
    return [r[0] for r in rows]


def scope_counts(conn: sqlite3.Connection) -> dict[str, int]:
    """Every stored scope with its number of memories (0 for scopes of entities only)."""
    rows = conn.execute(
        "SELECT s.name, count(ms.memory_id) FROM scopes s LEFT JOIN memory_scopes ms ON ms.scope_id = s.id GROUP BY s.id"
    ).fetchall()
    return dict(rows)
