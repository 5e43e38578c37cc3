"""The vector tools' results: one msgspec struct per tool, whose JSON Schema is its ``outputSchema``.

camelCase like the graph tools. A search answers ``results``, best first,
each ``{entityName, entityType, score}``; ``score`` is higher-is-better for
every metric (cosine similarity, dot product, or the negated squared
Euclidean distance). ``hybrid_search`` adds each result's ranks in the two
lists it fused and its degree.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from ..kg.results import Warnings

StatValue = int | float | str | bool


class Upserted(msgspec.Struct, kw_only=True):
    """vector_upsert_embedding."""

    entityName: str
    dims: int
    model: str
    created: Annotated[bool, msgspec.Meta(description="false: an embedding was replaced")]
    warnings: Warnings = msgspec.UNSET  # a secret in `model` replaced ([store] secrets)


class BatchError(msgspec.Struct, kw_only=True):
    index: Annotated[int, msgspec.Meta(description="position of the item in `items`")]
    entityName: str
    error: str


class BatchUpserted(msgspec.Struct, kw_only=True):
    """vector_batch_upsert: the items stored, and why each other one was not."""

    upserted: Annotated[int, msgspec.Meta(description="items stored")]
    failed: Annotated[int, msgspec.Meta(description="items refused (see errors)")]
    errors: list[BatchError]
    warnings: Warnings = msgspec.UNSET  # secrets in `model` labels replaced ([store] secrets)


class Embedding(msgspec.Struct, kw_only=True):
    """vector_get_embedding."""

    entityName: str
    entityType: str
    dims: int
    model: str
    embedding: list[float]


class Hit(msgspec.Struct, kw_only=True):
    entityName: str
    entityType: str
    score: float


class SearchResults(msgspec.Struct, kw_only=True):
    """vector_search_entities, vector_search_by_entity, vector_recommend, vector_mmr_search."""

    results: list[Hit]


class HybridHit(msgspec.Struct, kw_only=True):
    entityName: str
    entityType: str
    score: Annotated[float, msgspec.Meta(description="the fused (and boosted) score")]
    vectorRank: Annotated[int | None, msgspec.Meta(description="1-based; null: not a vector hit")]
    textRank: Annotated[int | None, msgspec.Meta(description="1-based; null: not a text hit")]
    degree: Annotated[int | None, msgspec.Meta(description="visible relations; with a boost")] = (
        None
    )


class HybridResults(msgspec.Struct, kw_only=True):
    """hybrid_search."""

    results: list[HybridHit]


class Deleted(msgspec.Struct, kw_only=True):
    """vector_delete_embedding: the entity stays."""

    entityName: str
    deleted: Annotated[bool, msgspec.Meta(description="false: it had no embedding")]


class Reindexed(msgspec.Struct, kw_only=True):
    """vector_reindex."""

    indexed: int
    backend: str
    seconds: float


class GraphCache(msgspec.Struct, kw_only=True):
    """vector_refresh_graph_cache: the adjacency the centrality boost reads (visible relations)."""

    nodes: Annotated[int, msgspec.Meta(description="entities with at least one relation")]
    edges: int


class SkippedRow(msgspec.Struct, kw_only=True):
    """A stored embedding the index could not hold (skipped when loaded)."""

    entityId: int
    entityName: Annotated[
        str | None, msgspec.Meta(description="null when the session does not see the entity")
    ]
    reason: str


class VectorStats(msgspec.Struct, kw_only=True):
    """vector_store_stats."""

    embeddings: Annotated[int, msgspec.Meta(description="visible entities with an embedding")]
    dims: int
    metric: str
    backend: str
    indexSize: Annotated[int, msgspec.Meta(description="vectors in the index (every scope)")]
    otherDims: Annotated[
        int, msgspec.Meta(description="stored embeddings of another dimension, not indexed")
    ]
    graphNodes: int
    graphEdges: int
    index: Annotated[dict[str, StatValue], msgspec.Meta(description="the backend's own figures")]
    skipped: Annotated[
        int,
        msgspec.Meta(
            description="stored embeddings of the store's dimension the index could not hold "
            "(every scope): not dims float32 values, or a value not finite in the stored type"
        ),
    ] = 0
    skippedRows: Annotated[
        list[SkippedRow], msgspec.Meta(description="the first of them (at most 20), by entity id")
    ] = []
