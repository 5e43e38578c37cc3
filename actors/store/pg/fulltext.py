"""`interfaces.fulltext.FullText` on PostgreSQL, in PostgreSQL's own dialect (`PgConnection.native`).

The indexes (`pg.schema`): ``memories.fts`` (``to_tsvector('english', content)``: stemmed,
as SQLite's ``porter`` index is; `stem.stem` gives both the same stems), ``entities.fts``
(``simple``: unstemmed words of the name and type) with GIN indexes, and the ``pg_trgm``
GIN indexes of entity names and types for substring search. The ``tsvector`` columns are
generated, so the database keeps them current: nothing here writes.

User text never becomes query syntax: every word reaches ``to_tsquery`` as a quoted lexeme
(`lexeme`: inside single quotes, with quotes and backslashes doubled), so ``&``, ``|``,
``!``, ``<->``, ``:*`` and parentheses in a query are plain characters; the operators
between the lexemes are ours. Substring search uses ``ILIKE`` with ``%``, ``_`` and ``\\``
escaped (`like_pattern`), served by the trigram indexes.

Scores: ``ts_rank`` (term frequency, normalised by the log of the document length;
``ts_rank_cd`` was 4 times slower at 100,000 memories, docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..interfaces.fulltext import (
    Candidate,
    FoundEntity,
    MemoryFilter,
    MemoryMatch,
    TextQuery,
    Visibility,
)
from .conn import PgConnection

# A phrase of two query words matches within this many words (``<1>`` .. ``<3>``), as
# FTS5's NEAR(a b, PROXIMITY) does on SQLite.
PHRASE_GAPS = (1, 2, 3)
# Substrings shorter than this find nothing (as under SQLite's trigram index).
MIN_SUBSTRING = 3
# The GIN indexes of the text search `optimize_indexes` compacts (`pg.schema`).
GIN_INDEXES = ("entities_fts", "entities_kind_trgm", "entities_name_trgm", "memories_fts")
# PostgreSQL text cannot hold a NUL character: a value with one matches no stored row.
NUL = "\x00"


def lexeme(word: str) -> str:
    """``word`` as one quoted tsquery lexeme."""
    return "'" + word.replace("\\", "\\\\").replace("'", "''") + "'"


def match_query(query: TextQuery) -> str:
    """A tsquery (for ``to_tsquery('english', ...)``): the terms OR-ed, plus each pair of
    neighbouring query words (`TextQuery.pairs`) as a phrase within a few words."""
    query = query.searchable()
    parts = [lexeme(t) for t in query.terms]
    for a, b in query.pairs():
        near = " | ".join(f"{lexeme(a)} <{n}> {lexeme(b)}" for n in PHRASE_GAPS)
        parts.append(f"({near})")
    return " | ".join(parts)


def prefix_query(term: str) -> str:
    """A tsquery matching words that start with ``term``."""
    return f"{lexeme(term)}:*"


def like_pattern(term: str) -> str:
    """An ILIKE pattern finding ``term`` anywhere (``\\`` escapes)."""
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _visible(table: str, col: str, alias: str, visible: Visibility) -> tuple[str, list[Any]]:
    """SQL true for a visible row of ``alias`` and its parameters."""
    if visible.everything:
        return "TRUE", []
    return (
        f"(EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id"
        f" AND x.scope_id = ANY(%s::bigint[]))"
        f" OR NOT EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id))",
        [list(visible.scope_ids)],
    )


_MEMORY_VISIBLE = """(EXISTS (SELECT 1 FROM memory_scopes ms WHERE ms.memory_id = {col}
        AND ms.scope_id = ANY(%s::bigint[]))
    OR NOT EXISTS (SELECT 1 FROM memory_scopes ms WHERE ms.memory_id = {col}))"""
_IN_REPO = """EXISTS (SELECT 1 FROM memory_scopes ms WHERE ms.memory_id = {col}
    AND ms.scope_id = ANY(%s::bigint[]))"""


class PgFullText:
    def __init__(self, conn: PgConnection) -> None:
        self.conn = conn

    def newest_memory_id(self) -> int:
        row = self.conn.native("SELECT max(id) FROM memories").fetchone()
        return int(row[0] or 0) if row else 0

    def memory_frequencies(self, terms: Sequence[str]) -> dict[str, int] | None:
        """The planner's estimate of the memories each term matches (from ANALYZE's
        statistics of the ``tsvector`` column): no rows are read, so asking costs a fraction
        of a millisecond, and it is all the pruning needs (PostgreSQL has no free
        vocabulary table)."""
        out: dict[str, int] = {}
        for term in terms:
            if NUL in term:
                out[term] = 0
                continue
            row = self.conn.native(
                "EXPLAIN (FORMAT JSON) SELECT 1 FROM memories WHERE fts @@ to_tsquery('english', %s)",
                (lexeme(term),),
            ).fetchone()
            plan: Any = row[0] if row else [{"Plan": {"Plan Rows": 0}}]
            out[term] = int(plan[0]["Plan"]["Plan Rows"])
        return out

    def best_memories(self, query: TextQuery, low: int, limit: int) -> list[MemoryMatch]:
        if not query.searchable().terms:
            return []
        rows = self.conn.native(
            """SELECT m.id, ts_rank(m.fts, q, 1) AS score
                 FROM memories m, to_tsquery('english', %s) q
                WHERE m.fts @@ q AND m.id >= %s ORDER BY score DESC, m.id DESC LIMIT %s""",
            (match_query(query), low, limit),
        ).fetchall()
        return [MemoryMatch(int(i), float(s)) for i, s in rows]

    def seed_memories(self, query: TextQuery, low: int, limit: int) -> list[MemoryMatch]:
        """`best_memories`: ``ts_rank`` inside the window is already cheap here."""
        return self.best_memories(query, low, limit)

    def best_memories_filtered(
        self, query: TextQuery, low: int, allowed: MemoryFilter, limit: int
    ) -> list[MemoryMatch]:
        if not query.searchable().terms or NUL in (allowed.memory_type or ""):
            return []
        type_sql = "AND lower(m.memory_type) = lower(%s)" if allowed.memory_type else ""
        rows = self.conn.native(
            f"""SELECT f.id, f.score FROM
                  (SELECT m.id AS id, ts_rank(m.fts, q, 1) AS score
                     FROM memories m, to_tsquery('english', %s) q
                    WHERE m.fts @@ q AND m.id >= %s {type_sql}) f
                WHERE {_MEMORY_VISIBLE.format(col="f.id")}
                ORDER BY {_IN_REPO.format(col="f.id")} DESC, f.score DESC, f.id DESC
                LIMIT %s""",
            (
                match_query(query),
                low,
                *([allowed.memory_type] if allowed.memory_type else []),
                list(allowed.scope_ids),
                list(allowed.repo_ids),
                limit,
            ),
        ).fetchall()
        return [MemoryMatch(int(i), float(s)) for i, s in rows]

    def memory_candidates(self, ids: Sequence[int], allowed: MemoryFilter) -> list[Candidate]:
        if not ids or NUL in (allowed.memory_type or ""):
            return []
        type_sql = "AND lower(m.memory_type) = lower(%s)" if allowed.memory_type else ""
        rows = self.conn.native(
            f"""SELECT m.id, {_IN_REPO.format(col="m.id")}, m.importance, m.updated_at
                  FROM memories m WHERE m.id = ANY(%s::bigint[])
                   AND {_MEMORY_VISIBLE.format(col="m.id")} {type_sql}""",
            (
                list(allowed.repo_ids),
                [int(i) for i in ids],
                list(allowed.scope_ids),
                *([allowed.memory_type] if allowed.memory_type else []),
            ),
        ).fetchall()
        return [Candidate(int(i), bool(t), float(imp), float(up)) for i, t, imp, up in rows]

    def entities_with_word(self, prefix: str) -> list[int]:
        if not prefix or NUL in prefix:
            return []
        rows = self.conn.native(
            "SELECT id FROM entities WHERE fts @@ to_tsquery('simple', %s) ORDER BY id",
            (prefix_query(prefix),),
        ).fetchall()
        return [int(r[0]) for r in rows]

    def entities_containing(self, text: str) -> list[int]:
        if len(text) < MIN_SUBSTRING or NUL in text:
            return []
        pattern = like_pattern(text)
        rows = self.conn.native(
            "SELECT id FROM entities WHERE name ILIKE %s OR kind ILIKE %s ORDER BY id",
            (pattern, pattern),
        ).fetchall()
        return [int(r[0]) for r in rows]

    def observations_with_word(self, prefix: str, visible: Visibility) -> dict[int, int]:
        if not prefix or NUL in prefix:
            return {}
        vis_sql, vis_params = _visible("memory_scopes", "memory_id", "m", visible)
        rows = self.conn.native(
            f"""SELECT me.entity_id, count(*) FROM memories m
                  JOIN memory_entities me ON me.memory_id = m.id
                 WHERE m.fts @@ to_tsquery('english', %s)
                   AND lower(m.memory_type) = 'observation' AND {vis_sql}
                 GROUP BY me.entity_id""",
            (prefix_query(prefix), *vis_params),
        ).fetchall()
        return {int(e): int(n) for e, n in rows}

    def visible_entities(
        self, ids: Sequence[int], visible: Visibility, kind: str | None
    ) -> list[FoundEntity]:
        if not ids or NUL in (kind or ""):
            return []
        vis_sql, vis_params = _visible("entity_scopes", "entity_id", "e", visible)
        kind_sql = "AND e.kind = %s" if kind is not None else ""
        rows = self.conn.native(
            f"""SELECT e.id, e.name, e.kind, e.canonical_name FROM entities e
                 WHERE e.id = ANY(%s::bigint[]) AND {vis_sql} {kind_sql} ORDER BY e.id""",
            ([int(i) for i in ids], *vis_params, *([kind] if kind is not None else [])),
        ).fetchall()
        return [FoundEntity(int(r[0]), r[1], r[2], r[3]) for r in rows]

    def optimize_indexes(self) -> list[str]:
        rows = self.conn.native(
            """SELECT c.relname FROM pg_class c WHERE c.relkind = 'i'
                 AND c.relname = ANY(%s::text[])
                 AND pg_has_role(c.relowner, 'USAGE') ORDER BY c.relname""",
            (list(GIN_INDEXES),),
        ).fetchall()
        indexes = [str(r[0]) for r in rows]
        for index in indexes:
            self.conn.native("SELECT gin_clean_pending_list(%s::regclass)", (index,))
        return indexes
