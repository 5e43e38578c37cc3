"""The vector feature: the twelve vector tools and the actor owning their index.

Off unless ``[vectors] enabled`` (``--vectors``): then no vector tool is
listed or served and numpy is not loaded for it; the store file is the same
either way (the ``entity_embeddings`` table is simply not read).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from ...protocol.plural import plural
from ...supervisors.context import AppContext, Component, NoActors
from ...supervisors.supervisor import PERMANENT, ChildContext, ChildSpec

if TYPE_CHECKING:
    from .service import VectorService

VECTORS_SHUTDOWN = 5.0

INSTRUCTIONS = (
    "memtrio vectors: attach your own entity embeddings (vector_upsert_embedding, vector_batch_upsert; "
    "{dims}) and search them (vector_search_entities, hybrid_search, vector_mmr_search, ...) by the "
    "[vectors] metric, among the entities this session sees. A search may pass `text` instead of a vector: "
    "the local model embeds it (only when the store's dimension is the model's, 384)."
)


class _VectorsFeature:
    name = "vectors"

    def setup(self, app: AppContext) -> Component:
        if not app.config.vectors.enabled:
            return NoActors()
        from .service import VectorService  # numpy and the index backends: only with --vectors
        from .tools import TOOLS

        app.add_tools(TOOLS)
        if not any(app.registry.get(t.name) is not None for t in TOOLS):
            return NoActors()  # `--tools` left the group out: nothing would use the index
        app.instructions.append(
            INSTRUCTIONS.format(dims=plural(app.config.vectors.dims, "dimension"))
        )
        return VectorsComponent(VectorService(app))


class VectorsComponent:
    """Owns the vector service; its one actor builds and keeps the index."""

    def __init__(self, service: VectorService) -> None:
        self.service = service

    def children(self) -> list[ChildSpec]:
        service = self.service

        async def start(
            ctx: ChildContext,
            *,
            task_status: trio.TaskStatus[VectorService] = trio.TASK_STATUS_IGNORED,
        ) -> None:
            await service.serve(ctx, task_status=task_status)

        return [
            ChildSpec(
                "vectors",
                start,
                restart=PERMANENT,
                shutdown=VECTORS_SHUTDOWN,
                why="the index is memory only, rebuilt from entity_embeddings on every start, so a restart "
                "is always safe; after the store, whose restart restarts it (rest_for_one)",
            )
        ]


FEATURE = _VectorsFeature()
