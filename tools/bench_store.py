#!/usr/bin/env python
"""Store benchmark: SQLite against PostgreSQL (pgvector, pg_trgm) on the same 100,000 memories.

1. The synthetic store of ``tools/bench_recall.py`` (memories from topic
   templates, ~size/50 entities and their relations, a real-model vector per
   memory, entity and relation) is written to a SQLite home.
2. ``memtrio migrate --to postgresql://...`` copies it into an empty
   PostgreSQL database (timed: the copy itself is a figure), on a private
   server started with ``pgserver`` in a temporary directory, or on
   ``--pg-url`` (an empty database of yours).
3. For each backend a real ``memtrio mcp`` (official MCP client over stdio,
   embeddings on) is measured end to end, as an agent sees it: ``remember``
   (with its embedding), lexical ``recall`` (``use_embeddings: false``),
   semantic ``recall`` (seeds, full text, PPR) and ``search_nodes``.

Both servers run on this machine, so PostgreSQL's figures include its own
process (Unix-socket round trips, no network). Output: one JSON object per
backend on stdout and in ``docs/bench-runs/store.json`` (``--out``).

Usage::

    python tools/bench_store.py                       # 100,000 memories
    python tools/bench_store.py --size 10000 --calls 50
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import trio
from bench_recall import (
    QUERIES,
    SERVICES,
    THINGS,
    build_store,
    embed_all,
    pct,
    server_params,
    template_texts,
)
from mcp import Client

ROOT = Path(__file__).resolve().parent.parent


def start_postgres(workdir: Path, create: bool = True) -> tuple[Any, str]:
    import pgserver
    import psycopg

    base = workdir / "pg"
    if create:
        base.mkdir()
        base.chmod(0o755)  # as root, pgserver runs the server as its own user
        workdir.chmod(0o755)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = pgserver.get_server(base, cleanup_mode="stop")
    uri = server.get_uri()
    if create:
        with psycopg.connect(uri, autocommit=True) as conn:
            conn.execute("CREATE DATABASE memtrio_bench")
    url = uri.replace("/postgres?", "/memtrio_bench?", 1)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE")  # as autovacuum would after the copy: statistics for the planner
    return server, url


def migrate(home: Path, url: str) -> float:
    env = {**os.environ, "MEMTRIO_HOME": str(home), "MEMTRIO_EMBEDDINGS": "off"}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "memtrio.supervisors.cli", "migrate", "--to", url, "--json"],
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"migrate failed: {done.stderr}")
    report = json.loads(done.stdout)
    assert report["differ"] == [], report
    return time.perf_counter() - started


def ms(values: list[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(values), 1), "p95_ms": round(pct(values, 95), 1)}


async def timed(client: Client, tool: str, arguments: dict[str, Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = await client.call_tool(tool, arguments)
    elapsed = (time.perf_counter() - t0) * 1000
    assert not out.is_error, out.content
    return elapsed, out.structured_content


async def measure(home: Path, store: str, calls: int, seed: int) -> dict[str, Any]:
    params = server_params(home)
    params.env = {**(params.env or {}), "MEMTRIO_STORE": store}
    rng = random.Random(seed)
    async with Client(params, read_timeout_seconds=900) as client:
        started = time.perf_counter()
        await timed(client, "recall", {"query": "warm up", "limit": 10})
        first = time.perf_counter() - started
        remember, lexical, semantic, search = [], [], [], []
        for i, text in enumerate(template_texts(rng, calls)):
            args = {"content": f"{text} (store bench {i})", "entities": [f"bench-{i % 7}"]}
            remember.append((await timed(client, "remember", args))[0])
        rankings = set()
        for i in range(calls):
            query = QUERIES[i % len(QUERIES)]
            lexical.append(
                (await timed(client, "recall", {"query": query, "use_embeddings": False}))[0]
            )
            elapsed, out = await timed(client, "recall", {"query": query, "limit": 10})
            semantic.append(elapsed)
            rankings.add(out["ranking"])
            words = f"{rng.choice(SERVICES)} {rng.choice(THINGS)}"
            search.append((await timed(client, "search_nodes", {"query": words}))[0])
    return {
        "first_recall_s": round(first, 2),
        "remember": ms(remember),
        "recall_lexical": ms(lexical),
        "recall_semantic": ms(semantic),
        "semantic_ranking": sorted(rankings),
        "search_nodes": ms(search),
    }


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    reuse = args.reuse is not None
    workdir = Path(args.reuse) if reuse else Path(tempfile.mkdtemp(prefix="memtrio-store-bench-"))
    home = workdir / "home"
    if not reuse:
        rng = random.Random(7)
        base = template_texts(rng, args.templates)
        vecs, model, revision, _ = await embed_all(workdir / "embed", base)
        home.mkdir(mode=0o700)
        started = time.perf_counter()
        build_store(home, args.size, base, vecs, model, revision, seed=args.size, long_share=0.1)
        print(
            f"built {args.size} memories in {time.perf_counter() - started:.1f} s", file=sys.stderr
        )
    server = None
    url = args.pg_url
    if url is None:
        server, url = start_postgres(workdir, create=not reuse)
    try:
        if reuse:  # the copy of the earlier run, and its time
            copy_s = json.loads(Path(args.out).read_text())["runs"][-1]["migrate_from_sqlite_s"]
        else:
            copy_s = migrate(home, url)
        print(f"migrate --to PostgreSQL: {copy_s:.1f} s", file=sys.stderr)
        rows = []
        for name, store in (("sqlite", "sqlite"), ("postgresql", url)):
            row = {
                "backend": name,
                "memories": args.size,
                **await measure(home, store, args.calls, seed=1),
            }
            if name == "postgresql":
                row["migrate_from_sqlite_s"] = round(copy_s, 1)
            print(json.dumps(row), flush=True)
            rows.append(row)
        return rows
    finally:
        if server is not None:
            server.cleanup()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", type=int, default=100_000, help="memories in the store")
    parser.add_argument("--calls", type=int, default=100, help="calls of each tool per backend")
    parser.add_argument("--templates", type=int, default=2000, help="distinct embedded sentences")
    parser.add_argument("--pg-url", help="an empty PostgreSQL database (default: a private one)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "bench-runs" / "store.json"))
    parser.add_argument(
        "--reuse",
        metavar="DIR",
        help="measure again the stores an earlier run left in DIR (skips building and copying)",
    )
    args = parser.parse_args()
    rows = trio.run(main_async, args)
    meta = {"machine": {"cpus": os.cpu_count(), "load_avg_1min": round(os.getloadavg()[0], 2)}}
    Path(args.out).write_text(json.dumps({**meta, "runs": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
