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
4. **Thread neighbours.** Each of the best memories lends ``neighbour_weight``
   of its score to the memories written just before and after it in its
   thread (`signals.neighbour_context`).
5. **Diversification.** Maximal marginal relevance (``mmr_lambda``) over the
   best `MMR_CANDIDATES` memories, with the memories' own vectors, so that
   near-duplicates do not crowd the first places (`mmr.diversify`).

Without any graph edges in the neighbourhood PPR would return the seed
distribution itself, so that case skips igraph.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from ..native import igraph  # OpenMP settings first (actors/native.py)
from ..store.domain import lexical
from ..store.interfaces import ReadTx, Snapshot, StoreTx
from ..store.interfaces.fulltext import FullTextReads
from . import rerank, sql_graph
from .dates import query_dates
from .graph import (
    KIND_CODE,
    NODE_KINDS,
    RecallCache,
    node,
    query_words,
)
from .mmr import diversify
from .signals import date_boost, date_first, explain, neighbour_context

MAX_HOPS = 2  # seed -> entity -> memory (or memory -> entity -> memory)
MAX_NEIGHBOURHOOD = 1_500  # nodes; PPR plus building the subgraph takes ~5 ms
FTS_CANDIDATES = 200  # BM25 rows fetched before the scope / type filter
MAX_POSTINGS = 5_000  # postings FTS5 may score per query, about 7 ms (see FTS_BUDGET)
PRUNE_FROM = 5_000  # memories; below that every FTS5 query is cheap and nothing is dropped
RELATION_SHARE = 0.5  # of the entity/relation seed mass, given to relation seeds
MMR_CANDIDATES = 30  # best memories re-ordered by maximal marginal relevance (at least ``limit``)
MIN_TERM_CAP = 20  # memories a term may link to and be walked, whatever the store's size
# The FTS5 seeds' query plan (`lexical.plan`): every function word dropped; on a big
# store the common words too, and only the newest memories holding about
# MAX_POSTINGS postings ranked when the words hold more: the lexical seeds then
# favour recent memories, while the vector seeds still cover the whole store.
FTS_BUDGET = lexical.PlanBudget(lexical.FUNCTION_WORDS, MAX_POSTINGS, prune_from=PRUNE_FROM)


@dataclass(frozen=True)
class Params:
    seed_top_k: int = 20
    seed_temperature: float = 0.1
    memory_seed_weight: float = 0.5
    entity_anchor_weight: float = 0.2
    damping: float = 0.5
    use_graph: bool = True  # False: seeds only ("semantic-only" mode)
    use_lexical: bool = True  # FTS5 matches as extra seeds
    lexical_share: float = 0.65  # of the memory seed mass given to FTS5 matches (rest: cosine)
    mmr_lambda: float = 0.9  # maximal marginal relevance trade-off; 1.0 = no diversification
    use_dense: bool = True  # the query vector's nearest memories as seeds
    neighbour_weight: float = 0.05  # share of a memory's score lent to its thread neighbours
    neighbour_window: int = 2  # thread neighbours on each side that receive it
    term_anchor_weight: float = 0.2  # seed mass of each term (`terms`) named in the query
    term_max_share: float = 0.05  # a term in more of the selected memories is not walked
    date_weight: float = 1.0  # boost of memories whose dates meet the query's (`dates`)
    rerank: bool = True  # memory seeds from the learned model (`rerank`), not the fixed mixture
    position_penalty: float = 1.0  # `rerank.diversify`: log-score cost of a chosen one's neighbour
    # ... for a question asking for several things (`rerank.list_question`): this cost for a
    # chosen one's neighbours up to this many places away
    list_penalty: float = 1.5
    list_window: int = 6
    use_topic: bool = True  # the re-ranker's topic features (`rerank.topic_query`)

    @property
    def reranked(self) -> bool:
        """Whether the learned re-ranker ranks: it is on and has both seed lists."""
        return self.rerank and self.use_dense and self.use_lexical


def fts_seeds(ft: FullTextReads, query: str) -> list[tuple[int, float]]:
    """The best `FTS_CANDIDATES` memories by BM25, unfiltered: (id, score, larger is better).

    The query's words match by stem, and neighbouring words again when they
    are close together in the memory (`TextQuery.pairs`). Independent of the
    query vector, so the ranker runs it while the query is embedded. On a big
    store whose query words hold more postings than the budget, only the newest
    memories are ranked (`lexical.plan`, `FullText.seed_memories`).
    """
    return [(m.id, m.score) for m in lexical.seed_memories(ft, query, FTS_BUDGET, FTS_CANDIDATES)]


