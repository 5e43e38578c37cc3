"""The vector tools that read: get an embedding, the searches, and the index's upkeep and figures.

Every search sees what the calling session sees (``VectorService.search``
filters by the session's scopes), answers at most ``topK`` (1-100) results
best first, and takes its query as a vector of the store's dimension or, with
``text``, as the local model's embedding of that text (`query_of`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from ...protocol.errors import BadArgument, Conflict, NotFound
from ...protocol.plural import plural
from ...supervisors.context import CallContext
from ..embedder.embed import embed, embedder_of
from ..kg.lookup import Ent, missing, resolve
from ..kg.search import term_hits
from ..kg.view import Scoped, View
from ..store.domain.lexical import query_terms
from ..store.interfaces import ReadTx
from ..vector_index.arrays import ValueRule
from . import args as A
from . import ranking, table
from . import results as X
from .service import VectorService, scopes_of, visible
from .writes import check_vector, service_view

TEXT_POOL = 50  # hybrid_search: at least this many candidates from each ranking


async def query_of(
    ctx: CallContext,
    service: VectorService,
    embedding: Sequence[float] | None,
    text: str | None,
    field: str = "embedding",
) -> np.ndarray:
    """The query vector: ``embedding`` checked, or ``text`` embedded by the local model.

    Error handling: `BadArgument` when neither or both are given, when the
    vector's dimension is not the store's, or when ``text`` cannot be
    embedded into the store's dimension (embeddings off, another model size).
    """
    if embedding is not None and text is not None:
        raise BadArgument(f"give either `{field}` or `text`, not both")
    if embedding is None and text is None:
        raise BadArgument(
            f"give `{field}` (a vector of {plural(service.dims, 'number')}) or `text` (embedded by the local model)"
        )
    if embedding is not None:
        blob = check_vector(embedding, service.dims, field, service.rule)
        return np.frombuffer(blob, dtype="<f4")
    embedder = embedder_of(ctx.app)
    if embedder is None:
        raise BadArgument(
            "`text` needs the local embedding model, and embeddings are off ([embedding] enabled, "
            f"MEMTRIO_EMBEDDINGS); pass `{field}` instead"
        )
    if embedder.dim != service.dims:
        raise BadArgument(
            f"`text` is embedded by the local model into {plural(embedder.dim, 'dimension')}, but this store's "
            f"embeddings have {service.dims} ([vectors] dims, --embedding-dims); pass `{field}` instead"
        )
    embedded = await embed(ctx.app, [text or ""], "query")
    if embedded is None:
        raise BadArgument(
            f"`text` could not be embedded (embeddings are off); pass `{field}` instead"
        )
    vec = embedded.vectors[0]
    windows = np.frombuffer(vec.data, dtype="<f4").reshape(vec.count, vec.dim)
    return ranking.unit(windows.mean(axis=0, keepdims=True))[0]


def hits(found: Sequence[tuple[Ent, float]]) -> X.SearchResults:
    return X.SearchResults(
        results=[X.Hit(entityName=e.name, entityType=e.kind, score=s) for e, s in found]
    )


def unusable(ent: Ent, problem: str) -> Conflict:
    """The error of a tool that needs an entity's stored vector, which cannot be used."""
    return Conflict(
        f"the stored embedding of {ent.name!r} cannot be used ({problem}); "
        "vector_upsert_embedding replaces it, vector_delete_embedding removes it"
    )


def with_vectors(
    tx: ReadTx,
    view: View,
    names: Sequence[str],
    dims: int,
    what: str,
    rule: ValueRule,
) -> tuple[list[Ent], np.ndarray]:
    """The visible entities ``names`` and their stored vectors, (n, dims) in that order.

    Error handling: `NotFound` for unknown entities, `BadArgument` for ones
    without an embedding of the store's dimension, `Conflict` for one whose
    stored vector cannot be used (`table.stored_vector`).
    """
    found = resolve(tx, Scoped(tx, view), names)
    unknown = missing(found, names)
    if unknown:
        raise NotFound(f"{what}: no such entities: {', '.join(map(repr, unknown))}")
    ents = list({e.id: e for e in (found[n] for n in names)}.values())
    rows = table.rows_of(tx, [e.id for e in ents])
    lacking = [e.name for e in ents if e.id not in rows or rows[e.id].dim != dims]
    if lacking:
        raise BadArgument(
            f"{what}: no embedding of {plural(dims, 'dimension')} for {', '.join(map(repr, lacking))} "
            "(vector_upsert_embedding)"
        )
    vectors = []
    for e in ents:
        vec = table.stored_vector(rows[e.id], dims, rule)
        if isinstance(vec, str):
            raise unusable(e, vec)
        vectors.append(vec)
    return ents, np.stack(vectors).astype(np.float32)


