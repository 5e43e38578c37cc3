"""The Ranker actor and its client handle, published as `handle.RANKER`::

    ranked = await ranker.recall(query, scope_ids, memory_type, limit)
    ranked            # [(memory id, score), ...] best first
    ranked.warnings   # e.g. the query was cut to the model's token limit

The client embeds the query (on the embedder pool, concurrently with other
callers), then hands the ranking to the actor, which owns the read
connection and the `RecallCache` and serves one request at a time (the cache
is never touched concurrently; the CPU work runs in a thread).

The cache is loaded in the background when the actor starts (a server that
never recalls pays nothing but that thread), and kept current from the
store's change notifications (``store.add_listener``). Writes by another
process are noticed by the store's change mark (`Snapshot.change_mark`, read in
the transaction of each recall): a mark beyond the cache's and not told by the
store handle (`store.coherence`) triggers a full reload.

Memories (and entities, relations) in the selection that have no vector of
the active model (written with embeddings off, or under another model) are
embedded lazily, at most `BACKFILL_LIMIT` per kind and about `BACKFILL_CHARS`
characters per recall (with every window of a long text), and stored through
the store like any write.

Error handling: anything that stops semantic ranking (the model cannot load
or embed, the cache cannot load) raises `RankerError` after a warning on
stderr and in the log; the memory store then falls back to lexical ranking.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import trio

from ...protocol.errors import DomainError
from ...supervisors import faults, trace
from ...supervisors.config import Config
from ...supervisors.context import AppContext
from ...supervisors.supervisor import ChildContext, Mailbox
from ..embedder.documents import read_documents, vector_writer
from ..embedder.handle import EMBEDDER, EmbeddingError, EmbedResult
from ..embedder.unembedded import BACKFILL_LIMIT, unembedded_warning
from ..store import backends, connections
from ..store.coherence import STALE, WAITING, CacheMark
from ..store.interfaces import ReadTx
from ..store.interfaces.errors import StoreError
from ..store.reader import Reader
from ..store.writer import STORE, Change
from . import rank as rank_mod
from . import rerank
from .graph import KINDS, RecallCache, stored_kind
from .handle import RANKER, Ranked
from .item_index import DeferredBuild, IndexChoice
from .messages import RankerRequest, Recall

ACTOR = "ranker"
# BACKFILL_LIMIT (embedder.unembedded): per kind, items without a current vector embedded
# per recall (bounds its latency).
# Characters of text embedded by one recall's lazy re-embedding (about 64 windows of
# 256 tokens): a few long memories may fill it, short ones stop at BACKFILL_LIMIT.
BACKFILL_CHARS = 64_000
RELOAD_THRESHOLD = 20_000  # pending changes beyond which a full reload is cheaper


INDEX_DIR = "vector-index"  # in the home: saved hnsw graphs (actors.ranker.item_index)


def store_reader(config: Config, path: Path) -> Reader:
    """The ranker's own read connection to the store of ``config`` (SQLite file ``path``)."""
    store = config.store
    return Reader(
        backends.load(store.url, path),
        store.busy_timeout_ms,
        connections.Tuning(store.cache_size_mb, store.mmap_size_mb),
    )


def index_choice(config: Config) -> IndexChoice:
    """The ``[vectors]`` backend settings the cache's indexes are built with."""
    v = config.vectors
    return IndexChoice(
        backend=v.backend,
        exact_below=v.exact_below,
        auto_threshold=v.auto_threshold,
        quantization=v.quantization,
        connectivity=v.connectivity,
        expansion_add=v.expansion_add,
        expansion_search=v.expansion_search,
        ivf_nlist=v.ivf_nlist,
        ivf_nprobe=v.ivf_nprobe,
    )


class RankerError(RuntimeError):
    """Semantic recall is not possible right now; fall back to lexical ranking.

    Deliberately not a `DomainError`: the caller answers lexically instead of failing.
    """


