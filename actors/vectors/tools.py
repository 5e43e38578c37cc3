"""The twelve vector tools (group ``vectors``), served only with ``--vectors`` / ``[vectors] enabled``.

Names and arguments are mcp-memory's (``docs/vectors.md``): bring-your-own
entity embeddings of the store's dimension, searched by vector or (memtrio)
by a ``text`` the local model embeds. Handlers: `writes` (upsert, batch,
delete) and `reads` (everything else).
"""

from __future__ import annotations

import functools

from ...protocol.tools import grouped_tool
from . import args as A
from . import reads as R
from . import results as X
from . import writes as W

GROUP = "vectors"


_w = functools.partial(grouped_tool, GROUP)
_r = functools.partial(grouped_tool, GROUP, read_only=True, idempotent=True)

TOOLS = [
    _w("vector_upsert_embedding", "Upsert Embedding",
       "Set an existing entity's embedding (your own), replacing any.",
       A.UpsertArgs, W.upsert_embedding, X.Upserted, idempotent=True),
    _w("vector_batch_upsert", "Batch Upsert Embeddings",
       "Upsert embeddings in one transaction; items that cannot be stored (unknown entity, wrong "
       "dimension, non-finite) are listed in errors, the rest stored.",
       A.BatchUpsertArgs, W.batch_upsert, X.BatchUpserted, idempotent=True),
    _r("vector_get_embedding", "Get Embedding", "An entity's stored embedding and model label.",
       A.EntityArgs, R.get_embedding, X.Embedding),
    _r("vector_search_entities", "Vector Search",
       "Entities the session sees nearest an embedding (or `text`), best first.",
       A.SearchArgs, R.search_entities, X.SearchResults),
    _r("vector_search_by_entity", "More Like This",
       "The entities nearest an entity's own embedding.",
       A.ByEntityArgs, R.search_by_entity, X.SearchResults),
    _r("vector_recommend", "Recommend",
       "Entities like the `positive` and unlike the `negative` ones (by mean embedding), examples "
       "excluded.",
       A.RecommendArgs, R.recommend, X.SearchResults),
    _r("vector_mmr_search", "MMR Search",
       "Diverse nearest entities: topK of the fetchK nearest, by Maximal Marginal Relevance.",
       A.MmrArgs, R.mmr_search, X.SearchResults),
    _r("hybrid_search", "Hybrid Search",
       "Vector and full-text search (names, types, observations; any word) fused by weighted "
       "Reciprocal Rank Fusion (k = 60).",
       A.HybridArgs, R.hybrid_search, X.HybridResults),
    _w("vector_delete_embedding", "Delete Embedding",
       "Remove an entity's embedding; the entity itself stays.",
       A.EntityArgs, W.delete_embedding, X.Deleted, destructive=True, idempotent=True),
    _w("vector_reindex", "Reindex Vectors",
       "Rebuild the vector index (retrains IVF; after large ingestions).",
       A.NoArgs, R.reindex, X.Reindexed, idempotent=True),
    _w("vector_refresh_graph_cache", "Refresh Graph Cache",
       "Rebuild hybrid_search's centralityBoost adjacency cache (after relations change).",
       A.NoArgs, R.refresh_graph_cache, X.GraphCache, idempotent=True),
    _r("vector_store_stats", "Vector Store Statistics",
       "Embedding count, dimension, metric, index backend and size, graph cache size, unusable "
       "embeddings skipped.",
       A.NoArgs, R.store_stats, X.VectorStats),
]  # fmt: skip
