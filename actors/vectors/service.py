"""The vector store: the in-memory index over ``entity_embeddings`` and the actor that owns it.

Published as `VECTORS` once the index is built. The table is the truth
(``table``): the actor builds the index from it when it starts (so after a
crash, or a restart of the StoreWriter, which restarts this actor too: the
root supervisor is rest_for_one), and keeps it current:

- a vector tool's write commits first, then calls `refresh` with the ids it
  wrote, which re-reads their rows and applies them;
- an entity deleted by another tool (``delete_entities``, ``merge_entities``)
  reaches the index through the store's change notifications: its id is
  marked dirty, and the next call (`synced`) refreshes it from the table; a
  ``reset`` (flush, import) rebuilds the whole index;
- a write by another process (another server on the same store, the CLI) is
  found by the store's change mark (`Snapshot.change_mark`, `store.coherence`):
  the next call finds the mark beyond the index's and not told by this
  process's store handle, and rebuilds the whole index. The centrality boost's
  adjacency (`graph`) is kept for one change mark: any write rebuilds it.

An hnsw graph (a table of ``[vectors] exact_below`` vectors or more, when the
actor starts or after a reset) is built in the background: the actor serves
from an exact index at once, and the graph takes over when it is built, with
the writes made meanwhile applied to it (`_build_graph`). ``vector_reindex``
builds in the foreground, as it says.

A row the index cannot hold (not ``dims`` float32 values, a value that is
not finite or beyond the index's stored type, `arrays.ValueRule`) is skipped
wherever it is read: the build logs the rows it skipped once (the
``vector_rows_skipped`` warning) and ``vector_store_stats`` and ``memtrio
doctor`` report them; no stored row can stop this actor. A later write of a
good vector to that entity takes it out of the report.

Every read of the table and change of the index happens under one lock,
so a refresh that read the table later is applied later, and the index
never goes back to an older row. Searches hold the lock too (the backends
are not thread-safe); the index work runs in a thread.

Visibility: the index holds every scope's vectors; a search widens its
candidate pool until it has ``k`` the session may see (or knows the rest
through an ``allowed`` set computed in SQL), so an entity the session cannot
see never takes a slot of the top k.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

import numpy as np
import trio

from ...supervisors import trace
from ...supervisors.context import AppContext, ServiceKey
from ...supervisors.supervisor import ChildContext
from ..kg.lookup import Ent
from ..kg.view import Scoped, View
from ..store.coherence import STALE, WAITING, CacheMark
from ..store.interfaces import ReadTx
from ..store.interfaces.vectors import Visibility
from ..store.messages import Change
from ..store.writer import STORE, Store
from ..vector_index.arrays import MAX_REPORTED, ValueRule, value_rule
from ..vector_index.index import VectorIndex, make_index
from . import table

ACTOR = "vectors"
WIDEN = 4  # each retry of a filtered search asks the index for this many times more


@dataclass
class GraphDegrees:
    """The adjacency cache of one scope selection: each entity's visible relation count."""

    degrees: Counter[int]
    edges: int


