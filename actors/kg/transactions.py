"""How a graph tool call reaches the store: one read or one write transaction.

A write tool's transaction runs on the StoreWriter, with the existence and
ownership checks of the whole batch inside it; its observation texts (and new
entities) are embedded before, when an embedder runs, and their vectors stored
in the same transaction, as ``remember`` does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Concatenate, ParamSpec, TypeVar

from ...supervisors.context import AppContext, CallContext
from ..embedder.embed import embed, embedder_of
from ..store.domain.documents import entity_document, memory_document
from ..store.domain.scopes import ScopePolicy
from ..store.interfaces import ReadTx, StoreTx
from ..store.interfaces.anchors import Anchor
from ..store.tooling.services import policy_of, store_of
from ..store.writer import Written
from .records import JsonObject
from .view import Scoped, View
from .writer import Vectors, Writer

T = TypeVar("T")
P = ParamSpec("P")


def view_of(policy: ScopePolicy) -> View:
    """The scopes a call under ``policy`` reads and writes (a session's repository, or
    the CLI's directory: ``store.policy``)."""
    return View(policy.select(None), policy.writable, policy.current)


async def read(
    ctx: CallContext,
    fn: Callable[Concatenate[ReadTx, Scoped, P], T],
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    """``fn(tx, scoped, *args, **kwargs)`` in one read transaction, with the calling
    session's visibility filters; the trace names it ``kg.<fn's name>``."""
    return await _read(ctx, fn.__name__, lambda tx, sc: fn(tx, sc, *args, **kwargs), False)


async def read_small(
    ctx: CallContext,
    fn: Callable[Concatenate[ReadTx, Scoped, P], T],
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    """`read` for a read of a few indexed lookups (entities by name, a search's page):
    tried on the event loop first, within a budget (`connections.ReadPool`)."""
    return await _read(ctx, fn.__name__, lambda tx, sc: fn(tx, sc, *args, **kwargs), True)


async def _read(ctx: CallContext, name: str, fn: Callable[[ReadTx, Scoped], T], inline: bool) -> T:
    store = store_of(ctx.app)
    view = view_of(await policy_of(ctx))
    result: T = await store.read(
        lambda tx: fn(tx, Scoped(tx, view)), inline=inline, name=f"kg.{name}"
    )
    return result


async def write(
    ctx: CallContext,
    name: str,
    fn: Callable[[Writer], T],
    vectors: Vectors | None = None,
    anchors: dict[str, list[Anchor]] | None = None,
) -> tuple[T, list[str]]:
    """Run ``fn`` in one write transaction under the calling session's scopes; (its
    value, the `Writer`'s warnings). ``anchors``: code anchors of the observation
    texts it adds, stored on them in the same transaction."""
    store = store_of(ctx.app)
    view = view_of(await policy_of(ctx))

    def op(tx: StoreTx) -> Written:
        w = Writer(tx, view, vectors, anchors)
        value = fn(w)
        w.flush()
        w.write_anchors()
        return Written((value, w.warnings), w.changes)

    result: tuple[T, list[str]] = await store.write(op, name=f"kg.{name}")
    return result


def with_warnings(result: JsonObject, warnings: list[str]) -> JsonObject:
    """``result`` plus ``warnings`` when there are any (absent otherwise, as in the reference server)."""
    if warnings:
        result["warnings"] = warnings
    return result


async def embed_for(
    app: AppContext, observations: Sequence[str], entities: Sequence[tuple[str, str]]
) -> Vectors | None:
    """Vectors of observation texts and entity documents, or None when embeddings are off."""
    if embedder_of(app) is None:
        return None
    obs = list(dict.fromkeys(observations))
    ents: dict[str, str] = {}
    for name, kind in entities:
        ents.setdefault(name, entity_document(name, kind or "entity"))
    texts = [memory_document(o) for o in obs]  # what `remember` would embed of each
    embedded = await embed(app, [*texts, *ents.values()], "observation")
    if embedded is None:
        return None
    vecs = embedded.vectors
    return Vectors(
        dict(zip(obs, vecs[: len(obs)], strict=True)),
        dict(zip(ents, vecs[len(obs) :], strict=True)),
    )
