"""Lexical search: FTS5 queries of free text, the one plan that keeps them cheap, BM25 recall.

`plan` turns a query into an FTS5 MATCH expression and the lowest rowid to
rank. It is the only lexical planner: the store's lexical recall
(`lexical_search`, with `STORE_RECALL`) and the ranker's FTS5 seeds (with
their own `PlanBudget`) both use it, so the two match words the same way and
differ only in the budget they are given.
"""

from __future__ import annotations

import re
import sqlite3
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from . import db
from .db import VOCAB_TABLE
from .dialect import is_postgres
from .memories import visibility_sql
from .pg import fts
from .scope_rows import scope_ids
from .scopes import GLOBAL
from .stem import stem

STOP_WORDS = frozenset(
    """a an and are as at be but by do does did for from has have how i if in into is it its me my no not of on
    or our so than that the their them then there these they this to was we were what when where which who why
    will with you your""".split()
)
# STOP_WORDS and the other function words: the ranker's FTS5 seeds drop these too.
FUNCTION_WORDS = STOP_WORDS | frozenset(
    """about above after again against all am any because been before being below between both can could
    doing down during each few further had having he her here hers herself him himself his itself just more
    most myself nor now off once only other ours ourselves out over own same she should some such theirs
    themselves those through too under until up very while whom would yours yourself yourselves""".split()
)
MAX_QUERY_TOKENS = 32
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)  # letters and digits, like FTS5's unicode61

# Query-cost bounds for big stores (see `plan`): a word in more than
# COMMON_FRACTION of the memories is dropped when the query has a more
# selective word (its BM25 weight is small, its posting list long); when the
# words' posting lists add up to more than a budget's ``max_postings``, only
# the newest memories (a window holding about that many postings) are ranked.
COMMON_FRACTION = 0.2
# The store's lexical recall windows only when even the most selective word is
# that common: all scores are then close and recency breaks the ties anyway.
MAX_POSTINGS = 20000
# The candidate window of lexical_search: the limit * CANDIDATE_FACTOR (at
# least MIN_CANDIDATES) best BM25 matches.
CANDIDATE_FACTOR = 5
MIN_CANDIDATES = 50
# Two query words next to each other also match as NEAR(a b, PROXIMITY): at most
# this many words between them, a short phrase (see `match_expression`).
PROXIMITY = 4


@dataclass(frozen=True)
class PlanBudget:
    """How `plan` keeps one FTS5 query cheap.

    - ``stop_words``: dropped from the query (when another word remains);
    - ``max_postings``: above this many postings only the newest memories are ranked;
    - ``prune_from``: a store of fewer memories (by rowid) is never pruned;
    - ``window_common_only``: window only when no selective word is left
      (else also when the selective words alone exceed ``max_postings``).
    """

    stop_words: frozenset[str]
    max_postings: int
    prune_from: int = 0
    window_common_only: bool = False


def store_recall() -> PlanBudget:
    """The budget of the store's lexical recall (`MAX_POSTINGS` is read at each call)."""
    return PlanBudget(STOP_WORDS, MAX_POSTINGS, window_common_only=True)


def query_words(query: str, stop_words: frozenset[str] = STOP_WORDS) -> list[str]:
    """The words of a free-text query in order, lower-cased, diacritics removed, stop words dropped.

    Stop words are dropped only when another word remains. Repeats are kept
    (see `query_terms` for the distinct words); at most `MAX_QUERY_TOKENS`
    distinct words.
    """
    tokens = [
        # lower(), not casefold(): FTS5's unicode61 keeps "ß" (the vocabulary must match)
        "".join(
            c for c in unicodedata.normalize("NFKD", tok.lower()) if not unicodedata.combining(c)
        )
        for tok in _TOKEN.findall(query)
    ]
    tokens = [t for t in tokens if t]
    words = [t for t in tokens if t not in stop_words] or tokens
    allowed = set(list(dict.fromkeys(words))[:MAX_QUERY_TOKENS])
    return [w for w in words if w in allowed]


def terms_of(words: Sequence[str]) -> list[str]:
    """The distinct words of ``words`` (see `query_words`), one per stem, first occurrence first."""
    out: dict[str, str] = {}
    for word in words:
        out.setdefault(stem(word), word)
    return list(out.values())


def query_terms(query: str, stop_words: frozenset[str] = STOP_WORDS) -> list[str]:
    """The distinct words of `query_words`, one per stem, first occurrence first."""
    return terms_of(query_words(query, stop_words))


