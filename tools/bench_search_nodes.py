#!/usr/bin/env python
"""``search_nodes`` of two common words at 100,000 memories: where the time goes.

The store is ``tools/bench_recall.py``'s synthetic store (as ``tools/bench_store.py``
builds it: 100,000 memories, 2,000 entities, 10% long memories), written with
random unit vectors instead of a model's (search_nodes reads no vectors), into
``DIR/home`` by ``--build``; ``--pg-url`` measures a PostgreSQL copy of it too
(``memtrio migrate --to URL`` with ``MEMTRIO_HOME=DIR/home``).

For each store, on 40 queries of a random service and thing (the words of
``bench_store``'s ``search_nodes``), the p50 in milliseconds of:

- ``scores``: the counting of every term's matches (`kg.search._scores`);
- ``summary`` and ``full``: the whole read of a 100-entity page in that mode;
- on SQLite, ``stdio_full`` and ``stdio_summary``: a real ``memtrio mcp``
  (``MEMTRIO_EMBEDDINGS=off``) driven with raw JSON-RPC lines, from writing the
  request to reading its reply (no SDK), and the reply's size in bytes.

Usage::

    python tools/bench_search_nodes.py --build DIR        # build, then measure
    python tools/bench_search_nodes.py DIR [--pg-url URL]
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from bench_recall import SERVICES, THINGS, build_store, template_texts
from memtrio.actors.chaos.blocking import BlockingClient
from memtrio.actors.chaos.client import request_message, tool_call_params
from memtrio.actors.kg import search
from memtrio.actors.kg.view import Scoped, View
from memtrio.actors.store.domain.lexical import query_terms
from memtrio.actors.store.sqlite.db import db_path
from memtrio.actors.store.sqlite.tx import tx as sqlite_tx

QUERIES = 40
VIEW = View(["global"], ["global"], "global")


def queries() -> list[str]:
    rng = random.Random(5)
    return [f"{rng.choice(SERVICES)} {rng.choice(THINGS)}" for _ in range(QUERIES)]


def p50(run: Callable[[str], object]) -> float:
    times = []
    for q in queries():
        t0 = time.perf_counter()
        run(q)
        times.append((time.perf_counter() - t0) * 1000)
    return round(statistics.median(times), 1)


def in_process(conn: sqlite3.Connection) -> dict[str, float]:
    tx = sqlite_tx(conn)
    sc = Scoped(tx, VIEW)
    return {
        "scores": p50(lambda q: search._scores(tx.fulltext, search.visibility(sc), query_terms(q))),
        "summary": p50(lambda q: search.search_nodes(tx, sc, q, 0, 100, "summary", None)),
        "full": p50(lambda q: search.search_nodes(tx, sc, q, 0, 100, "full", None)),
    }


def over_stdio(home: Path, mode: str) -> tuple[float, int]:
    env = {"MEMTRIO_CODE": "off", "MEMTRIO_LOG_LEVEL": "warning"}
    server = BlockingClient.memtrio(home, env, timeout=600)
    server.initialize("bench")
    sizes: list[int] = []

    def one(q: str) -> None:
        params = tool_call_params("search_nodes", {"query": q, "mode": mode})
        server.send(request_message("tools/call", params, server.new_id()))
        reply = server.read_line() + b"\n"
        assert b'"isError":true' not in reply[:200]
        sizes.append(len(reply))

    try:
        return p50(one), int(statistics.median(sizes))
    finally:
        server.close(60)


def build(workdir: Path) -> None:
    home = workdir / "home"
    home.mkdir(parents=True, mode=0o700)
    base = template_texts(random.Random(7), 2000)
    vecs = np.random.default_rng(1).normal(size=(len(base), 384))
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    build_store(home, 100_000, base, vecs, "random", "none", seed=100_000, long_share=0.1)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("dir", type=Path, help="the work directory (its store in DIR/home)")
    parser.add_argument("--build", action="store_true", help="write the store first")
    parser.add_argument("--pg-url", help="a PostgreSQL copy of the store to measure too")
    args = parser.parse_args()
    if args.build:
        build(args.dir)
    home = args.dir / "home"
    rows: dict[str, dict[str, float]] = {}
    conn = sqlite3.connect(str(db_path(home)))
    rows["sqlite"] = in_process(conn)
    conn.close()
    for mode in ("full", "summary"):
        ms, size = over_stdio(home, mode)
        rows["sqlite"][f"stdio_{mode}"] = ms
        rows["sqlite"][f"stdio_{mode}_bytes"] = size
    if args.pg_url:
        from memtrio.actors.store.pg.pool import open_reader

        pg = open_reader(args.pg_url)
        rows["postgresql"] = in_process(pg)  # type: ignore[arg-type]
        pg.close()
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