async def get_embedding(ctx: CallContext, args: A.EntityArgs) -> X.Embedding:
    service, view = await service_view(ctx)

    def op(tx: ReadTx) -> tuple[Ent, table.Row | None]:
        ent = resolve(tx, Scoped(tx, view), [args.entityName]).get(args.entityName)
        if ent is None:
            raise NotFound(f"entity {args.entityName!r} not found")
        return ent, table.rows_of(tx, [ent.id]).get(ent.id)

    ent, row = await service.store.read(op, name="vectors.get_embedding")
    if row is None:
        raise NotFound(f"entity {ent.name!r} has no embedding")
    # Any stored dimension is given back (`dims` says which), never a value JSON cannot hold.
    vec = table.stored_vector(row, row.dim, ValueRule()) if isinstance(row.dim, int) else None
    if vec is None or isinstance(vec, str):
        raise unusable(ent, vec or f"its dimension is stored as {row.dim!r}")
    values = vec.tolist()
    return X.Embedding(
        entityName=ent.name, entityType=ent.kind, dims=row.dim, model=row.model, embedding=values
    )


async def search_entities(ctx: CallContext, args: A.SearchArgs) -> X.SearchResults:
    service, view = await service_view(ctx)
    query = await query_of(ctx, service, args.embedding, args.text)
    return hits(await service.search(view, query, args.topK, args.entityType))


async def search_by_entity(ctx: CallContext, args: A.ByEntityArgs) -> X.SearchResults:
    service, view = await service_view(ctx)
    ents, vecs = await service.store.read(
        lambda tx: with_vectors(
            tx, view, [args.entityName], service.dims, "vector_search_by_entity", service.rule
        ),
        name="vectors.search_by_entity",
    )
    exclude = [ents[0].id] if args.excludeSelf else []
    return hits(await service.search(view, vecs[0], args.topK, exclude=exclude))


async def recommend(ctx: CallContext, args: A.RecommendArgs) -> X.SearchResults:
    """Entities like the positive examples and unlike the negative ones; the examples are left out."""
    service, view = await service_view(ctx)

    def op(tx: ReadTx) -> tuple[list[Ent], np.ndarray, list[Ent], np.ndarray]:
        pos, pvecs = with_vectors(tx, view, args.positive, service.dims, "positive", service.rule)
        if not args.negative:
            return pos, pvecs, [], np.zeros((0, service.dims), dtype=np.float32)
        neg, nvecs = with_vectors(tx, view, args.negative, service.dims, "negative", service.rule)
        return pos, pvecs, neg, nvecs

    pos, pvecs, neg, nvecs = await service.store.read(op, name="vectors.recommend")
    query = ranking.recommend_query(pvecs, nvecs, normalize=service.metric == "cos")
    exclude = [e.id for e in (*pos, *neg)]
    return hits(await service.search(view, query, args.topK, exclude=exclude))


async def mmr_search(ctx: CallContext, args: A.MmrArgs) -> X.SearchResults:
    """The ``fetchK`` nearest, then ``topK`` of them picked by Maximal Marginal Relevance (cosine)."""
    service, view = await service_view(ctx)
    query = await query_of(ctx, service, args.embedding, args.text)
    fetch = max(args.fetchK or max(4 * args.topK, 20), args.topK)
    pool = await service.search(view, query, fetch)
    ids = [e.id for e, _ in pool]
    rows = await service.store.read(lambda tx: table.rows_of(tx, ids), name="vectors.mmr_rows")
    stored = [
        (e.id, rows[e.id].vec) for e, _ in pool if e.id in rows and rows[e.id].dim == service.dims
    ]
    # A row changed since the search (by hand, say) and now unusable drops out of the pool.
    kept, mat, _ = table.usable_rows(stored, service.dims, service.rule)
    if not len(kept):
        return X.SearchResults(results=[])
    ents = {e.id: e for e, _ in pool}
    ents = {i: ents[i] for i in kept.tolist()}
    picked = ranking.mmr(query, list(ents), mat, args.topK, args.lambda_)
    return hits([(ents[i], score) for i, score in picked])