def match_expression(terms: Sequence[str], words: Sequence[str]) -> str:
    """An FTS5 MATCH expression: each term quoted, OR-ed, plus the proximity pairs.

    For every two words next to each other in ``words`` (the query's content
    words in order) that are both among ``terms``, ``NEAR("a" "b",
    PROXIMITY)`` is OR-ed in too: a memory where they occur close together
    scores both again, as in the sequential dependence model of IR (Metzler
    and Croft, 2005), so "model kits" ranks a memory about a model kit above
    one about a model train and a kitchen. Quoting makes FTS5 syntax (quotes,
    ``*``, ``-``, ``:``, parentheses, ``AND``/``OR``/``NOT``/``NEAR``) plain
    text.
    """
    return " OR ".join(phrases(terms, words))


def phrases(terms: Sequence[str], words: Sequence[str]) -> list[str]:
    """The phrases `match_expression` OR-s together: the quoted terms, then the pairs."""
    kept = {stem(t) for t in terms}
    parts = [f'"{t}"' for t in terms]
    pairs: list[tuple[str, str]] = []
    for a, b in zip(words, words[1:], strict=False):
        sa, sb = stem(a), stem(b)
        if sa != sb and sa in kept and sb in kept and (sa, sb) not in pairs:
            pairs.append((sa, sb))
            parts.append(f'NEAR("{a}" "{b}", {PROXIMITY})')
    return parts


def doc_freqs(conn: sqlite3.Connection, terms: Sequence[str]) -> dict[str, int] | None:
    """Memories containing each term (by its stem; 0 if none), or None if this connection has no vocab table.

    A count costs a scan of the term's whole doclist (``fts5vocab`` has no
    index): milliseconds for a word in 100,000 memories. Counts are kept per
    database and newest memory id (`_FREQS`), so they are read again once a
    memory is added (edits and deletions may leave them a little off until then:
    they only steer pruning).

    PostgreSQL has no free vocabulary table: the planner's estimate of the rows
    the term matches (from ANALYZE's statistics of the ``tsvector`` column) stands
    in for the count, which is all the pruning needs (`fts.estimated_matches`).
    """
    if is_postgres(conn):
        return {term: fts.estimated_matches(conn, term) for term in terms}
    try:
        conn.execute(f"SELECT doc FROM {VOCAB_TABLE} LIMIT 0")  # this connection has one
        where = conn.execute("PRAGMA database_list").fetchone()[2]
        newest = conn.execute("SELECT max(rowid) FROM memories").fetchone()[0] or 0
        out = {}
        for term in terms:
            key = (where, newest, stem(term))
            count = _FREQS.get(key) if where else None  # "": an in-memory database
            if count is None:
                row = conn.execute(
                    f"SELECT doc FROM {VOCAB_TABLE} WHERE term = ?", (stem(term),)
                ).fetchone()
                count = row[0] if row else 0
                if len(_FREQS) >= FREQS_KEPT:
                    _FREQS.clear()
                _FREQS[key] = count
            out[term] = count
        return out
    except sqlite3.OperationalError:
        return None


# Document frequencies read from the vocabulary: (database file, newest memory id, stem) -> count.
FREQS_KEPT = 4096
_FREQS: dict[tuple[str, int, str], int] = {}


def plan(conn: sqlite3.Connection, query: str, budget: PlanBudget) -> tuple[str, int] | None:
    """(MATCH expression, lowest rowid to rank) for ``query``, or None when it has no words.

    Terms found in more than `COMMON_FRACTION` of the memories are dropped if a
    rarer one remains (they barely move BM25 but make FTS5 score most of the
    store). If the terms left hold more than the budget's postings, only the
    newest memories holding about that many are ranked (see `PlanBudget`).
    Uses the connection's ``fts5vocab`` table (the store's read connections
    have one); without it, nothing is pruned.
    """
    planned = plan_terms(conn, query, budget)
    if planned is None:
        return None
    terms, words, low = planned
    if is_postgres(conn):
        return fts.match_query(terms, words), low
    return match_expression(terms, words), low


def plan_terms(
    conn: sqlite3.Connection, query: str, budget: PlanBudget
) -> tuple[list[str], list[str], int] | None:
    """`plan` before the expression: (terms kept, the query's words, lowest rowid to rank)."""
    words = query_words(query, budget.stop_words)
    terms = terms_of(words)
    if not terms:
        return None
    terms, low = _prune(conn, terms, budget)
    return terms, words, low


def _prune(conn: sqlite3.Connection, terms: list[str], budget: PlanBudget) -> tuple[list[str], int]:
    """(terms to match, lowest rowid to rank) within ``budget``."""
    try:
        total = conn.execute("SELECT max(rowid) FROM memories").fetchone()[0] or 0
    except sqlite3.OperationalError:
        return terms, 0
    if total < budget.prune_from:
        return terms, 0
    freqs = doc_freqs(conn, terms)
    if freqs is None:
        return terms, 0
    common = COMMON_FRACTION * total
    rare = [t for t in terms if freqs[t] <= common]  # unknown (0) words stay: they cost nothing
    selective = any(freqs[t] > 0 for t in rare)
    if selective:
        terms = rare
    postings = sum(freqs[t] for t in terms)
    if postings <= budget.max_postings or (selective and budget.window_common_only):
        return terms, 0
    return terms, total - int(total * budget.max_postings / postings)


