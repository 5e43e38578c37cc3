"""The embedder feature: the ``memtrio://embedding`` resource, the ``initialize``
instruction naming the model, and the embedder pool under its own supervisor.

With ``[embedding] enabled = false`` (``MEMTRIO_EMBEDDINGS=off``) no embedder
service is published and the resource reports nulls.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ...protocol.plural import plural
from ...supervisors import trace
from ...supervisors.context import AppContext, Component, NoActors, Resource
from ...supervisors.supervisor import ChildSpec, supervisor_child
from .handle import EMBEDDER
from .model import ModelError, resolve_spec
from .pool import EmbedderPool

POOL_SHUTDOWN = 10.0  # seconds the pool supervisor gets to stop its workers

_encoder = msgspec.json.Encoder()


# The reference's settings for downloading its model, which memtrio never does.
DOWNLOAD_SETTINGS = ("revision", "cache_dir")


def make_pool(app: AppContext) -> EmbedderPool:
    """The pool for ``app.config.embedding`` (a model that cannot be found gives a pool whose
    calls fail clearly, and a ``model_load_failed`` event in the trace log, as a load does)."""
    cfg = app.config.embedding
    try:
        spec = resolve_spec(cfg.model, cfg.max_tokens)
    except ModelError as exc:
        trace.record(
            "embedder", "model_load_failed", level="error", model=cfg.model, error=str(exc)
        )
        return EmbedderPool(cfg, None, str(exc))
    return EmbedderPool(cfg, spec)


def warn_download_settings(app: AppContext) -> None:
    """One warning when the reference's ``[embedding] revision`` / ``cache_dir`` are set
    (``MEMTRIO_EMBEDDING_REVISION``, ``MEMTRIO_EMBEDDING_CACHE_DIR``): they are accepted,
    and change nothing."""
    cfg = app.config.embedding
    given = [key for key in DOWNLOAD_SETTINGS if getattr(cfg, key)]
    if given:
        trace.warning(
            "embedder",
            "setting_ignored",
            settings=",".join(f"[embedding] {key}" for key in given),
            reason="memtrio's model ships in the package (or is the directory [embedding] model "
            "names) and nothing is downloaded, so there is no revision to pick or cache to keep",
        )


async def _read_resource(app: AppContext) -> str:
    pool = app.find(EMBEDDER)
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

    def setup(self, app: AppContext) -> Component:
        app.add_resource(
            Resource(
                uri="memtrio://embedding",
                name="embedding",
                description="The active embedding model: model id, revision (hash of the model file), dimensions and max_tokens (null when embeddings are off).",
                read=_read_resource,
            )
        )
        warn_download_settings(app)
        if not app.config.embedding.enabled:
            app.instructions.append(
                "Embeddings are off ([embedding] enabled = false or MEMTRIO_EMBEDDINGS=off): recall ranks memories lexically (SQLite FTS5) only."
            )
            return NoActors()
        pool = make_pool(app)
        if pool.spec is None:
            app.instructions.append(
                f"The embedding model cannot be used ({pool.spec_error}); remember fails until it is fixed, and recall falls back to lexical ranking."
            )
        else:
            app.instructions.append(
                f"Embeddings: local model {pool.model} ({plural(pool.dim, 'dimension')}, "
                f"long memories embedded as windows of {pool.chunk_tokens} tokens, {when_loaded(app)}). "
                "recall ranks memories by meaning "
                "(embeddings + Personalized PageRank over linked entities), not just shared words; "
                "pass use_embeddings=false for lexical ranking."
            )
            app.warm_ups.append(pool.warm)
        return EmbedderComponent(app, pool)


def when_loaded(app: AppContext) -> str:
    """When the model loads, as the ``initialize`` instructions say it."""
    if app.warm_on_initialize:
        return "loaded in the background once a client is initialized"
    return "loaded on the first embedding"


class EmbedderComponent:
    """Owns the embedder pool; its actor is the pool's supervisor, which publishes the pool."""

    def __init__(self, app: AppContext, pool: EmbedderPool) -> None:
        self.app = app
        self.pool = pool

    def children(self) -> list[ChildSpec]:
        app, pool = self.app, self.pool
        return [
            supervisor_child(
                pool.supervisor,
                "embedder",
                shutdown=POOL_SHUTDOWN,
                mailboxes=[pool.mailbox],
                on_ready=lambda: app.publish(EMBEDDER, pool),
                on_stop=lambda: app.withdraw(EMBEDDER, pool),
                why="the pool supervisor restarts crashed workers; it only fails if they crash too often",
            )
        ]


FEATURE = _EmbedderFeature()
