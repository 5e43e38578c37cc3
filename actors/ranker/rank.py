"""Semantic recall: seeds, then Personalized PageRank over the memory graph.

The HippoRAG 2 recipe, without an LLM:

1. **Seeds.** The query vector's top-k memories by cosine, sharpened with a
   temperature softmax (``seed_temperature``) and scaled by
   ``memory_seed_weight``; FTS5 (BM25) matches as extra memory seeds; the
   top-k entities and relations by their own vectors (softmax too) sharing the
   rest of the mass; and ``entity_anchor_weight`` more for each entity whose
   name appears literally in the query.
2. **Restriction first.** Memories outside the selected scopes or of another
   ``memory_type``, and entities / relations outside the selected scopes, are
   not candidates: they neither seed nor carry rank.
3. **PPR.** Personalized PageRank (igraph, ``damping``) on the seeds'
   neighbourhood (`MAX_HOPS` hops, at most `MAX_NEIGHBOURHOOD` nodes) of the
   cached graph; a memory's score is its PageRank mass.

Without any graph edges in the neighbourhood PPR would return the seed
distribution itself, so that case skips igraph.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass

import igraph
import numpy as np

from .graph import KIND_CODE, RecallCache, node, node_id, node_kind

MAX_HOPS = 2  # seed -> entity -> memory (or memory -> entity -> memory)
MAX_NEIGHBOURHOOD = 10_000  # nodes; PPR on 10k nodes takes ~2 ms
FTS_CANDIDATES = 200  # BM25 rows fetched before the scope / type filter
LEXICAL_SHARE = 0.5  # of the memory seed mass, given to FTS5 matches (the rest to cosine seeds)
RELATION_SHARE = 0.5  # of the entity/relation seed mass, given to relation seeds

# Words too common to be worth an FTS5 term (they also make MATCH slow on big stores).
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just me more most my
    myself no nor not now of off on once only or other our ours ourselves out over own same she should so
    some such than that the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom why will with would you your yours
    yourself yourselves i'm i've i'd it's don't what's""".split()
)
_FTS_TOKEN = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class Params:
    seed_top_k: int = 20
    seed_temperature: float = 0.05
    memory_seed_weight: float = 0.5
    entity_anchor_weight: float = 0.2
    damping: float = 0.5
    use_graph: bool = True  # False: seeds only ("semantic-only" mode)
    use_lexical: bool = True  # FTS5 matches as extra seeds


