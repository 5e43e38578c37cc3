"""The embedder feature: the ``memtrio://embedding`` resource, the ``initialize``
instruction naming the model, and the embedder pool under its own supervisor.

With ``[embedding] enabled = false`` (``MEMTRIO_EMBEDDINGS=off``) no embedder
service is published and the resource reports nulls.
"""

from __future__ import annotations

from typing import Any

import msgspec
import trio

from ...supervisors.app import AppContext, Resource
from ...supervisors.supervisor import PERMANENT, ChildContext, ChildSpec
from .model import ModelError, resolve_spec
from .pool import EmbedderPool

POOL_SHUTDOWN = 10.0  # seconds the pool supervisor gets to stop its workers

_encoder = msgspec.json.Encoder()


def make_pool(app: AppContext) -> EmbedderPool:
    """The pool for ``app.config.embedding`` (a model that cannot be found gives a pool whose calls fail clearly)."""
    cfg = app.config.embedding
    try:
        spec = resolve_spec(cfg.model, cfg.max_tokens)
    except ModelError as exc:
        return EmbedderPool(cfg, None, str(exc))
    return EmbedderPool(cfg, spec)


async def _read_resource(app: AppContext) -> str:
    pool: EmbedderPool | None = app.services.get("embedder")
    if not app.config.embedding.enabled or pool is None:
        body: dict[str, Any] = {
            "enabled": False,
            "model": None,
            "revision": None,
            "dimensions": None,
            "max_tokens": None,
            "chunk_tokens": None,
            "max_chunks": None,
        }
    else:
        body = {"enabled": True, **pool.describe()}
    return _encoder.encode(body).decode()


class _EmbedderFeature:
    name = "embedder"

    def __init__(self) -> None:
        self._pools: dict[int, EmbedderPool | None] = {}  # per AppContext (tests run several)

    def setup(self, app: AppContext) -> None:
        app.add_resource(
            Resource(
                uri="memtrio://embedding",
                name="embedding",
                description="The active embedding model: model id, revision (hash of the model file), dimensions and max_tokens (null when embeddings are off).",
                read=_read_resource,
            )
        )
        if not app.config.embedding.enabled:
            app.instructions.append(
                "Embeddings are off ([embedding] enabled = false or MEMTRIO_EMBEDDINGS=off): recall ranks memories lexically (SQLite FTS5) only."
            )
            self._pools[id(app)] = None
            return
        pool = make_pool(app)
        self._pools[id(app)] = pool
        if pool.spec is None:
            app.instructions.append(
                f"The embedding model cannot be used ({pool.spec_error}); remember fails until it is fixed, and recall falls back to lexical ranking."
            )
        else:
            app.instructions.append(
                f"Embeddings: local model {pool.model} (revision {pool.revision}, {pool.dim} dimensions, "
                f"long memories embedded as windows of {pool.chunk_tokens} tokens, loaded on first use). "
                "recall ranks memories by meaning "
                "(embeddings + Personalized PageRank over linked entities), not just shared words; "
                "pass use_embeddings=false for lexical ranking."
            )

    def children(self, app: AppContext) -> list[ChildSpec]:
        pool = self._pools.pop(id(app), None)
        if pool is None:
            return []

        async def start(ctx: ChildContext, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
            sup = pool.supervisor()
            async with trio.open_nursery() as nursery:
                await nursery.start(sup.run)
                app.services["embedder"] = pool
                task_status.started(sup)
                try:
                    await ctx.shutdown.wait()
                finally:
                    if app.services.get("embedder") is pool:
                        del app.services["embedder"]
                    with trio.CancelScope(shield=True):
                        await sup.stop()

        return [
            ChildSpec(
                "embedder",
                start,
                restart=PERMANENT,
                shutdown=POOL_SHUTDOWN,
                mailboxes=[pool.mailbox],
                why="the pool supervisor restarts crashed workers; it only fails if they crash too often",
            )
        ]


FEATURE = _EmbedderFeature()