def fts_candidates(tx: ReadTx, query: str) -> list[tuple[int, float]]:
    """`fts_seeds` in one transaction of the store (the ranker's own reader's, or the pool's)."""
    return fts_seeds(tx.fulltext, query)


# pgvector candidates fetched per wanted seed (the scope filter applies after the index).
PG_DENSE_FACTOR = 4


def store_dense_memories(
    cache: RecallCache, snap: Snapshot, qvec: np.ndarray, k: int, allowed: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """The ``k`` allowed memories nearest ``qvec`` by the store's own vector index
    (PostgreSQL: pgvector's HNSW indexes; every window, best cosine), or None when the
    in-process index must answer (no such index, or the scope filter left fewer than
    ``k`` of the candidates)."""
    n = PG_DENSE_FACTOR * k
    q = np.asarray(qvec, dtype=np.float32).reshape(-1).tolist()
    rows = snap.nearest_memories(q, cache.model, cache.revision, n)
    if rows is None:
        return None
    kept = [(i, c) for i, c in rows if i < len(allowed) and allowed[i]][:k]
    if len(kept) < k and len(rows) >= n:
        return None
    ids = np.array([i for i, _ in kept], dtype=np.int64)
    return ids, np.array([c for _, c in kept], dtype=np.float32)


def nearest_memories(
    cache: RecallCache, snap: Snapshot, qvec: np.ndarray, k: int, allowed: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` allowed memories nearest the query and their cosines, best first
    (pgvector on PostgreSQL when it can answer, else the in-process index)."""
    near = store_dense_memories(cache, snap, qvec, k, allowed)
    return near if near is not None else cache.index["memory"].search(qvec, k, allowed)


def lexical_seeds(
    candidates: list[tuple[int, float]], allowed: np.ndarray, k: int
) -> list[tuple[int, float]]:
    """The first ``k`` allowed memories of ``candidates`` (see `fts_candidates`)."""
    out: list[tuple[int, float]] = []
    for rowid, score in candidates:
        if rowid < len(allowed) and allowed[rowid]:
            out.append((rowid, score))
            if len(out) >= k:
                break
    return out


def softmax(scores: np.ndarray, temperature: float) -> np.ndarray:
    if len(scores) == 0:
        return scores
    z = (scores - scores.max()) / temperature
    e = np.exp(z)
    return e / e.sum()


@dataclass(frozen=True)
class SeedQuery:
    """What the seed functions read: the query, its vector, the selection, the settings."""

    cache: RecallCache
    tx: ReadTx
    query: str
    qvec: np.ndarray
    masks: dict[str, np.ndarray]
    p: Params
    lexical: list[tuple[int, float]] | None  # `fts_candidates` already fetched, or None
    tvec: np.ndarray | None = None  # the vector of `rerank.topic_query` (None: no names)
    turns: set[int] | None = None  # receives the re-ranker's turns of a conversation

    def parts(
        self,
    ) -> tuple[
        RecallCache,
        ReadTx,
        str,
        np.ndarray,
        dict[str, np.ndarray],
        Params,
        list[tuple[int, float]] | None,
    ]:
        """The fields in order, to unpack at the top of a seed function."""
        return (self.cache, self.tx, self.query, self.qvec, self.masks, self.p, self.lexical)


def seeds(
    cache: RecallCache,
    tx: ReadTx,
    query: str,
    qvec: np.ndarray,
    masks: dict[str, np.ndarray],
    p: Params,
    lexical: list[tuple[int, float]] | None = None,
    notes: dict[int, list[str]] | None = None,
    tvec: np.ndarray | None = None,
    turns: set[int] | None = None,
) -> dict[int, float]:
    """The reset distribution of PPR: node -> weight (not normalised).

    ``lexical``: `fts_candidates` already fetched (else they are fetched on ``tx``).
    ``notes``: if given, receives why each node is a seed (for ``explain``).
    ``tvec``: the vector of the query without its names (`rerank.topic_query`).
    ``turns``: if given, receives the re-ranker's candidates that are turns of a
    conversation (`rerank.conversation_turns`).
    """
    out: dict[int, float] = {}

    def add(n: int, w: float, note: str = "") -> None:
        """Seed mass ``w`` for node ``n`` (0: only the note, for a node already seeded)."""
        if w > 0:
            out[n] = out.get(n, 0.0) + w
        if notes is not None and note and n in out:
            notes.setdefault(n, []).append(note)

    q = SeedQuery(cache, tx, query, qvec, masks, p, lexical, tvec, turns)
    (reranked_seeds if p.reranked else mixed_seeds)(q, add)
    if p.use_graph:
        graph_seeds(q, add)
    return out


def rerank_candidates(q: SeedQuery) -> rerank.Candidates:
    """The candidates and features `reranked_seeds` scores (and `tools/fit_rerank.py` fits on)."""
    cache, tx, query, qvec, masks, p, lexical = q.parts()
    allowed = masks["memory"]
    dense = nearest_memories(cache, tx.snapshot, qvec, rerank.POOL, allowed)
    if lexical is None:
        lexical = fts_candidates(tx, query)
    wanted = query_dates(query) if cache.dates is not None and p.date_weight > 0 else []
    lex = lexical_seeds(date_first(cache, lexical, wanted), allowed, rerank.POOL)
    ids, rows, lenders, turns = rerank.features(
        cache, tx.snapshot, query, qvec, allowed, lex, dense, q.tvec
    )
    return rerank.Candidates(dense, lex, ids, rows, lenders, turns)


def reranked_seeds(q: SeedQuery, add: Callable[..., None]) -> None:
    """Memory seeds weighted by the learned model's softmax over the candidates."""
    c = rerank_candidates(q)
    dense, lex, ids, rows, lenders = c.dense, c.lex, c.ids, c.rows, c.lenders
    if q.turns is not None:
        q.turns.update(c.turns)
    p = q.p
    z = rerank.scores(rows)
    topic_at = rerank.topic_ranks(rows)
    best = np.argsort(-z, kind="stable")[: rerank.SEEDS]
    topic_at = {j: topic_at[i] for j, i in enumerate(best.tolist()) if i in topic_at}
    ids, rows, z = [ids[i] for i in best.tolist()], rows[best], z[best]
    weights = rerank.softmax_weights(z).tolist()
    lex_at = {m: (r, score) for r, (m, score) in enumerate(lex)}
    dense_at = {int(m): r for r, m in enumerate(dense[0].tolist())}
    for i in range(len(ids)):  # best first already (`best` is the stable sort)
        n = node("memory", ids[i])
        add(n, p.memory_seed_weight * weights[i], f"reranked: #{i + 1}, score {z[i]:.2f}")
        if ids[i] in lex_at:
            add(n, 0.0, f"lexical: #{lex_at[ids[i]][0] + 1}, BM25 {lex_at[ids[i]][1]:.2f}")
        if ids[i] in dense_at:
            add(n, 0.0, f"dense: #{dense_at[ids[i]] + 1}")
        if ids[i] in lenders:
            add(n, 0.0, f"neighbour: written next to memory {lenders[ids[i]]}, which matches")
        if rows[i][rerank.SUBJECT_COLUMN] > 0:
            add(n, 0.0, "subject: it starts with a name the query uses")
        if i in topic_at:
            add(n, 0.0, f"topic: #{topic_at[i] + 1} by cosine to the query without its names")


def mixed_seeds(q: SeedQuery, add: Callable[..., None]) -> None:
    """Memory seeds: the cosine softmax and the FTS5 reciprocal ranks, in fixed shares."""
    cache, tx, query, qvec, masks, p, lexical = q.parts()
    k = p.seed_top_k
    dense_share = 1.0 if not p.use_lexical else 1 - p.lexical_share
    lexical_share = 1.0 if not p.use_dense else p.lexical_share
    if p.use_dense:
        ids, cos = nearest_memories(cache, tx.snapshot, qvec, k, masks["memory"])
        dense_mass = p.memory_seed_weight * dense_share
        weights = softmax(cos, p.seed_temperature).tolist()
        for r, (item_id, c, w) in enumerate(zip(ids.tolist(), cos.tolist(), weights, strict=True)):
            add(node("memory", item_id), dense_mass * w, f"dense: #{r + 1}, cosine {c:.3f}")
    if p.use_lexical:
        if lexical is None:
            lexical = fts_candidates(tx, query)
        wanted = query_dates(query) if cache.dates is not None and p.date_weight > 0 else []
        lex = lexical_seeds(date_first(cache, lexical, wanted), masks["memory"], k)
        if lex:
            # Reciprocal-rank weights: BM25 magnitudes are not comparable across queries.
            ranks = np.array([1.0 / (r + 1) for r in range(len(lex))])
            ranks /= ranks.sum()
            for r, ((item_id, bm25), w) in enumerate(zip(lex, ranks.tolist(), strict=True)):
                add(
                    node("memory", item_id),
                    p.memory_seed_weight * lexical_share * w,
                    f"lexical: #{r + 1}, BM25 {bm25:.2f}",
                )


def graph_seeds(q: SeedQuery, add: Callable[..., None]) -> None:
    """Entity and relation seeds: nearest by cosine, named in the query, and terms."""
    cache, query, qvec, masks, p = q.cache, q.query, q.qvec, q.masks, q.p
    k = p.seed_top_k
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
        add(node("entity", entity_id), p.entity_anchor_weight, "named in the query")
    if cache.terms is not None and p.term_anchor_weight > 0:
        cap = term_cap(masks, p)
        for term_id in cache.terms.named_in(query_words(query)):
            n = node("term", term_id)
            if 1 < len(cache.adj.get(n, ())) <= cap:
                add(n, p.term_anchor_weight)


def term_cap(masks: dict[str, np.ndarray], p: Params) -> int:
    """The most memories a term may link to and still be walked (more: a hub, like a
    speaker's name on every turn, that would spread mass everywhere)."""
    return max(MIN_TERM_CAP, int(p.term_max_share * int(masks["memory"].sum())))


def neighbourhood(
    cache: RecallCache, start: list[int], masks: dict[str, np.ndarray], term_limit: int = 0
) -> list[int]:
    """Allowed nodes within `MAX_HOPS` of ``start`` (breadth first, seeds first, capped).

    A node reached only through a hub gets the hub's mass divided by its
    degree, so stopping at `MAX_NEIGHBOURHOOD` nodes loses little. A term is
    walked when it links 2 to ``term_limit`` memories (see `term_cap`).
    """
    return sql_graph.walk(
        start,
        masks,
        lambda frontier: cache.adj,
        lambda term: len(cache.adj.get(term, ())),
        term_limit,
        MAX_HOPS,
        MAX_NEIGHBOURHOOD,
    )


def personalized_pagerank(
    cache: RecallCache,
    reset: dict[int, float],
    masks: dict[str, np.ndarray],
    damping: float,
    term_limit: int = 0,
    snap: Snapshot | None = None,
) -> tuple[np.ndarray, np.ndarray, Mapping[int, set[int]]]:
    """PPR over the seeds' neighbourhood: (node ids, their rank) as arrays, and the links
    walked. Without the stored graph in the cache (``cache.stored_edges`` off: the store
    does not let readers keep it, `Snapshot.keeps_graph`) the neighbourhood and its edges
    are read from ``snap`` (`sql_graph`)."""
    links: Mapping[int, set[int]]
    if cache.stored_edges or snap is None:
        nodes = neighbourhood(cache, list(reset), masks, term_limit)
        links = cache.adj
    else:
        nodes = sql_graph.neighbourhood(
            snap, list(reset), masks, cache.adj, term_limit, MAX_HOPS, MAX_NEIGHBOURHOOD
        )
        links = sql_graph.subgraph_links(snap, nodes, cache.adj)
    position = {n: i for i, n in enumerate(nodes)}
    edges: list[tuple[int, int]] = []
    # Every edge has a memory or relation end (there are no entity-entity or term
    # edges between hubs), and those ends have few peers, while an entity or a term
    # may have thousands: walk from them. (`node_kind` inlined: about 5,000 links a
    # recall.)
    hubs = (KIND_CODE["entity"], KIND_CODE["term"])
    at = position.get
    for n, i in position.items():
        if n % NODE_KINDS in hubs:
            continue
        for m in links.get(n, ()):
            j = at(m)
            if j is not None and (i < j or m % NODE_KINDS in hubs):
                edges.append((i, j))
    weights = np.zeros(len(nodes))
    for n, w in reset.items():
        weights[position[n]] = w
    total = weights.sum()
    node_arr = np.fromiter(nodes, dtype=np.int64, count=len(nodes))
    if total <= 0:
        return node_arr, np.zeros(len(nodes)), links
    if not edges:
        return node_arr, weights / total, links
    graph = igraph.Graph(n=len(nodes), edges=edges, directed=False)
    ranks = graph.personalized_pagerank(
        damping=damping, reset=(weights / total).tolist(), directed=False
    )
    return node_arr, np.asarray(ranks), links


def rank(
    cache: RecallCache,
    tx: StoreTx,
    query: str,
    qvec: np.ndarray,
    masks: dict[str, np.ndarray],
    limit: int,
    p: Params,
    lexical: list[tuple[int, float]] | None = None,
    tvec: np.ndarray | None = None,
) -> list[tuple[int, float]]:
    """The best ``limit`` memories for ``query`` as (memory id, score), best first
    (``tvec``: the vector of `rerank.topic_query`, None when the query has no names)."""
    return rank_explained(cache, tx, query, qvec, masks, limit, p, lexical, tvec=tvec)[0]


def reranked_order(
    cache: RecallCache,
    nodes: np.ndarray,
    scores: np.ndarray,
    masks: dict[str, np.ndarray],
    limit: int,
    p: Params,
    query: str,
    turns: set[int],
) -> list[tuple[int, float]]:
    """The first ``limit`` of the re-ranked memories, diversified: a conversation's turns
    by their thread neighbours (`rerank.diversify`), other memories by near-duplicates."""
    take = max(limit, rerank.DIVERSIFY_POOL)
    if len(nodes) > take:
        top = np.argpartition(-scores, take - 1)[:take]
        nodes, scores = nodes[top], scores[top]
    order = np.lexsort((nodes, -scores))
    ranked = [(int(nodes[i]), float(scores[i])) for i in order]
    listing = rerank.list_question(query)  # a wider stretch of the thread pays
    penalty, window = (p.list_penalty, p.list_window) if listing else (p.position_penalty, 1)
    # only a conversation's turns: notes next to each other are about different things
    if turns:
        return rerank.diversify(cache, ranked, masks["memory"], limit, penalty, window, turns)
    if p.mmr_lambda < 1.0:  # notes: near-duplicates, not neighbours, crowd the first places
        return diversify(cache, ranked, limit, rerank.note_mmr(p.mmr_lambda), MMR_CANDIDATES)
    return ranked[:limit]


def rank_explained(
    cache: RecallCache,
    tx: ReadTx,
    query: str,
    qvec: np.ndarray,
    masks: dict[str, np.ndarray],
    limit: int,
    p: Params,
    lexical: list[tuple[int, float]] | None = None,
    with_reasons: bool = False,
    tvec: np.ndarray | None = None,
) -> tuple[list[tuple[int, float]], dict[int, list[str]]]:
    """`rank`, and with ``with_reasons`` why each memory is there (memory id -> reasons)."""
    notes: dict[int, list[str]] | None = {} if with_reasons else None
    turns: set[int] = set()
    reset = seeds(cache, tx, query, qvec, masks, p, lexical, notes, tvec, turns)
    if not reset:
        return [], {}
    links: Mapping[int, set[int]] = cache.adj
    if p.use_graph:
        nodes, scores, links = personalized_pagerank(
            cache, reset, masks, p.damping, term_cap(masks, p), tx.snapshot
        )
    else:
        nodes = np.fromiter(reset.keys(), dtype=np.int64, count=len(reset))
        scores = np.fromiter(reset.values(), dtype=np.float64, count=len(reset))
        scores = scores / scores.sum()
    keep = (nodes % NODE_KINDS == KIND_CODE["memory"]) & (scores > 0)
    nodes, scores = nodes[keep] // NODE_KINDS, scores[keep]
    wanted = query_dates(query) if cache.dates is not None and p.date_weight > 0 else []
    scores, dated = date_boost(cache, nodes, scores, wanted, p.date_weight)
    reranked = p.reranked
    nodes, scores, lender = neighbour_context(
        cache,
        nodes,
        scores,
        masks["memory"],
        0.0 if reranked else p.neighbour_weight,  # the model has neighbour features
        p.neighbour_window,
    )
    if reranked:
        ranked = reranked_order(cache, nodes, scores, masks, limit, p, query, turns)
        if notes is None:
            return ranked, {}
        return ranked, explain(cache, links, ranked, notes, reset, lender, p.use_graph, dated)
    diversified = p.mmr_lambda < 1.0
    take = max(limit, MMR_CANDIDATES) if diversified else limit
    if len(nodes) > take:
        top = np.argpartition(-scores, take - 1)[:take]
        nodes, scores = nodes[top], scores[top]
    order = np.lexsort((nodes, -scores))
    ranked = [(int(nodes[i]), float(scores[i])) for i in order]
    if diversified:
        ranked = diversify(cache, ranked, limit, p.mmr_lambda, MMR_CANDIDATES)
    ranked = ranked[:limit]
    if notes is None:
        return ranked, {}
    return ranked, explain(cache, links, ranked, notes, reset, lender, p.use_graph, dated)