def light_stem(word: str) -> str:
    """Strip one common English suffix (``-ing``, ``-ed``, ``-es``, ``-s``, ``-ly``), keeping 4+ letters.

    The store's FTS5 index does not stem, so the stem is matched as a prefix:
    "expire" then also finds "expired" and "expires".
    """
    for suffix in ("ing", "ed", "es", "s", "ly"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def fts_query(text: str) -> str | None:
    """An FTS5 MATCH expression: the query's distinct non-stopword terms, stemmed, as OR-ed prefixes."""
    terms: list[str] = []
    for token in _FTS_TOKEN.findall(text.casefold()):
        if token in STOPWORDS:
            continue
        stem = light_stem(token)
        if stem not in terms:
            terms.append(stem)
    if not terms:
        return None
    return " OR ".join(f'"{t}"*' for t in terms[:32])


def lexical_seeds(
    conn: sqlite3.Connection, query: str, allowed: np.ndarray, k: int
) -> list[tuple[int, float]]:
    """Top ``k`` allowed memories by BM25 with their (positive, larger is better) scores."""
    expr = fts_query(query)
    if expr is None:
        return []
    try:
        rows = conn.execute(
            "SELECT rowid, -bm25(memories_fts) FROM memories_fts WHERE memories_fts MATCH ? ORDER BY rank LIMIT ?",
            (expr, FTS_CANDIDATES),
        ).fetchall()
    except sqlite3.OperationalError:
        return []
    out: list[tuple[int, float]] = []
    for rowid, score in rows:
        if rowid < len(allowed) and allowed[rowid]:
            out.append((int(rowid), float(score)))
            if len(out) >= k:
                break
    return out


def softmax(scores: np.ndarray, temperature: float) -> np.ndarray:
    if len(scores) == 0:
        return scores
    z = (scores - scores.max()) / temperature
    e = np.exp(z)
    return e / e.sum()


def seeds(
    cache: RecallCache,
    conn: sqlite3.Connection,
    query: str,
    qvec: np.ndarray,
    masks: dict[str, np.ndarray],
    p: Params,
) -> dict[int, float]:
    """The reset distribution of PPR: node -> weight (not normalised)."""
    out: dict[int, float] = {}

    def add(n: int, w: float) -> None:
        if w > 0:
            out[n] = out.get(n, 0.0) + w

    k = p.seed_top_k
    ids, cos = cache.index["memory"].search(qvec, k, masks["memory"])
    dense_mass = p.memory_seed_weight * (1 - LEXICAL_SHARE if p.use_lexical else 1.0)
    for item_id, w in zip(ids.tolist(), softmax(cos, p.seed_temperature).tolist(), strict=True):
        add(node("memory", item_id), dense_mass * w)
    if p.use_lexical:
        lex = lexical_seeds(conn, query, masks["memory"], k)
        if lex:
            # Reciprocal-rank weights: BM25 magnitudes are not comparable across queries.
            ranks = np.array([1.0 / (r + 1) for r in range(len(lex))])
            ranks /= ranks.sum()
            for (item_id, _), w in zip(lex, ranks.tolist(), strict=True):
                add(node("memory", item_id), p.memory_seed_weight * LEXICAL_SHARE * w)
    if p.use_graph:
        rest = 1.0 - p.memory_seed_weight
        ent_ids, ent_cos = cache.index["entity"].search(qvec, k, masks["entity"])
        rel_ids, rel_cos = cache.index["relation"].search(qvec, k, masks["relation"])
        ent_mass = rest * (1 - RELATION_SHARE) if len(rel_ids) else rest
        rel_mass = rest * RELATION_SHARE if len(ent_ids) else rest
        for item_id, w in zip(
            ent_ids.tolist(), softmax(ent_cos, p.seed_temperature).tolist(), strict=True
        ):
            add(node("entity", item_id), ent_mass * w)
        for item_id, w in zip(
            rel_ids.tolist(), softmax(rel_cos, p.seed_temperature).tolist(), strict=True
        ):
            add(node("relation", item_id), rel_mass * w)
        for entity_id in cache.named_entities(query, masks["entity"]):
            add(node("entity", entity_id), p.entity_anchor_weight)
    return out


def neighbourhood(cache: RecallCache, start: list[int], masks: dict[str, np.ndarray]) -> list[int]:
    """Allowed nodes within `MAX_HOPS` of ``start`` (breadth first, capped)."""
    kinds = {KIND_CODE[k]: masks[k] for k in masks}
    seen = dict.fromkeys(start)
    frontier = list(start)
    for _ in range(MAX_HOPS):
        nxt: list[int] = []
        for n in frontier:
            for m in cache.adj.get(n, ()):
                if m in seen:
                    continue
                mask = kinds[node_kind(m)]
                i = node_id(m)
                if i >= len(mask) or not mask[i]:
                    continue
                seen[m] = None
                nxt.append(m)
                if len(seen) >= MAX_NEIGHBOURHOOD:
                    return list(seen)
        frontier = nxt
        if not frontier:
            break
    return list(seen)


def personalized_pagerank(
    cache: RecallCache, reset: dict[int, float], masks: dict[str, np.ndarray], damping: float
) -> dict[int, float]:
    nodes = neighbourhood(cache, list(reset), masks)
    position = {n: i for i, n in enumerate(nodes)}
    edges: list[tuple[int, int]] = []
    for n, i in position.items():
        for m in cache.adj.get(n, ()):
            j = position.get(m)
            if j is not None and i < j:
                edges.append((i, j))
    weights = np.zeros(len(nodes))
    for n, w in reset.items():
        weights[position[n]] = w
    total = weights.sum()
    if not edges or total <= 0:
        return {n: w / total for n, w in reset.items()} if total > 0 else {}
    graph = igraph.Graph(n=len(nodes), edges=edges, directed=False)
    ranks = graph.personalized_pagerank(
        damping=damping, reset=(weights / total).tolist(), directed=False
    )
    return {n: ranks[i] for n, i in position.items()}


def rank(
    cache: RecallCache,
    conn: sqlite3.Connection,
    query: str,
    qvec: np.ndarray,
    masks: dict[str, np.ndarray],
    limit: int,
    p: Params,
) -> list[tuple[int, float]]:
    """The best ``limit`` memories for ``query`` as (memory id, score), best first."""
    reset = seeds(cache, conn, query, qvec, masks, p)
    if not reset:
        return []
    if p.use_graph:
        scores = personalized_pagerank(cache, reset, masks, p.damping)
    else:
        total = sum(reset.values())
        scores = {n: w / total for n, w in reset.items()}
    mem = KIND_CODE["memory"]
    ranked = sorted(
        ((node_id(n), s) for n, s in scores.items() if node_kind(n) == mem and s > 0),
        key=lambda t: (-t[1], t[0]),
    )
    return ranked[:limit]
