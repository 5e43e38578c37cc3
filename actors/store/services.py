"""What the store's tools use: the store handle, the embedder, scope rules, argument checks.

Embeddings: when an ``embedder`` service runs, a tool embeds its documents
*before* its write (`embed`) and stores the vectors in the same transaction;
an embedding failure fails the call with nothing stored. Without an embedder
no vectors are stored.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import msgspec
import trio

from ...protocol.errors import BadArgument, DomainError, Unavailable
from ...protocol.plural import plural
from ...supervisors import trace
from ...supervisors.context import AppContext, CallContext
from ..embedder.handle import EMBEDDER, Embedder
from .scopes import ScopePolicy
from .vectors import Vec, vecs_of
from .writer import ACTOR, STORE, Store


async def scoped(
    fn: Callable[[list[str] | None], list[str]], scopes: list[str] | None
) -> list[str]:
    """Apply a scope rule; explicit ``repo:`` paths may run git, so off the trio thread."""
    if not scopes:
        return fn(scopes)
    return await trio.to_thread.run_sync(fn, scopes)


def store_of(app: AppContext) -> Store:
    return app.service(STORE)


async def policy_of(ctx: CallContext) -> ScopePolicy:
    """The scope rules of the calling session's repository (the CLI: its own directory's)."""
    store = store_of(ctx.app)
    session = ctx.session
    if session is None:
        return store.policy
    return await store.policies.of(
        session.root, session.root_source, getattr(session, "grant", None)
    )


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


def clean_text(value: str, field: str) -> str:
    if not value.strip():
        raise BadArgument(f"`{field}` must not be empty or only whitespace")
    return value


def clean_type(value: str) -> str:
    text = value.strip()
    if not text:
        raise BadArgument("`memory_type` must not be empty (for example `observation`, `decision`)")
    return text


def check_finite(value: float | None) -> None:
    if value is not None and not math.isfinite(value):
        raise BadArgument("`importance` must be a number between 0.0 and 1.0")