def text_ranking(tx: ReadTx, view: View, query: str, limit: int) -> list[Ent]:
    """Entities matching any word of ``query`` (names, types, observations), best first.

    Each word scores like ``search_nodes`` (3 for the name or type, 1 per
    observation); the scores add up over the words, ties by id.
    """
    terms = query_terms(query)
    if not terms:
        raise BadArgument("`queryText` has no words to search for")
    sc = Scoped(tx, view)
    scores: Counter[int] = Counter()
    for term in terms:
        scores.update(term_hits(tx, sc, term))
    seen = visible(tx, view, list(scores), None)
    ranked = sorted(seen.values(), key=lambda e: (-scores[e.id], e.id))
    return ranked[:limit]


async def hybrid_search(ctx: CallContext, args: A.HybridArgs) -> X.HybridResults:
    """Vector and full-text rankings fused by Reciprocal Rank Fusion (k = 60), optionally boosted."""
    service, view = await service_view(ctx)
    query = await query_of(ctx, service, args.queryEmbedding, args.text, "queryEmbedding")
    pool = max(4 * args.topK, TEXT_POOL)
    by_vector = await service.search(view, query, pool)
    by_text = await service.store.read(
        lambda tx: text_ranking(tx, view, args.queryText, pool), name="vectors.text_ranking"
    )
    ents = {e.id: e for e in by_text} | {e.id: e for e, _ in by_vector}
    fused = ranking.rrf(
        [e.id for e, _ in by_vector], [e.id for e in by_text], args.vecWeight, args.textWeight
    )
    degrees: Counter[int] | None = None
    if args.centralityBoost > 0:
        degrees = (await service.graph(view)).degrees
        fused = ranking.boost(fused, degrees, args.centralityBoost)
    return X.HybridResults(
        results=[
            X.HybridHit(
                entityName=ents[f.id].name,
                entityType=ents[f.id].kind,
                score=f.score,
                vectorRank=f.vector_rank,
                textRank=f.text_rank,
                degree=None if degrees is None else degrees.get(f.id, 0),
            )
            for f in fused[: args.topK]
        ]
    )


async def reindex(ctx: CallContext, args: A.NoArgs) -> X.Reindexed:
    service, _ = await service_view(ctx)
    seconds = await service.rebuild()
    return X.Reindexed(indexed=len(service.index), backend=service.backend, seconds=seconds)


async def refresh_graph_cache(ctx: CallContext, args: A.NoArgs) -> X.GraphCache:
    service, view = await service_view(ctx)
    graph = await service.graph(view, refresh=True)
    return X.GraphCache(nodes=len(graph.degrees), edges=graph.edges)


async def store_stats(ctx: CallContext, args: A.NoArgs) -> X.VectorStats:
    service, view = await service_view(ctx)

    def op(tx: ReadTx) -> int:
        return tx.embeddings.count_embedded(service.dims, scopes_of(tx, view))

    async with service.synced() as index:
        size, figures = len(index), index.stats()
        skipped, first = service.skipped_report()
    graph = await service.graph(view)
    seen = await service.store.read(
        lambda tx: visible(tx, view, [i for i, _ in first], None), name="vectors.skipped_names"
    )
    return X.VectorStats(
        embeddings=await service.store.read(op, name="vectors.count_visible"),
        dims=service.dims,
        metric=service.metric,
        backend=service.backend,
        indexSize=size,
        otherDims=service.other_dims,
        graphNodes=len(graph.degrees),
        graphEdges=graph.edges,
        index=figures,
        skipped=skipped,
        skippedRows=[
            X.SkippedRow(entityId=i, entityName=seen[i].name if i in seen else None, reason=why)
            for i, why in first
        ],
    )