class Ranker:
    """The client handle (published as `RANKER`) and the actor's state."""

    def __init__(
        self, app: AppContext, path: Path, mailbox: Mailbox[RankerRequest] | None = None
    ) -> None:
        self.app = app
        self.path = path
        self.mailbox = mailbox if mailbox is not None else Mailbox("ranker", size=math.inf)
        self._pending: list[Change] = []
        self._cache: RecallCache | None = None
        self._reader: Reader | None = None  # the actor's own read connection
        self._nursery: trio.Nursery | None = None  # the running incarnation's (background builds)
        self._builds: list[DeferredBuild] = []  # hnsw graphs being built for the current cache
        # The store's change mark the cache is current at (`store.coherence`).
        self._mark: CacheMark | None = None
        self._load_error: str | None = None
        self._loaded = trio.Event()
        self._remove_listener: Callable[[], None] | None = None

    # -- the client call -------------------------------------------------------

    def params(self, **overrides: Any) -> rank_mod.Params:
        r = self.app.config.retrieval
        base = rank_mod.Params(
            seed_top_k=r.seed_top_k,
            seed_temperature=r.seed_temperature,
            memory_seed_weight=r.memory_seed_weight,
            entity_anchor_weight=r.entity_anchor_weight,
            damping=r.damping,
            use_graph=r.graph,
            use_lexical=r.lexical_seeds,
            lexical_share=r.lexical_share,
            mmr_lambda=r.mmr_lambda,
            use_dense=r.dense_seeds,
            neighbour_weight=r.neighbour_weight,
            neighbour_window=r.neighbour_window,
            term_anchor_weight=r.term_anchor_weight,
            term_max_share=r.term_max_share,
            date_weight=r.date_weight,
            rerank=r.rerank,
            position_penalty=r.position_penalty,
            list_penalty=r.list_penalty,
            list_window=r.list_window,
            use_topic=r.topic_query,
        )
        return replace(base, **overrides) if overrides else base

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
        """Rank memories for ``query`` among ``scope_ids`` (scope row ids; None = all).

        Error handling: raises `RankerError` (after a stderr warning) when
        semantic ranking is impossible; the caller falls back to lexical.
        """
        embedder = self.app.find(EMBEDDER)
        if embedder is None:
            raise RankerError(
                "embeddings are off or the embedder is not running; use lexical recall"
            )
        params = self.params(
            **{
                k: v
                for k, v in (("use_graph", use_graph), ("use_lexical", use_lexical))
                if v is not None
            }
        )
        store = self.app.find(STORE)
        lexical: list[tuple[int, float]] | None = None
        failure: EmbeddingError | None = None
        result: EmbedResult | None = None

        topic = rerank.topic_query(query) if params.reranked and params.use_topic else None

        async def embed_query() -> None:
            nonlocal result, failure
            try:  # with the query without its names, in the same batch
                result = await embedder.embed([query] + ([topic] if topic else []), query=True)
            except EmbeddingError as exc:
                failure = exc

        if params.use_lexical and store is not None:
            # The FTS5 query does not need the vector: run both at once.
            async def fetch_lexical() -> None:
                nonlocal lexical
                try:
                    lexical = await store.read(
                        lambda tx: rank_mod.fts_seeds(tx.fulltext, query),
                        name="ranker.lexical_seeds",
                    )
                except (DomainError, StoreError):
                    lexical = None  # the actor queries its own connection instead

            async with trio.open_nursery() as nursery:
                nursery.start_soon(fetch_lexical)
                await embed_query()
        else:
            await embed_query()
        if failure is not None:
            trace.warning(ACTOR, "semantic_recall_failed", error=str(failure), fallback="lexical")
            raise RankerError(
                f"semantic recall failed, falling back to lexical ranking: {failure}"
            ) from failure
        assert result is not None  # embed_query set it, or failure
        warnings = []
        if result.truncated and result.truncated[0]:
            warnings.append(
                f"the query was truncated to {embedder.max_tokens} tokens for embedding"
            )
        request = Recall(
            trace=trace.current.get(),
            query=query,
            qvec=result.vectors[0],
            tvec=result.vectors[1] if topic else None,
            scopes=tuple(scope_ids) if scope_ids is not None else None,
            memory_type=memory_type,
            limit=limit,
            params=params,
            lexical=lexical,
            explain=explain,
        )
        ranked, reasons, missing = await self.mailbox.call(request)
        line = unembedded_warning(missing)
        if line is not None:
            warnings.append(line)
        return Ranked(ranked, warnings, reasons)

    # -- change notifications ----------------------------------------------------

    def on_changes(self, changes: Iterable[Change]) -> None:
        """The store's listener: called in the trio thread after each commit; cheap."""
        self._pending.extend(changes)

    def stats(self) -> dict[str, object]:
        cache = self._cache
        return {
            "loaded": cache is not None,
            "pending": len(self._pending),
            **(cache.stats() if cache else {}),
        }

    # -- the actor ---------------------------------------------------------------

    async def serve(
        self, ctx: ChildContext, *, task_status: trio.TaskStatus[Ranker] = trio.TASK_STATUS_IGNORED
    ) -> None:
        store = self.app.find(STORE)
        self._pending.clear()
        self._loaded = trio.Event()
        self._cache = None
        if store is not None:
            self._remove_listener = store.add_listener(self.on_changes)
        try:
            self._reader = await trio.to_thread.run_sync(lambda: self._new_reader().open())
            self.app.publish(RANKER, self)
            task_status.started(self)
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._initial_load)

                ctx.cancel_on_shutdown(nursery.cancel_scope)
                request: RankerRequest
                async for request in self.mailbox.receive_channel:
                    match request:
                        case Recall():
                            await self._answer_recall(ctx, request)
        finally:
            self._nursery = None
            self._cancel_builds()
            self.app.withdraw(RANKER, self)
            if self._remove_listener is not None:
                self._remove_listener()
                self._remove_listener = None
            reader, self._reader = self._reader, None
            if reader is not None:
                reader.close()

    def _new_reader(self) -> Reader:
        return store_reader(self.app.config, self.path)

    def _model(self) -> tuple[str, str, int] | None:
        embedder = self.app.find(EMBEDDER)
        if embedder is None or not embedder.revision:
            return None
        return embedder.model, embedder.revision, embedder.dim

    def _load_sync(self, model: tuple[str, str, int]) -> RecallCache:
        assert self._reader is not None

        def load(tx: ReadTx) -> tuple[RecallCache, CacheMark]:
            mark = CacheMark(tx.snapshot.change_mark())  # first: a later write moves it on
            cache = RecallCache(
                *model,
                index_choice(self.app.config),
                self.path.parent / INDEX_DIR,
                terms=self.app.config.retrieval.terms,
                dates=self.app.config.retrieval.dates,
                defer_builds=True,
                # A shared store (PostgreSQL): the graph is read around the seeds at each
                # recall (`sql_graph`).
                stored_edges=tx.snapshot.keeps_graph(),
            )
            cache.load(tx.snapshot)
            return cache, mark

        started = time.perf_counter()
        with trace.span(ACTOR, "read", op="ranker.load_cache"):
            cache, self._mark = self._reader.read(load)
        trace.event(
            ACTOR,
            "cache_loaded",
            ms=round((time.perf_counter() - started) * 1000, 1),
            **cache.stats(),
        )
        return cache

    async def _initial_load(self) -> None:
        model = self._model()
        if model is None:
            self._loaded.set()
            return
        try:
            self._pending.clear()
            self._cache = await trio.to_thread.run_sync(self._load_sync, model)
            self._start_builds(self._cache)
            self._load_error = None
        except (StoreError, ValueError) as exc:
            self._load_error = f"{type(exc).__name__}: {exc}"
            trace.error(
                ACTOR,
                "cache_load_failed",
                error=self._load_error,
                exc=trace.format_traceback(exc),
            )
        self._loaded.set()

    def _sync(self, cache: RecallCache, pending: list[Change]) -> tuple[RecallCache, int | None]:
        """In a thread: apply ``pending`` changes; reload on a reset or on another process's
        writes. With the cache, the store's mark when another process's write is committed
        and its notification not yet here (`WAITING`: wait for it, `CacheMark.wait_told`)."""
        assert self._reader is not None
        for index in cache.index.values():
            index.adopt_build()  # a graph built in the background takes over
        store = self.app.find(STORE)
        told = store.told if store is not None else None
        grace = store.untold_grace if store is not None else 0.0

        wait: int | None = None

        def sync(tx: ReadTx) -> bool:
            """Apply ``pending``; whether a full reload is needed instead."""
            nonlocal wait
            snap = tx.snapshot
            reload = any(c.kind == "reset" for c in pending) or len(pending) > RELOAD_THRESHOLD
            mark = self._mark
            now = snap.change_mark()
            state = STALE if mark is None else mark.check(now, told, grace, time.monotonic())
            if state == STALE and not reload:
                reload = True
                trace.event(
                    ACTOR, "external_change", note="another process wrote the store; reloading"
                )
            elif state == WAITING and mark is not None:
                trace.event(
                    ACTOR, "untold_change", note="waiting for another process's notification"
                )
                wait = now
            if not reload and pending:
                cache.apply(snap, pending)
            return reload

        with trace.span(ACTOR, "read", op="ranker.sync_cache", changes=len(pending)):
            reload = self._reader.read(sync)
        if reload:
            return self._load_sync((cache.model, cache.revision, cache.dim)), None
        return cache, wait

    async def _current_cache(self) -> RecallCache:
        await self._loaded.wait()
        model = self._model()
        if model is None:
            raise RankerError("the embedding model is unavailable; use lexical recall")
        cache = self._cache
        if cache is None or (cache.model, cache.revision, cache.dim) != model:
            try:
                self._pending.clear()
                cache = await trio.to_thread.run_sync(self._load_sync, model)
            except (StoreError, ValueError) as exc:
                trace.warning(
                    ACTOR,
                    "semantic_recall_failed",
                    error=f"cache load: {exc}",
                    fallback="lexical",
                    exc=trace.format_traceback(exc),
                )
                raise RankerError(
                    f"the recall index could not be loaded ({exc}); falling back to lexical ranking"
                ) from exc
            self._cache = cache
            self._start_builds(cache)
            return cache
        pending, self._pending = self._pending, []
        synced, wait = await trio.to_thread.run_sync(self._sync, cache, pending)
        store = self.app.find(STORE)
        while wait is not None and store is not None and self._mark is not None:
            # Another process committed a write whose notification is on its way: the
            # recall waits for it (no longer than the grace) rather than answer without it.
            await self._mark.wait_told(store.told, wait, store.untold_grace, time.monotonic())
            pending, self._pending = self._pending, []
            synced, wait = await trio.to_thread.run_sync(self._sync, synced, pending)
        self._start_builds(synced)  # a replaced cache's, or an index grown past its threshold
        self._cache = synced
        return synced

    def _start_builds(self, cache: RecallCache) -> None:
        """Build in the background the hnsw graphs ``cache`` left to us (exact meanwhile),
        each once; the builds of the caches it replaces stop."""
        self._cancel_builds(keep=cache)
        for kind, index in cache.index.items():
            build = index.build
            if build is not None and build not in self._builds and self._nursery is not None:
                self._builds.append(build)
                self._nursery.start_soon(self._build_in_background, cache, kind)

    def _cancel_builds(self, keep: RecallCache | None = None) -> None:
        for build in list(self._builds):
            if keep is None or all(index.build is not build for index in keep.index.values()):
                build.cancel()
                self._builds.remove(build)

    async def _build_in_background(self, cache: RecallCache, kind: str) -> None:
        """One kind's graph, from a snapshot of the table read on a connection of its own.

        Error handling: a failure is a warning (recall stays exact). Cancellation: the
        thread is abandoned (it stops at the end of its build) when the ranker stops.
        """
        build = cache.index[kind].build
        if build is None:
            return

        def build_from(tx: ReadTx) -> None:
            rows, count = cache.vector_rows(tx.snapshot, stored_kind(kind))
            build.run(rows, count)

        def run() -> None:
            reader = self._new_reader()
            try:
                with trace.span(ACTOR, "read", op="ranker.build_vector_index", kind=kind):
                    reader.read(build_from)
            finally:
                reader.close()

        try:
            await trio.to_thread.run_sync(run, abandon_on_cancel=True)
        except (StoreError, OSError, ValueError, RuntimeError) as exc:
            trace.warning(ACTOR, "vector_index_build_failed", kind=kind, error=str(exc))
        finally:
            if build in self._builds and build.graph is not None:
                self._builds.remove(build)  # built: nothing left to stop

    def _masks(self, cache: RecallCache, request: Recall) -> dict[str, np.ndarray]:
        scopes = cache.selected_scopes(request.scopes)
        type_code = None
        if request.memory_type is not None:
            type_code = cache.type_codes.get(request.memory_type.casefold(), -1)
        return {
            "memory": cache.items["memory"].allowed(scopes, type_code),
            "entity": cache.items["entity"].allowed(scopes),
            "relation": cache.items["relation"].allowed(scopes),
        }

    async def _answer_recall(self, ctx: ChildContext, request: Recall) -> None:
        """Answer one `Recall`: the ranking, or a `RankerError` (the caller then ranks lexically)."""
        with ctx.serving(request.reply):
            if faults.ACTIVE:
                await faults.hit("ranker.rank")  # a crash of the ranker actor itself
            token = trace.current.set(request.trace) if request.trace is not None else None
            try:
                request.reply.set(await self._serve_recall(request))
            except RankerError as exc:
                request.reply.fail(exc)
            except Exception as exc:  # noqa: BLE001 - a ranking bug must not cost the caller its recall
                trace.failure(ACTOR, "ranking_failed", exc)
                request.reply.fail(
                    RankerError(
                        f"semantic ranking failed ({type(exc).__name__}: {exc}); falling back to lexical ranking"
                    )
                )
            finally:
                if token is not None:
                    trace.current.reset(token)

    async def _serve_recall(
        self, request: Recall
    ) -> tuple[list[tuple[int, float]], dict[int, list[str]], dict[str, int]]:
        """The ranking, its reasons, and per kind the searched items still without a vector
        after this recall embedded up to `BACKFILL_LIMIT` of them."""
        cache = await self._current_cache()
        with trace.span(ACTOR, "recall", limit=request.limit) as extra:
            masks = await trio.to_thread.run_sync(self._masks, cache, request)
            missing = {
                kind: cache.missing_vectors(kind, masks[kind], BACKFILL_LIMIT) for kind in KINDS
            }
            if any(missing.values()):
                extra["backfilled"] = await self._backfill(missing)
                cache = await self._current_cache()
                masks = await trio.to_thread.run_sync(self._masks, cache, request)
            reader = self._reader
            assert reader is not None

            def ranking(tx: ReadTx) -> tuple[list[tuple[int, float]], dict[int, list[str]]]:
                return rank_mod.rank_explained(
                    cache,
                    tx,
                    request.query,
                    request.qvec,
                    masks,
                    request.limit,
                    request.params,
                    request.lexical,
                    request.explain,
                    request.tvec,
                )

            ranked, reasons = await trio.to_thread.run_sync(reader.read, ranking)
            extra["results"] = len(ranked)
            unembedded = {}
            if any(missing.values()):
                unembedded = {k: cache.count_missing(k, masks[k]) for k in KINDS}
        return ranked, reasons, unembedded

    # -- lazy re-embedding -----------------------------------------------------------

    async def _backfill(self, missing: dict[str, list[int]]) -> int:
        """Embed and store vectors for ``missing`` items (through the store). Returns how many."""
        store = self.app.find(STORE)
        embedder = self.app.find(EMBEDDER)
        if store is None or embedder is None:
            return 0
        docs = await store.read(
            lambda tx: read_documents(tx, missing), name="ranker.backfill_documents"
        )
        if not docs:
            return 0
        # Long texts take several windows each: bound the text per recall, not only the
        # items (the rest is embedded by the next recalls).
        kept: list[tuple[str, int, str]] = []
        chars = 0
        for doc in docs:
            if kept and chars + len(doc[2]) > BACKFILL_CHARS:
                break
            kept.append(doc)
            chars += len(doc[2])
        docs = kept
        try:
            result = await embedder.embed(
                [text for _, _, text in docs], max_chunks=self.app.config.embedding.max_chunks
            )
        except EmbeddingError as exc:
            trace.warning(ACTOR, "backfill_failed", error=str(exc))
            return 0
        op = vector_writer([(kind, item_id) for kind, item_id, _ in docs], result)
        stored: int = await store.write(op, name="ranker.backfill_vectors")
        trace.event(ACTOR, "backfilled", count=len(docs), stored=stored, model=result.model)
        return len(docs)
