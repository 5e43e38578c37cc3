"""Lexical search: the words of free text, the one plan that keeps their queries cheap, BM25 recall.

`plan` turns a query into a `TextQuery` (the words to match) and the lowest
memory id to rank. It is the only lexical planner: the store's lexical recall
(`search_memories`, with `store_recall`) and the ranker's lexical seeds
(`seed_memories`, with their own `PlanBudget`) both use it, so the two match
words the same way and differ only in the budget they are given.

No SQL here: the queries run through the full-text interface
(`interfaces.fulltext.FullText`, ``tx.fulltext``), which each backend
implements in its own query language.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from ..interfaces import ReadTx
from ..interfaces.errors import StoreOperationalError
from ..interfaces.fulltext import FullTextReads, MemoryFilter, MemoryMatch, TextQuery
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
# The candidate window of search_memories: the limit * CANDIDATE_FACTOR (at
# least MIN_CANDIDATES) best BM25 matches.
CANDIDATE_FACTOR = 5
MIN_CANDIDATES = 50
# Two query words next to each other also match as a phrase (`TextQuery.pairs`), at
# most `interfaces.fulltext.PROXIMITY` words apart.


@dataclass(frozen=True)
class PlanBudget:
    """How `plan` keeps one full-text query cheap.

    - ``stop_words``: dropped from the query (when another word remains);
    - ``max_postings``: above this many postings only the newest memories are ranked;
    - ``prune_from``: a store of fewer memories (by id) is never pruned;
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


def plan(ft: FullTextReads, query: str, budget: PlanBudget) -> tuple[TextQuery, int] | None:
    """(what to match, lowest memory id to rank) for ``query``, or None when it has no words.

    Terms found in more than `COMMON_FRACTION` of the memories are dropped if a
    rarer one remains (they barely move BM25 but make the index score most of the
    store). If the terms left hold more than the budget's postings, only the
    newest memories holding about that many are ranked (see `PlanBudget`).
    The counts are `FullText.memory_frequencies` (SQLite: the read connections'
    ``fts5vocab`` table; PostgreSQL: the planner's estimates); where there are
    none, nothing is pruned.
    """
    words = query_words(query, budget.stop_words)
    terms = terms_of(words)
    if not terms:
        return None
    terms, low = _prune(ft, terms, budget)
    return TextQuery(terms, words), low


def _prune(ft: FullTextReads, terms: list[str], budget: PlanBudget) -> tuple[list[str], int]:
    """(terms to match, lowest memory id to rank) within ``budget``."""
    try:
        total = ft.newest_memory_id()
    except StoreOperationalError:  # either backend's
        return terms, 0
    if total < budget.prune_from:
        return terms, 0
    freqs = ft.memory_frequencies(terms)
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


def lexical_plan(ft: FullTextReads, query: str) -> tuple[TextQuery, int] | None:
    """`plan` with the store's lexical-recall budget."""
    return plan(ft, query, store_recall())


def seed_memories(
    ft: FullTextReads, query: str, budget: PlanBudget, limit: int
) -> list[MemoryMatch]:
    """The ranker's lexical seeds: the best ``limit`` memories for ``query`` within
    ``budget``, unfiltered (`FullText.seed_memories`)."""
    planned = plan(ft, query, budget)
    if planned is None:
        return []
    text, low = planned
    return ft.seed_memories(text, low, limit)


def search_memories(
    tx: ReadTx,
    query: str,
    selection: Sequence[str],
    memory_type: str | None,
    limit: int,
) -> list[tuple[int, float]]:
    """BM25 over memory content within the selected scopes, repository matches first.

    Ties on BM25 are broken by importance, then recency. The scope and
    memory_type filters apply before ranking, so unselected memories never
    take a place in the result. Scores are larger-is-better (``-bm25`` on SQLite).

    Cost: the common case ranks a small window of the best matches and
    filters it (no scope or type lookups for the rest); when the filters leave
    too few, one pass ranks every match with the filters applied in the query
    (scope links and the type index only, never the memory rows), then the
    window of the best is re-sorted with the tie-breakers.
    """
    ft = tx.fulltext
    planned = lexical_plan(ft, query)
    if planned is None:
        return []
    text, low = planned
    ids = tx.scopes.ids(selection)
    allowed = MemoryFilter(
        scope_ids=list(ids.values()),
        repo_ids=[sid for name, sid in ids.items() if name != GLOBAL],
        memory_type=memory_type,
    )
    window = max(limit * CANDIDATE_FACTOR, MIN_CANDIDATES)
    candidates = ft.best_memories(text, low, window)
    rows = ft.memory_candidates([c.id for c in candidates], allowed)
    enough = sum(r.in_repo for r in rows) >= limit if allowed.repo_ids else len(rows) >= limit
    if len(candidates) == window and not enough:
        candidates = ft.best_memories_filtered(text, low, allowed, window)
        rows = ft.memory_candidates([c.id for c in candidates], allowed)
    score = {c.id: c.score for c in candidates}
    rows.sort(key=lambda r: (-r.in_repo, -score[r.id], -r.importance, -r.updated_at, -r.id))
    return [(r.id, score[r.id]) for r in rows[:limit]]
