"""The ranker feature: the Ranker actor (semantic recall) after the store and the embedder.

With embeddings off no ranker runs; the memory store then ranks lexically.
"""

from __future__ import annotations

from typing import Any

from ...supervisors.app import AppContext
from ...supervisors.supervisor import PERMANENT, ChildSpec
from .service import Ranker

RANKER_SHUTDOWN = 5.0


class _RankerFeature:
    name = "ranker"

    def setup(self, app: AppContext) -> None:
        return None

    def children(self, app: AppContext) -> list[ChildSpec]:
        if not app.config.embedding.enabled:
            return []
        from ..store.db import db_path

        ranker = Ranker(app, db_path(app.home))

        async def start(ctx: Any, *, task_status: Any) -> None:
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
