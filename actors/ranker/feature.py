"""The ranker feature: the Ranker actor (semantic recall) after the store and the embedder.

With embeddings off no ranker runs; the memory store then ranks lexically.

The ranker's modules (numpy, igraph) are not imported while the server starts:
they load in a worker thread once they are wanted (the first client is
initialized, or a recall asks), so neither the start of the tree nor the answer
to ``initialize`` waits for them. Until the Ranker runs, `StartingRanker` is
published as `RANKER`: a recall asks for the ranker and waits for it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import trio

from ...supervisors.context import AppContext, Component, NoActors
from ...supervisors.supervisor import PERMANENT, ChildContext, ChildSpec, Mailbox
from .. import loader
from ..store.sqlite.db import db_path
from .handle import RANKER, Ranked

if TYPE_CHECKING:
    from ..store.writer import Change
    from .messages import RankerRequest
    from .service import Ranker

RANKER_SHUTDOWN = 5.0
SERVICE_MODULE = ".service"  # numpy, igraph: imported once the ranker is wanted


class _RankerFeature:
    name = "ranker"

    def setup(self, app: AppContext) -> Component:
        if not app.config.embedding.enabled:
            return NoActors()
        component = RankerComponent(app)
        app.warm_ups.append(component.starting.wanted.set)
        return component


class RankerUnavailable(RuntimeError):
    """The ranker could not load; recall falls back to lexical ranking (like `RankerError`)."""


class StartingRanker:
    """The `RANKER` handle until the Ranker runs: a recall wants it loaded and waits for it."""

    def __init__(self) -> None:
        self.wanted = trio.Event()  # set: load the ranker's modules now
        self.done = trio.Event()  # set: ``ranker`` is built, or ``error`` says why not
        self.ranker: Ranker | None = None
        self.error = ""

    async def recall(
        self,
        query: str,
        scope_ids: Sequence[int] | None = None,
        memory_type: str | None = None,
        limit: int = 10,
        *,
        use_graph: bool | None = None,
        use_lexical: bool | None = None,
        explain: bool = False,
    ) -> Ranked:
        """`Ranker.recall`, once the ranker is built (its requests queue until it serves).

        Error handling: raises `RankerUnavailable` when it could not be built; the
        caller then ranks lexically.
        """
        ranker = await self.load()
        return await ranker.recall(
            query,
            scope_ids,
            memory_type,
            limit,
            use_graph=use_graph,
            use_lexical=use_lexical,
            explain=explain,
        )

    async def load(self) -> Ranker:
        """The Ranker, built now if it was not wanted yet (its actor serves it soon after).

        Error handling: raises `RankerUnavailable` when it could not be built.
        """
        self.wanted.set()
        await self.done.wait()
        if self.ranker is None:
            raise RankerUnavailable(f"the ranker is not running ({self.error}); lexical ranking")
        return self.ranker

    def on_changes(self, changes: Iterable[Change]) -> None:
        """Store changes before the ranker runs need nothing: its first load reads them."""
        if self.ranker is not None:
            self.ranker.on_changes(changes)

    def stats(self) -> dict[str, object]:
        if self.ranker is not None:
            return self.ranker.stats()
        return {"loaded": False, "pending": 0}


class RankerComponent:
    """Owns the Ranker (its cache and mailbox); its one actor serves recall."""

    def __init__(self, app: AppContext) -> None:
        self.app = app
        self.mailbox: Mailbox[RankerRequest] = Mailbox("ranker", size=math.inf)
        self.starting = StartingRanker()

    async def _build(self, ctx: ChildContext, task_status: trio.TaskStatus[Any]) -> Ranker | None:
        """Publish `starting`, report started, and build the Ranker once it is wanted
        (None: the tree stopped first). The Ranker publishes itself when it serves."""
        starting, app = self.starting, self.app
        if starting.done.is_set():  # an earlier incarnation failed to build it: try again
            starting.done, starting.error = trio.Event(), ""
        app.publish(RANKER, starting)
        task_status.started(None)
        try:
            with ctx.cancel_on_shutdown(trio.CancelScope()):
                await starting.wanted.wait()
            if ctx.shutdown.is_set():
                starting.error = "the server stopped before the ranker loaded"
                return None
            service = await trio.to_thread.run_sync(
                loader.import_module, SERVICE_MODULE, __package__
            )
            starting.ranker = service.Ranker(
                app, db_path(app.home, app.config.store.file), self.mailbox
            )
            return starting.ranker
        except BaseException as exc:
            starting.error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            if starting.ranker is None:
                app.withdraw(RANKER, starting)
            starting.done.set()

    def children(self) -> list[ChildSpec]:
        async def start(
            ctx: ChildContext, *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED
        ) -> None:
            ranker = self.starting.ranker
            if ranker is None:
                ranker = await self._build(ctx, task_status)
                if ranker is None:
                    return
                task_status = trio.TASK_STATUS_IGNORED
            await ranker.serve(ctx, task_status=task_status)

        return [
            ChildSpec(
                "ranker",
                start,
                restart=PERMANENT,
                shutdown=RANKER_SHUTDOWN,
                mailboxes=[self.mailbox],
                why="its cache is rebuilt from the store on restart, so restarting it is always safe",
            )
        ]


FEATURE = _RankerFeature()
