"""The vector tools' arguments: msgspec structs (each tool's ``inputSchema``).

Names are mcp-memory's (camelCase, ``docs/vectors.md``); memtrio adds an
optional ``text`` to the tools that take a query vector (the local model
embeds it) and a ``centralityBoost`` to ``hybrid_search``. A query vector is
then optional in the schema: exactly one of the vector and ``text`` must be
given (`query_of` in ``tools`` says so otherwise).

Bounds are mcp-memory's: at most 4,096 dimensions, ``topK`` 1-100, 1,024
items per ``vector_batch_upsert``. The store's own dimension (``[vectors]
dims``) is checked by the handlers, since a schema cannot know it.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from ..kg.args import Name

MAX_DIMS = 4096
MAX_TOP_K = 100
MAX_BATCH = 1024
MAX_EXAMPLES = 100  # entities named by one vector_recommend

Embedding = Annotated[
    list[float],
    msgspec.Meta(
        min_length=1,
        max_length=MAX_DIMS,
        description="length: [vectors] dims",
    ),
]
Model = str  # the label of the model that made the embedding
TopK = Annotated[int, msgspec.Meta(ge=1, le=MAX_TOP_K)]
Text = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        description="text to embed instead of a vector",
    ),
]


class UpsertArgs(msgspec.Struct, forbid_unknown_fields=True):
    entityName: Name
    embedding: Embedding
    model: Model | None = None


class BatchItem(msgspec.Struct, forbid_unknown_fields=True):
    entityName: Name
    embedding: Annotated[list[float], msgspec.Meta(max_length=MAX_DIMS)]
    model: Model | None = None


class BatchUpsertArgs(msgspec.Struct, forbid_unknown_fields=True):
    items: Annotated[
        list[BatchItem],
        msgspec.Meta(min_length=1, max_length=MAX_BATCH),
    ]


class EntityArgs(msgspec.Struct, forbid_unknown_fields=True):
    entityName: Name


class SearchArgs(msgspec.Struct, forbid_unknown_fields=True):
    embedding: Embedding | None = None
    topK: TopK = 10
    entityType: str | None = None
    text: Text | None = None


class ByEntityArgs(msgspec.Struct, forbid_unknown_fields=True):
    entityName: Name
    topK: TopK = 10
    excludeSelf: bool = True


class RecommendArgs(msgspec.Struct, forbid_unknown_fields=True):
    positive: Annotated[
        list[Name],
        msgspec.Meta(min_length=1, max_length=MAX_EXAMPLES),
    ]
    negative: Annotated[list[Name], msgspec.Meta(max_length=MAX_EXAMPLES)] = []
    topK: TopK = 10


class MmrArgs(msgspec.Struct, forbid_unknown_fields=True):
    embedding: Embedding | None = None
    topK: TopK = 10
    fetchK: (
        Annotated[
            int,
            msgspec.Meta(ge=1, le=1000, description="candidates (default max(4 x topK, 20))"),
        ]
        | None
    ) = None
    lambda_: Annotated[
        float,
        msgspec.Meta(ge=0.0, le=1.0, description="1: relevance only; 0: novelty only"),
    ] = msgspec.field(default=0.5, name="lambda")
    text: Text | None = None


class HybridArgs(msgspec.Struct, forbid_unknown_fields=True):
    queryText: Annotated[str, msgspec.Meta(min_length=1)]
    queryEmbedding: Embedding | None = None
    textWeight: Annotated[float, msgspec.Meta(ge=0.0)] = 0.5
    vecWeight: Annotated[float, msgspec.Meta(ge=0.0)] = 0.5
    topK: TopK = 10
    centralityBoost: Annotated[
        float,
        msgspec.Meta(
            ge=0.0,
            description="score x (1 + boost x degree / max degree)",
        ),
    ] = 0.0
    text: Text | None = None


class NoArgs(msgspec.Struct, forbid_unknown_fields=True):
    pass