class VectorService:
    """The client handle (published as `VECTORS`) and the state of the ``vectors`` actor."""

    def __init__(self, app: AppContext) -> None:
        cfg = app.config.vectors
        self.app = app
        self.dims = cfg.dims
        self.metric = cfg.metric
        self.rule: ValueRule = value_rule(cfg.backend, cfg.metric, cfg.quantization)
        self.index: VectorIndex = self.new_index(0)
        self.other_dims = 0
        self.skipped: dict[int, str] = {}  # entity id -> why its stored vector is not indexed
        self.lock = trio.Lock()
        self._dirty: set[int] = set()
        self._reset = False
        self._graphs: dict[tuple[str, ...], GraphDegrees] = {}
        self._graphs_mark: int | None = None  # the change mark ``_graphs`` were read at
        self._mark: CacheMark | None = None  # the change mark the index is current at
        self._nursery: trio.Nursery | None = None  # where graphs are built in the background
        self._generation = 0  # each rebuild's number: a graph built for an older one is dropped
        self._pending: set[int] | None = None  # ids refreshed while a graph is being built

    @property
    def backend(self) -> str:
        """The backend of the index now (``[vectors] backend``, with ``auto`` resolved)."""
        return self.index.kind

    def new_index(self, count: int) -> VectorIndex:
        """An empty index of the configured backend for ``count`` vectors (those about to be
        loaded): ``hnsw`` (the default) is ``exact`` below ``exact_below`` vectors, where exact
        search is fast and always right; ``auto`` likewise below ``auto_threshold``."""
        cfg = self.app.config.vectors
        kind = cfg.backend
        if kind == "auto":
            kind = "hnsw" if count >= cfg.auto_threshold else "exact"
        elif kind == "hnsw" and count < cfg.exact_below:
            kind = "exact"
        return make_index(
            kind,
            cfg.dims,
            cfg.metric,
            quantization=cfg.quantization,
            connectivity=cfg.connectivity,
            expansion_add=cfg.expansion_add,
            expansion_search=cfg.expansion_search,
            nlist=cfg.ivf_nlist,
            nprobe=cfg.ivf_nprobe,
        )

    @property
    def store(self) -> Store:
        return self.app.service(STORE)

    # -- the actor -----------------------------------------------------------------

    async def serve(
        self,
        ctx: ChildContext,
        *,
        task_status: trio.TaskStatus[VectorService] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Build the index from the table, publish the handle, keep it until the
        supervisor asks this child to stop (``ctx.shutdown``) or cancels it.

        Cancellation: the handle is withdrawn and the listener removed; a
        restart builds a new index from the table.
        """
        store = self.store
        remove = store.add_listener(self.on_changes)
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                async with self.lock:
                    await self._rebuild(store, defer=True)
                self.app.publish(VECTORS, self)
                task_status.started(self)
                await ctx.shutdown.wait()  # nothing to finish: stop at once, not after the grace
                nursery.cancel_scope.cancel()  # a graph being built is dropped
        finally:
            self._nursery = None
            remove()
            self.app.withdraw(VECTORS, self)

    def on_changes(self, changes: Iterable[Change]) -> None:
        """Store listener (trio thread, right after a commit): note what the index must re-read."""
        for change in changes:
            if change.kind == "reset":
                self._reset = True
            elif change.kind == "entity" and change.deleted:
                self._dirty.add(change.id)

    async def _rebuild(self, store: Store, defer: bool = False) -> float:
        """Replace the index by one built from the whole table (caller holds the lock); seconds
        taken. ``defer``: an hnsw graph is built in the background (`_build_graph`) and an
        exact index serves meanwhile."""
        start = time.perf_counter()
        self._reset = False
        self._dirty.clear()
        self._graphs.clear()
        self._generation += 1
        self._pending = None
        dims = self.dims
        count, self.other_dims = await store.read(
            lambda tx: table.counts(tx, dims), name="vectors.count_embeddings"
        )
        index = self.new_index(count)
        if defer and index.kind == "hnsw" and self._nursery is not None:
            self._pending = set()
            self._nursery.start_soon(self._build_graph, store, index, self._generation)
            index = self.exact_index()
        skipped: dict[int, str] = {}

        def load(tx: ReadTx) -> int:
            mark = tx.snapshot.change_mark()  # first: a later write moves it on
            rows: list[tuple[int, object]] = []
            for row in table.scan(tx, dims):
                rows.append((row.entity_id, row.vec))
                if len(rows) >= table.LOAD_BATCH:
                    skipped.update(self._add(index, rows))
                    rows = []
            if rows:
                skipped.update(self._add(index, rows))
            return mark

        self._mark = CacheMark(await store.read(load, name="vectors.load_index"))
        await trio.to_thread.run_sync(index.reindex)
        self.index = index
        self.skipped = skipped
        seconds = time.perf_counter() - start
        trace.event(ACTOR, "index_built", size=len(index), backend=self.backend, seconds=seconds)
        if skipped:
            self._warn_skipped(skipped)
        return seconds

    def exact_index(self) -> VectorIndex:
        """An empty exact index of the configured dimension and metric."""
        cfg = self.app.config.vectors
        return make_index("exact", cfg.dims, cfg.metric, quantization=cfg.quantization)

    async def _build_graph(self, store: Store, graph: VectorIndex, generation: int) -> None:
        """In the background: fill ``graph`` from a snapshot of the table (in a thread), then,
        under the lock, apply the ids refreshed meanwhile and serve from it; dropped when a
        newer rebuild started (``generation``).

        Error handling: a failure is a warning; the exact index keeps serving.
        """
        start = time.perf_counter()
        dims = self.dims
        try:
            rows: list[tuple[int, object]] = await store.read(
                lambda tx: [(r.entity_id, r.vec) for r in table.scan(tx, dims)],
                name="vectors.load_graph",
            )

            def fill() -> None:
                for i in range(0, len(rows), table.LOAD_BATCH):
                    self._add(graph, rows[i : i + table.LOAD_BATCH])
                graph.reindex()

            await trio.to_thread.run_sync(fill, abandon_on_cancel=True)
        except Exception as exc:  # noqa: BLE001 - the exact index serves on
            trace.warning(ACTOR, "graph_build_failed", error=f"{type(exc).__name__}: {exc}")
            return
        async with self.lock:
            if generation != self._generation or self._pending is None:
                return
            pending, self._pending = self._pending, None
            exact, self.index = self.index, graph
            try:
                await self._refresh(store, pending)
            except BaseException:
                self.index = exact
                raise
        trace.event(
            ACTOR,
            "graph_built",
            size=len(graph),
            replayed=len(pending),
            seconds=time.perf_counter() - start,
        )

    def _add(self, index: VectorIndex, rows: Sequence[tuple[int, object]]) -> dict[int, str]:
        """Add the usable rows to ``index``; the others, with why each is not usable."""
        ids, vectors, bad = table.usable_rows(rows, self.dims, self.rule)
        if len(ids):
            index.add(ids, vectors)
        return bad

    def _warn_skipped(self, bad: dict[int, str]) -> None:
        """One warning for the rows a load skipped (the first ids, bounded)."""
        first = sorted(bad)[:MAX_REPORTED]
        trace.warning(
            ACTOR,
            "vector_rows_skipped",
            count=len(bad),
            entity_ids=first,
            reason=bad[first[0]],
            remedy="vector_upsert_embedding replaces a vector, vector_delete_embedding removes it",
        )

    def skipped_report(self) -> tuple[int, list[tuple[int, str]]]:
        """How many stored vectors of the store's dimension are not indexed, and the first
        (entity id, why) of them (at most `MAX_REPORTED`)."""
        first = sorted(self.skipped)[:MAX_REPORTED]
        return len(self.skipped), [(i, self.skipped[i]) for i in first]

    async def rebuild(self) -> float:
        """`vector_reindex`: a fresh index from the table (ivf retrains); seconds taken."""
        async with self.lock:
            return await self._rebuild(self.store)

    async def refresh(self, ids: Sequence[int]) -> None:
        """Bring these ids of the index to what the table holds now."""
        async with self.lock:
            await self._refresh(self.store, ids)

    async def _refresh(self, store: Store, ids: Iterable[int]) -> None:
        wanted = sorted(set(ids))
        if not wanted:
            return
        if self._pending is not None:  # a graph is being built: it needs these too
            self._pending.update(wanted)
        rows = await store.read(lambda tx: table.rows_of(tx, wanted), name="vectors.refresh")
        keep = [(r.entity_id, r.vec) for r in rows.values() if r.dim == self.dims]
        gone = [i for i in wanted if i not in rows or rows[i].dim != self.dims]
        bad = self._add(self.index, keep) if keep else {}
        for i in wanted:
            self.skipped.pop(i, None)
        if gone or bad:
            self.index.remove(np.asarray([*gone, *bad], dtype=np.int64))
        if bad:
            self.skipped.update(bad)
            self._warn_skipped(bad)

    async def _stale(self, store: Store) -> bool:
        """Whether another process wrote the store since the index was read, untold to
        this process (`store.coherence`)."""
        mark = self._mark
        if mark is None:
            return True
        grace = store.untold_grace
        while True:
            now = await store.read(_change_mark, inline=True, name="vectors.change_mark")
            state = mark.check(now, store.told, grace, time.monotonic())
            if state != WAITING:
                break
            # Committed, its notification on the way: wait for it (its changes reach
            # `on_changes` first), no longer than the grace.
            trace.event(ACTOR, "untold_change", note="waiting for another process's notification")
            await mark.wait_told(store.told, now, grace, time.monotonic())
        if state == STALE:
            trace.event(
                ACTOR, "external_change", note="another process wrote the store; rebuilding"
            )
        return state == STALE

    @asynccontextmanager
    async def synced(self) -> AsyncIterator[VectorIndex]:
        """The index, current with the table's committed writes (this process's deletes,
        and any other process's writes), held for one call."""
        async with self.lock:
            store = self.store
            if self._reset or await self._stale(store):
                await self._rebuild(store, defer=True)
            elif self._dirty:
                dirty, self._dirty = self._dirty, set()
                await self._refresh(store, dirty)
            yield self.index

    # -- searching -------------------------------------------------------------------

    async def search(
        self,
        view: View,
        query: np.ndarray,
        k: int,
        entity_type: str | None = None,
        exclude: Iterable[int] = (),
    ) -> list[tuple[Ent, float]]:
        """The ``k`` best entities the view sees (of ``entity_type``, not in ``exclude``)."""
        skip = set(exclude)
        async with self.synced() as index:
            size = len(index)
            fetch = min(size, k + len(skip) + max(k, 16))
            while True:
                ids, scores = await trio.to_thread.run_sync(index.search, query, fetch)
                found = await self._visible(view, ids, entity_type)
                hits = [(found[i], float(s)) for i, s in zip(ids.tolist(), scores.tolist(), strict=True)
                        if i in found and i not in skip]  # fmt: skip
                if len(hits) >= k or fetch >= size:
                    return hits[:k]
                if fetch * WIDEN < size:
                    fetch *= WIDEN
                    continue
                allowed = await self._allowed(view, entity_type, skip)
                ids, scores = await trio.to_thread.run_sync(index.search, query, k, allowed)
                found = await self._visible(view, ids, entity_type)
                return [
                    (found[i], float(s))
                    for i, s in zip(ids.tolist(), scores.tolist(), strict=True)
                    if i in found
                ][:k]

    async def _visible(
        self, view: View, ids: np.ndarray, entity_type: str | None
    ) -> dict[int, Ent]:
        wanted = [int(i) for i in ids.tolist()]
        return await self.store.read(
            lambda tx: visible(tx, view, wanted, entity_type), name="vectors.visible"
        )

    async def _allowed(self, view: View, entity_type: str | None, skip: set[int]) -> set[int]:
        dims = self.dims

        def op(tx: ReadTx) -> set[int]:
            found = tx.embeddings.embedded_entities(dims, scopes_of(tx, view), entity_type)
            return found - skip

        return await self.store.read(op, name="vectors.allowed")

    # -- the graph cache ---------------------------------------------------------------

    async def graph(self, view: View, refresh: bool = False) -> GraphDegrees:
        """The adjacency cache of the view's scope selection (built now if absent, if
        ``refresh``, or if anything was written to the store since it was built)."""
        key = tuple(view.selection)
        mark = await self.store.read(_change_mark, inline=True, name="vectors.change_mark")
        if refresh or mark != self._graphs_mark:
            self._graphs.clear()
            self._graphs_mark = mark
        cached = self._graphs.get(key)
        if cached is not None:
            return cached

        def op(tx: ReadTx) -> GraphDegrees:
            degrees: Counter[int] = Counter()
            edges = 0
            for src, tgt in tx.embeddings.relation_ends(scopes_of(tx, view)):
                degrees[src] += 1
                degrees[tgt] += 1
                edges += 1
            return GraphDegrees(degrees, edges)

        built = await self.store.read(op, name="vectors.graph_degrees")
        self._graphs[key] = built
        return built


def _change_mark(tx: ReadTx) -> int:
    return tx.snapshot.change_mark()


def scopes_of(tx: ReadTx, view: View) -> Visibility:
    """The scope ids ``view`` reads, or None when it sees every row of the store."""
    sc = Scoped(tx, view)
    return None if sc.sees_all else sc.read_ids


def visible(tx: ReadTx, view: View, ids: Sequence[int], entity_type: str | None) -> dict[int, Ent]:
    """The entities of ``ids`` the view sees (of ``entity_type`` when given), by id."""
    found = tx.embeddings.visible_entities(ids, scopes_of(tx, view), entity_type)
    return {i: Ent(e.id, e.name, e.kind, e.canonical) for i, e in found.items()}


VECTORS: ServiceKey[VectorService] = ServiceKey("vectors")
