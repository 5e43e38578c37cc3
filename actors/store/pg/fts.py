"""Full-text and trigram search on PostgreSQL: the statements that replace FTS5's.

User text never becomes query syntax: every word reaches ``to_tsquery`` as a
quoted lexeme (`lexeme`: inside single quotes, with quotes and backslashes
doubled), so ``&``, ``|``, ``!``, ``<->``, ``:*`` and parentheses in a query
are plain characters; the operators between the lexemes are ours. Substring
search uses ``ILIKE`` with ``%``, ``_`` and ``\\`` escaped, served by the
``pg_trgm`` GIN indexes.

Scores: ``ts_rank`` (term frequency, normalised by the log of the document length;
``ts_rank_cd`` was 4 times slower at 100,000 memories, docs/benchmarks.md),
negated as SQLite's ``bm25()`` is, so that lower is better in ``ORDER BY``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..stem import stem


def lexeme(word: str) -> str:
    """``word`` as one quoted tsquery lexeme."""
    return "'" + word.replace("\\", "\\\\").replace("'", "''") + "'"


def match_query(terms: Sequence[str], words: Sequence[str]) -> str:
    """A tsquery (for ``to_tsquery('english', ...)``): the terms OR-ed, plus each pair of
    neighbouring query words as a phrase within a few words (``<->`` .. ``<3>``), as
    `lexical.match_expression` does with NEAR for FTS5."""
    kept = {stem(t) for t in terms}
    parts = [lexeme(t) for t in terms]
    pairs: list[tuple[str, str]] = []
    for a, b in zip(words, words[1:], strict=False):
        sa, sb = stem(a), stem(b)
        if sa != sb and sa in kept and sb in kept and (sa, sb) not in pairs:
            pairs.append((sa, sb))
            near = " | ".join(f"{lexeme(a)} <{n}> {lexeme(b)}" for n in (1, 2, 3))
            parts.append(f"({near})")
    return " | ".join(parts)


def estimated_matches(conn: object, term: str) -> int:
    """How many memories contain ``term`` (by its stem), as the planner estimates it:
    no rows are read, so asking costs a fraction of a millisecond."""
    plan = conn.execute(  # type: ignore[attr-defined]
        "EXPLAIN (FORMAT JSON) SELECT 1 FROM memories WHERE fts @@ to_tsquery('english', ?)",
        (lexeme(term),),
    ).fetchone()[0]
    return int(plan[0]["Plan"]["Plan Rows"])


def prefix_query(term: str) -> str:
    """A tsquery matching words that start with ``term``."""
    return f"{lexeme(term)}:*"


def like_pattern(term: str) -> str:
    """An ILIKE pattern finding ``term`` anywhere (``\\`` escapes)."""
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


# (id, -rank) of the best matches from id ``low`` up: (tsquery, low, limit).
MEMORY_MATCHES = """SELECT m.id, -ts_rank(m.fts, q, 1) AS score
    FROM memories m, to_tsquery('english', ?) q
    WHERE m.fts @@ q AND m.id >= ? ORDER BY score, m.id DESC LIMIT ?"""

# The same, as a subquery ``f (id, score)`` for filtered ranking: (tsquery, low).
MEMORY_MATCHES_ALL = """(SELECT m.id AS id, -ts_rank(m.fts, q, 1) AS score
    FROM memories m, to_tsquery('english', ?) q WHERE m.fts @@ q AND m.id >= ?) f"""

# Entities whose name or type has a word starting with the term: (prefix tsquery).
ENTITY_WORDS = "SELECT id FROM entities WHERE fts @@ to_tsquery('simple', ?)"

# Entities whose name or type contains the term (trigram index): (pattern, pattern).
ENTITY_SUBSTRING = "SELECT id FROM entities WHERE name ILIKE ? OR kind ILIKE ?"

# Observations (memories) matching a prefix tsquery, as ``f (id)``: (prefix tsquery).
MEMORY_PREFIX = "(SELECT id FROM memories WHERE fts @@ to_tsquery('english', ?)) f"


# The memories nearest a query vector by pgvector's HNSW indexes (cosine), every window
# of a memory counted (its best):
# (query, model, revision, query, n, query, model, revision, query, n).
DENSE_MEMORIES = """SELECT item_id, max(cosine) AS best FROM (
    (SELECT item_id, 1 - (embedding::vector(384) <=> ?::real[]::vector(384)) AS cosine
       FROM vectors WHERE kind = 'memory' AND dim = 384 AND embedding IS NOT NULL
        AND model = ? AND revision = ?
      ORDER BY embedding::vector(384) <=> ?::real[]::vector(384) LIMIT ?)
    UNION ALL
    (SELECT item_id, 1 - (embedding::vector(384) <=> ?::real[]::vector(384)) AS cosine
       FROM vector_chunks WHERE kind = 'memory' AND dim = 384 AND embedding IS NOT NULL
        AND model = ? AND revision = ?
      ORDER BY embedding::vector(384) <=> ?::real[]::vector(384) LIMIT ?)
) near GROUP BY item_id ORDER BY best DESC"""
