"""Why recall returned each memory, for the dashboard's Recall page.

The ranker answers (memory id, score) pairs; this module says, for each, what
the page can show about why it came, from what is stored:

- ``lexical``: the query words (by stem, as FTS5 matches them) found in its text;
- ``graph``: the query names an entity the memory mentions, or one a relation
  links to an entity the memory mentions (the path that carried the rank);
- ``semantic``: neither, in a semantic ranking: it came by embedding similarity.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from ..store.documents import canonical_name
from ..store.lexical import query_terms, query_words
from ..store.stem import stem

# Longest entity name (in words) looked for in the query.
MAX_NAME_WORDS = 6


def named_entities(conn: sqlite3.Connection, query: str) -> dict[int, str]:
    """Entities whose whole name occurs in ``query`` (id -> name)."""
    words = [w for w in query.split() if w]
    candidates = {
        canonical_name(" ".join(words[i : i + n]).strip(".,;:!?\"'()"))
        for n in range(1, MAX_NAME_WORDS + 1)
        for i in range(len(words) - n + 1)
    }
    candidates.discard("")
    if not candidates:
        return {}
    marks = ",".join("?" * len(candidates))
    rows = conn.execute(
        f"SELECT id, name FROM entities WHERE canonical_name IN ({marks})", list(candidates)
    )
    return dict(rows.fetchall())


def explain(
    conn: sqlite3.Connection, query: str, ids: Sequence[int], ranking: str
) -> dict[int, list[dict[str, Any]]]:
    """For each memory id: the reasons it matches ``query`` (see the module docstring)."""
    stems = {stem(t): t for t in query_terms(query)}
    named = named_entities(conn, query)
    out: dict[int, list[dict[str, Any]]] = {}
    for memory_id in ids:
        reasons: list[dict[str, Any]] = []
        row = conn.execute("SELECT content FROM memories WHERE id = ?", (memory_id,)).fetchone()
        if row is None:
            continue
        found = {stem(w) for w in query_words(row[0], frozenset())}
        matched = [word for s, word in stems.items() if s in found]
        if matched:
            reasons.append({"kind": "lexical", "terms": matched})
        mentions = dict(
            conn.execute(
                "SELECT e.id, e.name FROM memory_entities me JOIN entities e ON e.id = me.entity_id "
                "WHERE me.memory_id = ?",
                (memory_id,),
            ).fetchall()
        )
        direct = [mentions[e] for e in mentions if e in named]
        if direct:
            reasons.append(
                {"kind": "graph", "path": direct, "why": "mentions an entity the query names"}
            )
        elif named and mentions:
            reasons.extend(_linked(conn, named, mentions))
        if not reasons and ranking == "semantic":
            reasons.append({"kind": "semantic", "why": "embedding similarity to the query"})
        out[memory_id] = reasons
    return out


def _linked(
    conn: sqlite3.Connection, named: dict[int, str], mentions: dict[int, str]
) -> list[dict[str, Any]]:
    """Relations between an entity the query names and one the memory mentions (at most 3)."""
    a = ",".join(str(int(i)) for i in named)
    b = ",".join(str(int(i)) for i in mentions)
    rows = conn.execute(
        f"""SELECT s.name, r.relation_type, t.name FROM relations r
            JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id
            WHERE (r.source_id IN ({a}) AND r.target_id IN ({b}))
               OR (r.source_id IN ({b}) AND r.target_id IN ({a})) LIMIT 3"""
    ).fetchall()
    return [
        {"kind": "graph", "path": [src, rel, dst], "why": "related to an entity the query names"}
        for src, rel, dst in rows
    ]
