#!/usr/bin/env python
"""Latency of `remember` and lexical `recall` through the real stdio server, by store size.

For each size (default 1,000 / 10,000 / 100,000 memories) the script:

1. creates a fresh ``MEMTRIO_HOME`` and preloads that many synthetic memories
   directly into SQLite with the store's own functions (``insert_memory``,
   one transaction), 90% in the server's repository scope, 10% ``global``
   (``--repo-share``);
2. starts ``memtrio mcp`` as a stdio child (``MEMTRIO_EMBEDDINGS=off``) and,
   after a warm-up, times each ``tools/call`` round trip (write the JSON-RPC
   line, read the reply line) for ``--calls`` remembers and ``--calls``
   lexical recalls (``use_embeddings: false``, 2-4 word queries drawn from the
   same word distribution as the memories);
3. reports p50/p99 in milliseconds and the database size (db + WAL).

Usage::

    python tools/bench_memory.py            # 1k, 10k, 100k
    python tools/bench_memory.py --sizes 1000 --calls 200

Targets at 100,000 memories: remember p50 <= 3 ms, lexical recall p50 <= 15 ms.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from memtrio.actors.chaos.blocking import BlockingClient
from memtrio.actors.store.domain.memories import NewMemory, insert_memory
from memtrio.actors.store.domain.scopes import default_scope
from memtrio.actors.store.sqlite import db
from memtrio.actors.store.sqlite.tx import tx as sqlite_tx

# Seconds one call may take before the run gives up on the server.
CALL_TIMEOUT = 3600.0
SYLLABLES = "ka lo mi ne ru ta si vo pe da gu fe zi bo cha tri ment ion ser ver cache lock sched pars ing".split()


def vocabulary(size: int, rng: random.Random) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


class Zipf:
    """Draw words with Zipf-like frequencies (rank r has weight 1 / r**s)."""

    def __init__(self, words: list[str], s: float, rng: random.Random) -> None:
        self.words = words
        self.rng = rng
        weights = [1 / (r**s) for r in range(1, len(words) + 1)]
        total = sum(weights)
        acc = 0.0
        self.cum = []
        for w in weights:
            acc += w / total
            self.cum.append(acc)

    def draw(self, n: int) -> list[str]:
        import bisect

        return [
            self.words[min(bisect.bisect_left(self.cum, self.rng.random()), len(self.words) - 1)]
            for _ in range(n)
        ]


def sentence(z: Zipf, rng: random.Random) -> str:
    return " ".join(z.draw(rng.randint(15, 45))).capitalize() + "."


def preload(
    home: Path, scope: str, n: int, z: Zipf, rng: random.Random, repo_share: float
) -> float:
    started = time.perf_counter()
    conn = db.open_write_connection(db.db_path(home), busy_timeout_ms=30000, durability="normal")
    conn.execute("BEGIN IMMEDIATE")
    ts = time.time() - n
    for i in range(n):
        scopes = [scope] if rng.random() < repo_share else ["global"]
        new = NewMemory(
            sentence(z, rng),
            rng.choice(["observation", "decision", "convention", "pitfall"]),
            round(rng.random(), 2),
            scopes,
        )
        insert_memory(sqlite_tx(conn), new, ts + i)
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return time.perf_counter() - started


def start_server(home: Path, cwd: Path, durability: str) -> BlockingClient:
    """``memtrio mcp`` in ``home``, initialized, spoken to with the blocking line client (no
    SDK overhead in the timings)."""
    env = {
        "MEMTRIO_DURABILITY": durability,
        "MEMTRIO_CODE": "off",
        "MEMTRIO_LOG_LEVEL": "warning",
    }
    server = BlockingClient.memtrio(home, env, cwd, timeout=CALL_TIMEOUT)
    server.initialize("bench")
    return server


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def bench_size(n: int, calls: int, seed: int, durability: str, repo_share: float) -> dict:
    rng = random.Random(seed)
    z = Zipf(vocabulary(20000, rng), 1.07, rng)
    with tempfile.TemporaryDirectory(prefix="memtrio-bench-") as tmp:
        base = Path(tmp)
        home, repo = base / "home", base / "repo"
        repo.mkdir()
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        scope = default_scope(repo)
        load_s = preload(home, scope, n, z, rng, repo_share)
        server = start_server(home, repo, durability)
        try:
            for _ in range(20):  # warm-up: imports, SQLite page cache
                server.tool("remember", {"content": sentence(z, rng)})
                server.tool("recall", {"query": " ".join(z.draw(3)), "use_embeddings": False})
            remember = [
                server.timed_call("remember", {"content": sentence(z, rng)})[1]
                for _ in range(calls)
            ]
            recall = []
            hits = 0
            for _ in range(calls):
                result, elapsed = server.timed_call(
                    "recall",
                    {"query": " ".join(z.draw(rng.randint(2, 4))), "use_embeddings": False},
                )
                recall.append(elapsed)
                hits += len(result["structuredContent"]["memories"])
        finally:
            server.close()
        conn = sqlite3.connect(db.db_path(home))
        stored = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
        conn.close()
        if stored != n + 20 + calls:
            raise RuntimeError(f"expected {n + 20 + calls} memories after the run, found {stored}")
        size = sum(p.stat().st_size for p in home.glob("memtrio.sqlite*"))
    return {
        "memories": n,
        "preload_s": round(load_s, 1),
        "remember_p50_ms": round(statistics.median(remember), 2),
        "remember_p99_ms": round(percentile(remember, 0.99), 2),
        "recall_p50_ms": round(statistics.median(recall), 2),
        "recall_p99_ms": round(percentile(recall, 0.99), 2),
        "recall_avg_results": round(hits / calls, 1),
        "db_mb": round(size / 1e6, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="comma-separated store sizes")
    parser.add_argument("--calls", type=int, default=300, help="timed calls per tool and size")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--durability",
        choices=["normal", "sync"],
        default="normal",
        help="MEMTRIO_DURABILITY of the server",
    )
    parser.add_argument(
        "--repo-share",
        type=float,
        default=0.9,
        help="fraction of preloaded memories in the server's repository (rest global)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON rows instead of a table")
    args = parser.parse_args()
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        row = bench_size(n, args.calls, args.seed, args.durability, args.repo_share)
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(
        "| memories | remember p50 | remember p99 | lexical recall p50 | lexical recall p99 | results/recall | DB size | preload |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(
            f"| {r['memories']:,} | {r['remember_p50_ms']} ms | {r['remember_p99_ms']} ms | {r['recall_p50_ms']} ms | "
            f"{r['recall_p99_ms']} ms | {r['recall_avg_results']} | {r['db_mb']} MB | {r['preload_s']} s |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
