"""The ranker feature: the Ranker actor (semantic recall) after the store and the embedder.

With embeddings off no ranker runs; the memory store then ranks lexically.
"""

from __future__ import annotations

import trio

from ...supervisors.context import AppContext, Component, NoActors
from ...supervisors.supervisor import PERMANENT, ChildContext, ChildSpec
from ..store.db import db_path
from .service import Ranker

RANKER_SHUTDOWN = 5.0


class _RankerFeature:
    name = "ranker"

    def setup(self, app: AppContext) -> Component:
        if not app.config.embedding.enabled:
            return NoActors()
        return RankerComponent(Ranker(app, db_path(app.home, app.config.store.file)))


class RankerComponent:
    """Owns the Ranker (its cache and mailbox); its one actor serves recall."""

    def __init__(self, ranker: Ranker) -> None:
        self.ranker = ranker

    def children(self) -> list[ChildSpec]:
        ranker = self.ranker

        async def start(
            ctx: ChildContext, *, task_status: trio.TaskStatus[Ranker] = trio.TASK_STATUS_IGNORED
        ) -> None:
            await ranker.serve(ctx, task_status=task_status)

        return [
            ChildSpec(
                "ranker",
                start,
                restart=PERMANENT,
                shutdown=RANKER_SHUTDOWN,
                mailboxes=[ranker.mailbox],
                why="its cache is rebuilt from the store on restart, so restarting it is always safe",
            )
        ]


FEATURE = _RankerFeature()
