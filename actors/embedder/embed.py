"""Embedding texts for a write: the embedder service asked from a tool handler.

`embed` turns texts into the `Vec` a store write takes (one window per model-sized piece of
a long text), with warnings for what no window covers; `embedder_of` is the service, or None
when embeddings are off.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from ...protocol.errors import DomainError, Unavailable
from ...protocol.plural import plural
from ...supervisors import trace
from ...supervisors.context import AppContext
from ..store.domain.embeddings import Vec, vecs_of
from ..store.writer import ACTOR
from .handle import EMBEDDER, Embedder


def embedder_of(app: AppContext) -> Embedder | None:
    if not app.config.embedding.enabled:
        return None
    return app.find(EMBEDDER)


class Embedded(msgspec.Struct):
    vectors: list[Vec]
    warnings: list[str]


async def embed(app: AppContext, texts: Sequence[str], what: str) -> Embedded | None:
    """Embed ``texts`` with the embedder service, or None when embeddings are off.

    A text longer than the model's token limit is embedded as up to
    ``[embedding] max_chunks`` overlapping windows (its `Vec` holds them
    all); only content beyond those windows is cut, and that is reported in
    the warnings.

    Error handling: an embedder failure raises `Unavailable` (the caller has
    stored nothing yet).
    """
    embedder = embedder_of(app)
    if embedder is None or not texts:
        return None
    max_chunks = app.config.embedding.max_chunks
    try:
        result = await embedder.embed(list(texts), max_chunks=max_chunks)
    except DomainError:
        raise
    except Exception as exc:  # noqa: BLE001 - any embedder failure refuses the write
        trace.warning(ACTOR, "embed_failed", what=what, error=f"{type(exc).__name__}: {exc}")
        raise Unavailable(
            f"embedding failed ({type(exc).__name__}: {exc}); nothing was stored, try again"
        ) from exc
    vectors = vecs_of(result)
    tokens = getattr(embedder, "chunk_tokens", None)
    windows = plural(max_chunks, "window")
    limit = f"{windows} of {plural(tokens, 'token')}" if tokens else windows
    warnings = [
        f"{what} text {i + 1} was truncated for embedding: it is longer than the {limit} "
        "the embedding covers, and the rest is not embedded"
        if len(texts) > 1
        else f"{what} text was truncated for embedding: it is longer than the {limit} "
        "the embedding covers, and the rest is not embedded"
        for i, cut in enumerate(result.truncated)
        if cut
    ]
    if warnings:
        trace.warning(ACTOR, "embed_truncated", what=what, count=len(warnings))
    return Embedded(vectors, warnings)