def lexical_plan(conn: sqlite3.Connection, query: str) -> tuple[str, int] | None:
    """`plan` with the store's lexical-recall budget."""
    return plan(conn, query, store_recall())


def _tier_sql(repo_ids: Sequence[int], column: str = "m.id") -> str:
    if not repo_ids:
        return "(1 = 0)"
    inner = ",".join(str(int(i)) for i in repo_ids)
    return f"EXISTS (SELECT 1 FROM memory_scopes ms WHERE ms.memory_id = {column} AND ms.scope_id IN ({inner}))"


def lexical_search(
    conn: sqlite3.Connection,
    query: str,
    selection: Sequence[str],
    memory_type: str | None,
    limit: int,
) -> list[tuple[int, float]]:
    """BM25 over memory content within the selected scopes, repository matches first.

    Ties on BM25 are broken by importance, then recency. The scope and
    memory_type filters apply before ranking, so unselected memories never
    take a place in the result. Scores are ``-bm25`` (higher is better).

    Cost: the common case ranks a small window of the best FTS5 matches and
    filters it (no scope or type lookups for the rest); when the filters leave
    too few, one pass ranks every match with the filters applied in SQL (scope
    links and the type index only, never the memory rows), then the window of
    the best is re-sorted with the tie-breakers.
    """
    planned = lexical_plan(conn, query)
    if planned is None:
        return []
    match, low = planned
    ids = scope_ids(conn, selection)
    repo_ids = [sid for name, sid in ids.items() if name != GLOBAL]
    window = max(limit * CANDIDATE_FACTOR, MIN_CANDIDATES)
    postgres = is_postgres(conn)
    candidates = conn.execute(
        fts.MEMORY_MATCHES
        if postgres
        else "SELECT rowid, bm25(memories_fts) FROM memories_fts WHERE memories_fts MATCH ? AND rowid >= ? ORDER BY 2 LIMIT ?",
        (match, low, window),
    ).fetchall()
    rows = _filter_candidates(conn, candidates, ids, repo_ids, memory_type)
    enough = sum(r[1] for r in rows) >= limit if repo_ids else len(rows) >= limit
    if len(candidates) == window and not enough:
        # (memory_type, rowid) seeks in the small type index, not the memory rows.
        type_sql = (
            "AND EXISTS (SELECT 1 FROM memories t INDEXED BY memories_type"
            " WHERE t.memory_type = ? COLLATE NOCASE AND t.id = f.id)"
            if memory_type
            else ""
        )
        matches = (
            fts.MEMORY_MATCHES_ALL
            if postgres
            else """(SELECT rowid AS id, bm25(memories_fts) AS score FROM memories_fts
                     WHERE memories_fts MATCH ? AND rowid >= ?) f"""
        )
        candidates = conn.execute(
            f"""SELECT f.id, f.score FROM {matches}
                WHERE {visibility_sql(list(ids.values()), "f.id")} {type_sql}
                ORDER BY {_tier_sql(repo_ids, "f.id")} DESC, f.score ASC, f.id DESC LIMIT ?""",
            [match, low, *([memory_type] if memory_type else []), window],
        ).fetchall()
        rows = _filter_candidates(conn, candidates, ids, repo_ids, memory_type)
    score = dict(candidates)
    rows.sort(key=lambda r: (-r[1], score[r[0]], -r[2], -r[3], -r[0]))
    return [(r[0], -score[r[0]]) for r in rows[:limit]]


def _filter_candidates(
    conn: sqlite3.Connection,
    candidates: Sequence[tuple[int, float]],
    ids: dict[str, int],
    repo_ids: Sequence[int],
    memory_type: str | None,
) -> list[tuple[int, int, float, float]]:
    """(id, tier, importance, updated_at) of the candidates that pass the scope and type filters."""
    type_sql = "AND m.memory_type = ? COLLATE NOCASE" if memory_type else ""
    rows: list[tuple[int, int, float, float]] = []
    for start in range(0, len(candidates), db.SQL_CHUNK):
        chunk = [c[0] for c in candidates[start : start + db.SQL_CHUNK]]
        rows += conn.execute(
            f"""SELECT m.id, {_tier_sql(repo_ids)}, m.importance, m.updated_at FROM memories m
                WHERE m.id IN ({",".join("?" * len(chunk))}) AND {visibility_sql(list(ids.values()))} {type_sql}""",
            [*chunk, *([memory_type] if memory_type else [])],
        ).fetchall()
    return rows
