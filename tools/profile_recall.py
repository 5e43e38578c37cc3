#!/usr/bin/env python
"""Where a semantic recall's time goes on a big store: wall and CPU per stage.

The store is the synthetic one of ``tools/bench_recall.py`` (same templates,
same seed, 10% long memories), built once into ``--store`` and reused by the
next runs. The ranking runs in this process the way the ranker actor runs it
(its own read connection, the `RecallCache` loaded from the store, the FTS5
seeds, which the server reads while the query is embedded, then
`rank.rank_explained` in one read transaction), then the rows of the answer are
read and JSON-encoded. The queries are embedded first, apart (their median
time is the first row). Each stage's functions are wrapped with timers: wall
time and process CPU time (all threads), in ms per recall, median over the
queries; a stage nested in another is counted in both (indented). The record
of the access (a write) and the MCP layer are not in it.

``--index built`` builds the hnsw graph of the memories first (as a server
does once, in the background, then keeps it on disk); ``--index exact`` keeps
the exact index a server searches until that build is done.

``--answers FILE`` writes each query's ranked memories and their scores (the
first ``--limit``, exact ``repr``) so that two versions of the code can be
compared on the same store: run the other one with its checkout as
``PYTHONPATH`` (a stage whose function that code does not have is left out
of the table; the checkout must have `service.store_reader` and
`service.index_choice`, the ranker's own, which this tool uses).

Usage::

    python tools/profile_recall.py --store DIR --size 100000 --templates 500
    python tools/profile_recall.py --store DIR --index exact
    PYTHONPATH=OTHER python tools/profile_recall.py --store DIR --limit 40 --answers FILE
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import trio
from memtrio.actors.embedder.feature import FEATURE as EMBEDDER_FEATURE
from memtrio.actors.embedder.handle import EMBEDDER
from memtrio.actors.memory import handlers
from memtrio.actors.ranker import graph, rank, rerank, service
from memtrio.actors.store.sqlite.db import db_path
from memtrio.supervisors import config as config_mod
from memtrio.supervisors.app import build_context, open_app

TOOLS = Path(__file__).resolve().parent


def bench_module() -> Any:
    spec = importlib.util.spec_from_file_location("bench_recall", TOOLS / "bench_recall.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = bench_module()

# (label, owner object, attribute): the stages, in the order they run; a label's
# indentation is its nesting.
STAGES: list[tuple[str, Any, str]] = [
    ("fts5 seeds (while embedding)", rank, "fts_seeds"),
    ("masks", graph.ItemTable, "allowed"),
    ("seeds", rank, "seeds"),
    ("  dense search (memories)", rank, "nearest_memories"),
    ("  rerank features", rerank, "features"),
    ("    candidate pool", rerank, "candidate_pool"),
    ("      thread neighbours (walked)", rerank, "thread_neighbours"),
    ("      text ends (SQL)", getattr(rerank, "Texts", None), "read"),
    ("      text shapes (SQL, older code)", rerank, "texts_shape"),
    ("    thread neighbours (others)", rerank, "thread_ones"),
    ("    cosines", rerank, "cosines"),
    ("    coverage (words; SQL too in older code)", rerank, "coverage"),
    ("    topic cosines", rerank, "topic_cosines"),
    ("  graph seeds", rank, "graph_seeds"),
    ("personalized pagerank", rank, "personalized_pagerank"),
    ("  neighbourhood walk", rank, "neighbourhood"),
    ("date boost", rank, "date_boost"),
    ("neighbour context", rank, "neighbour_context"),
    ("reranked order", rank, "reranked_order"),
    ("  diversify (turns)", rerank, "diversify"),
    ("  diversify (notes, MMR)", rank, "diversify"),
    ("rows of the answer (SQL)", handlers, "ranked_rows"),
]


class Timers:
    def __init__(self) -> None:
        self.wall: dict[str, list[float]] = {}
        self.cpu: dict[str, list[float]] = {}
        self.call: dict[str, tuple[float, float]] = {}

    def wrap(self, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            w0, c0 = time.perf_counter(), time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                w, c = self.call.get(label, (0.0, 0.0))
                self.call[label] = (
                    w + time.perf_counter() - w0,
                    c + time.process_time() - c0,
                )

        return timed

    def install(self) -> None:
        for label, owner, name in STAGES:
            if hasattr(owner, name):  # an older version of the code may not have it
                setattr(owner, name, self.wrap(label, getattr(owner, name)))

    def end_call(self, extra: dict[str, tuple[float, float]]) -> None:
        for label, (w, c) in {**self.call, **extra}.items():
            self.wall.setdefault(label, []).append(w * 1000)
            self.cpu.setdefault(label, []).append(c * 1000)
        self.call = {}


def load_cache(home: Path, cfg: config_mod.Config, model: tuple[str, str, int], index: str) -> Any:
    reader = service.store_reader(cfg, db_path(home))
    choice = service.index_choice(cfg)

    def load(tx: Any) -> Any:
        cache = graph.RecallCache(
            *model,
            choice,
            home / "vector-index",
            terms=cfg.retrieval.terms,
            dates=cfg.retrieval.dates,
            defer_builds=index == "exact",
        )
        cache.load(tx.snapshot)
        return cache

    t0 = time.perf_counter()
    cache = reader.read(load)
    print(
        f"cache loaded in {time.perf_counter() - t0:.1f} s: {cache.stats()}",
        file=sys.stderr,
    )
    return reader, cache


async def run(args: argparse.Namespace) -> None:
    home = Path(args.store)
    rng = random.Random(7)
    base = bench.template_texts(rng, args.templates)
    cfg = config_mod.load(home, env={"MEMTRIO_EMBEDDINGS": "on", "MEMTRIO_HOME": str(home)})
    if not db_path(home).exists():
        home.mkdir(parents=True, exist_ok=True)
        vecs, model_name, revision, _ = await bench.embed_all(home / "embed", base)
        t0 = time.perf_counter()
        bench.build_store(
            home, args.size, base, vecs, model_name, revision, seed=args.size, long_share=0.1
        )
        print(f"built {args.size} memories in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    app = build_context(cfg, home)
    params = rank.Params()
    async with open_app(app, [EMBEDDER_FEATURE]):
        pool = app.service(EMBEDDER)
        await pool.load()
        model = (pool.model, pool.revision, pool.dim)
        reader, cache = await trio.to_thread.run_sync(load_cache, home, cfg, model, args.index)
        queries = [bench.QUERIES[i % len(bench.QUERIES)] for i in range(args.calls)]
        embed_ms: list[float] = []
        vectors = []
        for q in queries:
            t0 = time.perf_counter()
            vectors.append((await pool.embed([q], query=True)).vectors[0])
            embed_ms.append((time.perf_counter() - t0) * 1000)
    timers = Timers()
    timers.install()
    encoder = msgspec.json.Encoder()
    total_wall: list[float] = []
    total_cpu: list[float] = []
    answers = []
    for q, qvec in zip(queries, vectors, strict=True):
        w0, c0 = time.perf_counter(), time.process_time()
        lexical = reader.read(lambda tx, q=q: rank.fts_seeds(tx.fulltext, q))
        scopes = cache.selected_scopes(None)
        masks = {
            "memory": cache.items["memory"].allowed(scopes, None),
            "entity": cache.items["entity"].allowed(scopes),
            "relation": cache.items["relation"].allowed(scopes),
        }
        ranked, _ = reader.read(
            lambda tx, q=q, v=qvec, lx=lexical, m=masks: rank.rank_explained(
                cache, tx, q, v, m, args.limit, params, lx
            )
        )
        rows = reader.read(lambda tx, r=ranked: handlers.ranked_rows(tx, ["global"], r))
        t1, c1 = time.perf_counter(), time.process_time()
        encoder.encode(rows)
        encoded = (time.perf_counter() - t1, time.process_time() - c1)
        total_wall.append((time.perf_counter() - w0) * 1000)
        total_cpu.append((time.process_time() - c0) * 1000)
        timers.end_call({"json encoding": encoded})
        answers.append(ranked)
    reader.close()
    print(f"# {args.calls} recalls, store {args.size} memories, index {args.index}")
    print(f"# cache: {cache.stats()['vector_index']}, {cache.stats()['vector_rows']}")
    print("| stage | wall p50 ms | cpu p50 ms | wall mean ms |")
    print("| --- | --- | --- | --- |")
    print(f"| query embedding (pool, single) | {statistics.median(embed_ms):.2f} | | |")
    for label, _, _ in [*STAGES, ("json encoding", None, None)]:
        if label not in timers.wall:
            continue
        walls = timers.wall[label] + [0.0] * (args.calls - len(timers.wall[label]))
        cpus = timers.cpu[label] + [0.0] * (args.calls - len(timers.cpu[label]))
        print(
            f"| {label} | {statistics.median(walls):.2f} | {statistics.median(cpus):.2f}"
            f" | {statistics.fmean(walls):.2f} |"
        )
    print(
        f"| **ranking total (after the embedding)** | {statistics.median(total_wall):.2f}"
        f" | {statistics.median(total_cpu):.2f} | {statistics.fmean(total_wall):.2f} |"
    )
    if args.answers:
        Path(args.answers).write_text(repr(answers))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--store", required=True, help="the store's home (built if absent)")
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--templates", type=int, default=500)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--index", choices=("built", "exact"), default="built")
    parser.add_argument("--limit", type=int, default=10, help="memories a recall returns")
    parser.add_argument(
        "--answers", help="write each query's ranked ids and scores here (to compare runs)"
    )
    args = parser.parse_args()
    trio.run(run, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
