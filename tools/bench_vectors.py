#!/usr/bin/env python
"""Vector index benchmark (issue #15): the backends in process, and ``recall`` end to end.

Part 1, in process (``actors.vectors``), for each size (default 100,000 and
1,000,000 vectors of 384 dimensions), data set and backend:

- data ``random``: unit vectors drawn uniformly (the hard case: every
  neighbour is almost as far as any other); ``clustered``: unit vectors
  around ``size / 1000`` centres (embeddings of real text cluster like this);
  queries are fresh draws from the same distribution, not indexed vectors;
- backends: ``exact``; ``hnsw`` with each quantization (f32, f16, bf16, i8)
  and the default ``[vectors]`` options (M 16, efConstruction 200, efSearch
  128), then the same graph searched with each efSearch of ``--ef`` (default
  50, the reference's default, 64 and 256); ``ivf`` (nlist 1024, nprobe 16 at 1,000,000: ``--ivf-nlist``);
- figures: build time, memory (the process's RSS growth over the build),
  query latency p50/p99 (one query at a time, as recall asks), recall@10
  against exact search.

Each configuration runs in its own process (``--one``), so memory figures do
not mix.

Part 2 (``--e2e N``): a store of N memories written directly in SQLite
(``tools/bench_recall.py``'s generator: template sentences embedded by the
real model plus noise, entities and relations linked), then a real
``memtrio mcp`` over stdio, spoken to in raw JSON-RPC: the time of the first
``recall`` (model load + the cache and index build), then ``recall`` p50/p99;
then a second server on the same home: its first ``recall`` (the saved hnsw
graph loaded and reconciled with the table instead of built).

``--e2e-cache DIR`` builds the end-to-end store once in ``DIR`` (outside the
repository: 5 GB at 1,000,000 memories, ~2 minutes) and reuses it, with the
hnsw graph the first server saved beside it (``DIR/home/vector-index/``), so
a later run times recall without building either.

The 1,000,000 runs are heavy (minutes of CPU, ~10 GB of RAM in total): run
them once, not on a loaded machine. ``--quick`` is the development mode
(20,000 vectors, fewer configurations, a 20,000-memory end-to-end store).

Usage::

    python tools/bench_vectors.py --quick
    python tools/bench_vectors.py --sizes 100000,1000000 --e2e 1000000 --json out.json
    python tools/bench_vectors.py --skip-index --e2e 1000000 --e2e-backend hnsw \
        --e2e-cache ~/memtrio-e2e-1m
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from memtrio.actors.chaos.blocking import BlockingClient
from memtrio.actors.store import connections

DIMS = 384
QUERIES = 300
SEED = 15
EF_SEARCHES = (50, 64, 256)  # efSearch values the built graph is searched with besides its own


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def dataset(kind: str, n: int, queries: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` unit vectors and ``queries`` fresh ones of the same distribution."""
    rng = np.random.default_rng(SEED)
    total = n + queries
    out = np.empty((total, DIMS), dtype=np.float32)
    centres = None
    if kind == "clustered":
        centres = rng.standard_normal((max(n // 1000, 10), DIMS), dtype=np.float32)
        centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    for start in range(0, total, 100_000):
        end = min(total, start + 100_000)
        block = rng.standard_normal((end - start, DIMS), dtype=np.float32)
        if centres is not None:
            # Noise of norm ~0.6 around a centre: neighbours share a topic, not a copy.
            block = centres[rng.integers(0, len(centres), end - start)] + 0.03 * block
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[start:end] = block
    return out[:n], out[n:]


def truth(data: np.ndarray, queries: np.ndarray, k: int = 10) -> np.ndarray:
    best = np.empty((len(queries), k), dtype=np.int64)
    for start in range(0, len(queries), 50):
        scores = queries[start : start + 50] @ data.T
        top = np.argpartition(-scores, k, axis=1)[:, :k]
        order = np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1)
        best[start : start + 50] = np.take_along_axis(top, order, axis=1)
    return best


def run_one(spec: dict[str, Any]) -> dict[str, Any]:
    """One (size, data, backend, quantization): build, then query. In its own process."""
    from memtrio.actors.vector_index.index import make_index
    from memtrio.supervisors.config import VectorsConfig

    defaults = VectorsConfig()
    n = spec["n"]
    data, queries = dataset(spec["data"], n, QUERIES)
    gt = truth(data, queries)
    before = rss_mb()
    index = make_index(
        spec["backend"],
        DIMS,
        "cos",
        quantization=spec.get("quantization", "f32"),
        connectivity=defaults.connectivity,
        expansion_add=defaults.expansion_add,
        expansion_search=defaults.expansion_search,
        nlist=spec.get("nlist", 256),
        nprobe=spec.get("nprobe", 8),
    )
    ids = np.arange(n, dtype=np.int64)
    started = time.perf_counter()
    for start in range(0, n, 100_000):
        index.add(ids[start : start + 100_000], data[start : start + 100_000])
    build_s = time.perf_counter() - started
    del data
    grown = rss_mb() - before
    row = {**spec, "build_s": round(build_s, 1), "rss_growth_mb": round(grown)}
    row.update(measure(index, queries, gt))
    if spec["backend"] == "hnsw":
        # efSearch can change on a built graph: the recall/latency it buys.
        graph = index._index  # noqa: SLF001 - the benchmark peeks at usearch's knob
        for ef in spec.get("ef", EF_SEARCHES):
            graph.expansion_search = ef
            row[f"ef{ef}"] = measure(index, queries, gt)
    return row


def measure(index: Any, queries: np.ndarray, gt: np.ndarray) -> dict[str, float]:
    latencies, hits = [], 0
    for q, want in zip(queries, gt, strict=True):
        t0 = time.perf_counter()
        got, _ = index.search(q, 10)
        latencies.append((time.perf_counter() - t0) * 1000)
        hits += len(set(got.tolist()) & set(want.tolist()))
    latencies.sort()
    return {
        "query_p50_ms": round(statistics.median(latencies), 3),
        "query_p99_ms": round(latencies[int(0.99 * (len(latencies) - 1))], 3),
        "recall_at_10": round(hits / (10 * len(queries)), 4),
    }


def parse_config(n: int, text: str) -> dict[str, Any]:
    """``data/backend[/quantization]``, e.g. ``clustered/hnsw/i8``."""
    data, backend, *rest = text.split("/")
    spec: dict[str, Any] = {"n": n, "data": data, "backend": backend}
    if backend == "hnsw":
        spec["quantization"] = rest[0] if rest else "f32"
    if backend == "ivf":
        spec.update(nlist=1024 if n >= 500_000 else 256, nprobe=16)
    return spec


def specs(sizes: list[int], quick: bool) -> list[dict[str, Any]]:
    out = []
    for n in sizes:
        nlist = 1024 if n >= 500_000 else 256
        for data in ("clustered", "random"):
            out.append({"n": n, "data": data, "backend": "exact"})
            quants = ("f32", "i8") if quick else ("f32", "f16", "bf16", "i8")
            if data == "random" and n >= 500_000:
                quants = ("f32",)  # the hard case once at the largest size
            for quant in quants:
                out.append({"n": n, "data": data, "backend": "hnsw", "quantization": quant})
            out.append({"n": n, "data": data, "backend": "ivf", "nlist": nlist, "nprobe": 16})
    return out


# -- end to end: recall over stdio ---------------------------------------------------------


def peak_rss_mb(server: BlockingClient) -> float:
    for line in Path(f"/proc/{server.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cached_store(size: int, cache: Path | None) -> tuple[Path, float]:
    """A home holding a store of ``size`` synthetic memories, and the seconds its build took.

    With ``cache`` (a directory outside the repository) the store is built there
    once and reused by later runs (a marker file records a finished build; an
    unfinished one is built again); without, in a fresh temporary directory.
    """
    import trio

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_recall  # the synthetic store generator

    workdir = (
        cache.expanduser()
        if cache is not None
        else Path(tempfile.mkdtemp(prefix="memtrio-bench-vectors-"))
    )
    home = workdir / "home"
    marker = workdir / f"built-{size}.json"
    if marker.is_file():
        return home, float(json.loads(marker.read_text())["build_s"])
    if home.exists():
        shutil.rmtree(home)
    home.mkdir(parents=True)
    rng = random.Random(7)
    base = bench_recall.template_texts(rng, 2000)
    vecs, model, revision, _ = trio.run(bench_recall.embed_all, workdir / "embed", base)
    started = time.perf_counter()
    bench_recall.build_store(home, size, base, vecs, model, revision, seed=size)
    build_s = time.perf_counter() - started
    marker.write_text(json.dumps({"build_s": round(build_s, 1)}))
    return home, build_s


def end_to_end(size: int, calls: int, backend: str, cache: Path | None = None) -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_recall  # the queries

    home, build_s = cached_store(size, cache)
    env = vectors_env(backend)
    server = start_server(home, env)
    first_s = recall(server, "warm up") / 1000
    times = sorted(
        recall(server, bench_recall.QUERIES[i % len(bench_recall.QUERIES)]) for i in range(calls)
    )
    rss = peak_rss_mb(server)
    server.close(120)
    # A restart: the saved hnsw graph is loaded and reconciled instead of built.
    again = start_server(home, env)
    restart_s = recall(again, "warm up") / 1000
    again.close(120)
    return {
        "memories": size,
        "backend": backend,
        "store_build_s": round(build_s, 1),
        "first_recall_s (model + cache load, index built or loaded)": round(first_s, 1),
        "first_recall_after_restart_s (graph loaded + reconciled)": round(restart_s, 1),
        "recall_p50_ms": round(statistics.median(times), 1),
        "recall_p99_ms": round(times[int(0.99 * (len(times) - 1))], 1),
        "server_peak_rss_mb": round(rss),
        "load_avg_1min": round(os.getloadavg()[0], 2),
    }


def vectors_env(backend: str) -> dict[str, str]:
    """The server's settings: embeddings on, the ``backend`` vector index, and a call
    timeout that lets the first recall wait for a build."""
    return {
        "MEMTRIO_EMBEDDINGS": "on",
        "MEMTRIO_CODE": "off",
        "MEMTRIO_LOG_LEVEL": "warning",
        "MEMTRIO_VECTORS_BACKEND": backend,
        "MEMTRIO_SERVER_CALL_TIMEOUT": "86400",
    }


def while_building(size: int, calls: int, cache: Path | None) -> dict[str, Any]:
    """A start with no saved graph: the first ``recall`` (served exact while the hnsw
    graph is built in the background), ``calls`` recalls during the build, then the
    time the server takes to exit on EOF. The saved graphs are put back afterwards."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_recall

    home, _ = cached_store(size, cache)
    saved = home / "vector-index"
    aside = home.parent / "vector-index-aside"
    if saved.exists():
        saved.rename(aside)
    try:
        server = start_server(home, vectors_env("hnsw"))
        first_s = recall(server, "warm up") / 1000
        times = sorted(
            recall(server, bench_recall.QUERIES[i % len(bench_recall.QUERIES)])
            for i in range(calls)
        )
        t0 = time.perf_counter()
        server.close(120)
        exit_s = time.perf_counter() - t0
    finally:
        shutil.rmtree(saved, ignore_errors=True)
        if aside.exists():
            aside.rename(saved)
    return {
        "memories": size,
        "first_recall_s (exact index loaded, graph building)": round(first_s, 1),
        "recall_during_build_p50_ms": round(statistics.median(times), 1),
        "recall_during_build_max_ms": round(times[-1], 1),
        "exit_on_eof_s": round(exit_s, 1),
        "load_avg_1min": round(os.getloadavg()[0], 2),
    }


def fts_seed_times(home: Path) -> dict[str, Any]:
    """In process: the ranker's FTS5 seed query (`rank.fts_candidates`) on the store of
    ``home``, over the benchmark's queries twice (the second pass is reported)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_recall
    from memtrio.actors.ranker import rank as rank_mod
    from memtrio.actors.store.sqlite import db
    from memtrio.actors.store.sqlite.tx import tx as sqlite_tx

    conn = db.connect(db.db_path(home), read_only=True)
    times = []
    for query in bench_recall.QUERIES * 2:
        t0 = time.perf_counter()
        connections.run_read(conn, lambda c, q=query: rank_mod.fts_candidates(sqlite_tx(c), q))
        times.append((time.perf_counter() - t0) * 1000)
    conn.close()
    times = sorted(times[len(bench_recall.QUERIES) :])
    return {
        "fts_seed_p50_ms": round(statistics.median(times), 1),
        "fts_seed_max_ms": round(times[-1], 1),
        "queries": len(times),
        "load_avg_1min": round(os.getloadavg()[0], 2),
    }


def start_server(home: Path, env: dict[str, str]) -> BlockingClient:
    server = BlockingClient.memtrio(home, env, args=("--no-attach",), timeout=86400)
    server.initialize("bench_vectors")
    return server


def recall(server: BlockingClient, query: str) -> float:
    """One ``recall`` (semantic ranking asserted); its wall time in ms."""
    t0 = time.perf_counter()
    result = server.tool("recall", {"query": query, "limit": 10})
    ranking = result.get("structuredContent", {}).get("ranking")
    assert ranking != "lexical", result  # semantic ranking, not the fallback
    return (time.perf_counter() - t0) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="100000,1000000", help="comma-separated vector counts")
    parser.add_argument("--quick", action="store_true", help="20,000 vectors, fewer configurations")
    parser.add_argument("--e2e", type=int, default=0, help="memories of the end-to-end store")
    parser.add_argument("--e2e-backend", default="auto", help="[vectors] backend of the server")
    parser.add_argument(
        "--e2e-cache",
        type=Path,
        help="build the end-to-end store once in this directory (outside the repository) and reuse it",
    )
    parser.add_argument(
        "--fts-only",
        action="store_true",
        help="with --e2e-cache: time only the ranker's FTS5 seed query, in process",
    )
    parser.add_argument(
        "--while-building",
        action="store_true",
        help="with --e2e-cache: recall on a start without a saved graph (built in the background)",
    )
    parser.add_argument("--calls", type=int, default=200, help="recalls timed end to end")
    parser.add_argument("--skip-index", action="store_true", help="only the end-to-end part")
    parser.add_argument("--json", help="write every row to this file too")
    parser.add_argument(
        "--configs",
        help="only these, comma-separated data/backend[/quantization] (e.g. clustered/hnsw/i8)",
    )
    parser.add_argument(
        "--ef",
        default=",".join(map(str, EF_SEARCHES)),
        help="comma-separated efSearch values each hnsw graph is also searched with",
    )
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(json.loads(args.one))), flush=True)
        return 0
    sizes = [20_000] if args.quick else [int(s) for s in args.sizes.split(",")]
    rows: list[dict[str, Any]] = []
    print(f"# {os.cpu_count()} cores, numpy {np.__version__}", flush=True)
    plan = specs(sizes, args.quick)
    if args.configs:
        plan = [parse_config(n, c) for n in sizes for c in args.configs.split(",")]
    efs = [int(e) for e in args.ef.split(",") if e.strip()]
    for spec in [] if args.skip_index else plan:
        spec = {**spec, "ef": efs} if spec["backend"] == "hnsw" else spec
        out = subprocess.run(
            [sys.executable, __file__, "--one", json.dumps(spec)],
            capture_output=True,
            text=True,
            check=True,
        )
        row = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(json.dumps(row), flush=True)
    e2e = args.e2e or (20_000 if args.quick else 0)
    if e2e and args.while_building:
        print(json.dumps(while_building(e2e, min(args.calls, 20), args.e2e_cache)), flush=True)
        return 0
    if e2e and args.fts_only:
        home, _ = cached_store(e2e, args.e2e_cache)
        print(json.dumps(fts_seed_times(home)), flush=True)
        return 0
    if e2e:
        row = end_to_end(
            e2e, args.calls if not args.quick else 50, args.e2e_backend, args.e2e_cache
        )
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
