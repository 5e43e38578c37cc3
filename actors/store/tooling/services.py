"""What the store's tools use: the store handle, the embedder, scope rules, argument checks.

Embeddings: when an ``embedder`` service runs, a tool embeds its documents
*before* its write (`embed`) and stores the vectors in the same transaction;
an embedding failure fails the call with nothing stored. Without an embedder
no vectors are stored.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import trio

from ....protocol.errors import BadArgument
from ....supervisors.context import AppContext, CallContext
from ..domain.scopes import ScopePolicy
from ..writer import STORE, Store


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
