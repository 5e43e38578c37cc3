#!/usr/bin/env python
"""Recall benchmark: remember-with-embedding, semantic recall latency, embedding throughput, peak RSS.

For each store size (default 10,000 and 100,000 memories):

1. A synthetic store is written directly with SQL (fast): memories built from
   topic templates with varied details, each linked to 1-3 of ~size/50
   entities (some relations between entities too), and a vector per memory,
   entity and relation. Vectors come from the real model for the distinct
   template sentences; each memory's vector is its template's vector plus
   small noise, re-normalised (embedding 100,000 distinct texts would take
   minutes and does not change the cost of the search). A share of the
   memories (``--long-share``, default 10%) are long (20 sentences) and have
   4 vectors, one per window, as ``remember`` stores long texts.
   With ``--keep DIR`` the store (and the hnsw graph its server saves) is kept
   in DIR and later runs measure a copy of it instead of building it again.
2. A real ``memtrio mcp`` server is started on it (official MCP client over
   stdio) and measured end to end, as an agent sees it:
   - ``remember`` with embedding (sequential calls, new distinct texts);
   - ``recall`` with semantic ranking (seeds + FTS5 + PPR), queries that are
     not verbatim memories, once the server is idle (``settled_s``): a store
     without a saved hnsw graph has it built in the background at the first
     start (minutes at 100,000 memories, on every core), searched exactly until
     then; ``--no-settle`` measures at once, during that build;
   - the server's CPU time per recall (user + system, from /proc: unlike the
     wall-clock latency it does not grow when other processes share the CPUs);
   - the server's peak RSS (VmHWM from /proc) after all of that.
3. Embedding throughput in this process with the embedder pool: texts/s when
   batched (one call of many texts) and single (one text per call, sequential).

Usage::

    python tools/bench_recall.py                  # 10k and 100k
    python tools/bench_recall.py --sizes 10000 --calls 100
    python tools/bench_recall.py --named --set MEMTRIO_RETRIEVAL_TOPIC_QUERY=false
    python tools/bench_recall.py --anchors --sizes 10000 --calls 100 --rounds 5

``--anchors`` (issue #33) measures what code anchors add to ``recall``: the
session's repository is a real Git checkout (a copy of this repository's
``actors/`` committed in a temporary repository, indexed by the real parser
workers), the memories are in its scope, and two servers run side by side in
it on copies of the same store: one whose memories have no anchors, one whose
every memory has 1-2 anchors (real ``Anchor`` rows, written with the store's
``Anchors.set``, digests from the code index) to functions, methods and
classes of the checkout. After anchoring, a few files are edited (bodies
changed, a function deleted), so some anchors are ``changed`` or ``deleted``
and their statuses are computed for real. Once both servers are idle (the
background work their first recall starts, the ranker's vector index build,
is done: it would otherwise be counted against the server started last), the
two servers get the same queries, alternating which goes first, for
``--rounds`` rounds of ``--calls`` recalls; the p50 ratio (anchors / none) is
the issue's goal (<= 1.10). Server CPU is reported overall and per round.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import numpy as np
import trio
from mcp import Client, StdioServerParameters
from memtrio.actors.code.anchors import CodeTarget
from memtrio.actors.code.standalone import standalone_service
from memtrio.actors.embedder.feature import FEATURE as EMBEDDER_FEATURE
from memtrio.actors.embedder.handle import EMBEDDER
from memtrio.actors.ranker.service import INDEX_DIR
from memtrio.actors.store.direct import Direct
from memtrio.actors.store.domain.scopes import GLOBAL, default_scope
from memtrio.actors.store.interfaces.anchors import Anchor
from memtrio.actors.store.sqlite import schema
from memtrio.actors.store.sqlite.db import db_path
from memtrio.supervisors import config as config_mod
from memtrio.supervisors.app import build_context, open_app

TOPICS = [
    "The {svc} service retries failed {thing} requests {n} times with exponential backoff.",
    "We decided to cache {thing} lookups in {store} for {n} minutes to cut latency.",
    "Deploys of {svc} are blocked when the {thing} migration has not finished.",
    "The {svc} team owns the {thing} schema and reviews every change to it.",
    "Flaky test in {svc}: the {thing} fixture leaks a {store} connection after {n} runs.",
    "Use the {store} client from the shared library; hand-rolled {thing} clients broke twice.",
    "Incident {n}: {svc} ran out of memory while parsing large {thing} payloads.",
    "The {thing} endpoint of {svc} must stay backwards compatible until version {n}.",
    "Logs from {svc} go to {store}; keep {thing} identifiers out of them for privacy.",
    "Feature flag {thing}-{n} gates the new {svc} rollout; remove it after the launch.",
]
SERVICES = [
    "billing",
    "auth",
    "search",
    "checkout",
    "inventory",
    "gateway",
    "notifications",
    "reporting",
    "ingest",
    "scheduler",
]
THINGS = [
    "invoice",
    "token",
    "webhook",
    "order",
    "session",
    "payment",
    "profile",
    "export",
    "upload",
    "catalog",
    "ledger",
    "quota",
]
STORES = ["Redis", "Postgres", "S3", "Kafka", "Elasticsearch", "memcached", "SQLite", "BigQuery"]
QUERIES = [
    "why do payment callbacks get sent more than once",
    "where should cached lookups live and for how long",
    "who is responsible for changing the database schema",
    "what causes the out of memory crash when parsing uploads",
    "which client library must be used to talk to the queue",
    "how long do we keep old API versions working",
    "what must never be written to the logs",
    "when can the rollout flag be removed",
    "why are deployments blocked",
    "tests that leak connections",
]


LONG_SENTENCES = 20  # a long memory: about 400 tokens
LONG_WINDOWS = 4  # its windows of 128 tokens (stride 96)


def now() -> float:
    return time.time()


def template_texts(rng: random.Random, count: int) -> list[str]:
    out = []
    for i in range(count):
        t = TOPICS[i % len(TOPICS)]
        out.append(
            t.format(
                svc=rng.choice(SERVICES),
                thing=rng.choice(THINGS),
                store=rng.choice(STORES),
                n=rng.randint(2, 99),
            )
        )
    return out


async def embed_all(home: Path, texts: list[str]) -> tuple[np.ndarray, str, str, dict[str, float]]:
    """Embed ``texts`` with the embedder pool; also measure batched and single throughput."""
    cfg = config_mod.load(home, env={"MEMTRIO_EMBEDDINGS": "on"})
    app = build_context(cfg, home)
    async with open_app(app, [EMBEDDER_FEATURE]):
        pool = app.service(EMBEDDER)
        await pool.load()
        started = time.perf_counter()
        chunks = [await pool.embed(texts[i : i + 512]) for i in range(0, len(texts), 512)]
        batched = len(texts) / (time.perf_counter() - started)
        single_texts = texts[:200]
        started = time.perf_counter()
        for text in single_texts:
            await pool.embed([text])
        single = len(single_texts) / (time.perf_counter() - started)
        vectors = np.concatenate([c.vectors for c in chunks])
        return (
            vectors,
            pool.model,
            pool.revision,
            {"batched_texts_per_s": round(batched, 1), "single_texts_per_s": round(single, 1)},
        )


def build_store(
    home: Path,
    size: int,
    base: list[str],
    base_vecs: np.ndarray,
    model: str,
    revision: str,
    seed: int,
    long_share: float = 0.0,
    scope: str = GLOBAL,
) -> None:
    """The synthetic store; its memories, entities and relations are in ``scope``."""
    rng = np.random.default_rng(seed)
    prng = random.Random(seed)
    conn = sqlite3.connect(str(db_path(home)), isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = OFF")
    schema.migrate(conn)
    conn.execute("BEGIN")
    if scope == GLOBAL:
        conn.execute("INSERT INTO scopes (id, name) VALUES (1, 'global')")
    else:  # the repository's scope is the one every row is linked to (id 1)
        conn.execute("INSERT INTO scopes (id, name) VALUES (1, ?), (2, 'global')", (scope,))
    n_entities = max(50, size // 50)
    t = now()
    entity_names = [f"{prng.choice(SERVICES)}-{prng.choice(THINGS)}-{i}" for i in range(n_entities)]
    conn.executemany(
        "INSERT INTO entities (id, name, canonical_name, kind, created_at, updated_at) VALUES (?, ?, ?, 'component', ?, ?)",
        [(i + 1, name, name, t, t) for i, name in enumerate(entity_names)],
    )
    conn.executemany(
        "INSERT INTO entity_scopes VALUES (?, 1)", [(i + 1,) for i in range(n_entities)]
    )
    n_relations = n_entities // 2
    rel_rows = set()
    while len(rel_rows) < n_relations:
        a, b = prng.randrange(n_entities) + 1, prng.randrange(n_entities) + 1
        if a != b:
            rel_rows.add((a, b))
    conn.executemany(
        "INSERT INTO relations (id, source_id, target_id, relation_type, created_at) VALUES (?, ?, ?, 'depends_on', ?)",
        [(i + 1, a, b, t) for i, (a, b) in enumerate(sorted(rel_rows))],
    )
    conn.executemany(
        "INSERT INTO relation_scopes VALUES (?, 1)", [(i + 1,) for i in range(n_relations)]
    )
    dim = base_vecs.shape[1]

    def vec_rows(kind: str, ids: range, vecs: np.ndarray) -> list[tuple[Any, ...]]:
        return [
            (kind, i, model, revision, dim, v.astype(np.float32).tobytes())
            for i, v in zip(ids, vecs, strict=True)
        ]

    ent_vecs = base_vecs[rng.integers(0, len(base_vecs), n_entities)] + rng.normal(
        0, 0.05, (n_entities, dim)
    )
    ent_vecs /= np.linalg.norm(ent_vecs, axis=1, keepdims=True)
    conn.executemany(
        "INSERT INTO vectors VALUES (?, ?, ?, ?, ?, ?)",
        vec_rows("entity", range(1, n_entities + 1), ent_vecs),
    )
    rel_vecs = base_vecs[rng.integers(0, len(base_vecs), n_relations)] + rng.normal(
        0, 0.05, (n_relations, dim)
    )
    rel_vecs /= np.linalg.norm(rel_vecs, axis=1, keepdims=True)
    conn.executemany(
        "INSERT INTO vectors VALUES (?, ?, ?, ?, ?, ?)",
        vec_rows("relation", range(1, n_relations + 1), rel_vecs),
    )
    batch = 10_000
    for start in range(0, size, batch):
        ids = range(start + 1, min(start + batch, size) + 1)
        which = rng.integers(0, len(base), len(ids))
        texts = [f"{base[w]} (ticket {prng.randint(1000, 99999)})" for w in which]
        conn.executemany(
            "INSERT INTO memories (id, content, memory_type, created_at, updated_at) VALUES (?, ?, 'observation', ?, ?)",
            [(i, text, t, t) for i, text in zip(ids, texts, strict=True)],
        )
        conn.executemany("INSERT INTO memory_scopes VALUES (?, 1)", [(i,) for i in ids])
        links = []
        for i in ids:
            # Zipf-like popularity: a few entities are hubs, most are rare.
            for e in set(
                int(min(n_entities, rng.zipf(1.6)))
                if prng.random() < 0.2
                else prng.randrange(n_entities) + 1
                for _ in range(prng.randint(1, 3))
            ):
                links.append((i, e))
        conn.executemany("INSERT OR IGNORE INTO memory_entities VALUES (?, ?)", links)
        conn.executemany(
            "INSERT INTO memory_relations VALUES (?, ?)",
            [(i, prng.randrange(n_relations) + 1) for i in ids if prng.random() < 0.1],
        )
        vecs = base_vecs[which] + rng.normal(0, 0.02, (len(ids), dim))
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        conn.executemany(
            "INSERT INTO vectors VALUES (?, ?, ?, ?, ?, ?)", vec_rows("memory", ids, vecs)
        )
        # Long memories (a share of them): LONG_SENTENCES template sentences, stored as
        # LONG_WINDOWS windows like remember stores them (chunk 0 above, the rest here).
        long_ids = [i for i in ids if prng.random() < long_share]
        chunk_rows = []
        for i in long_ids:
            picks = rng.integers(0, len(base), LONG_SENTENCES)
            text = " ".join(base[w] for w in picks)
            conn.execute("UPDATE memories SET content = ? WHERE id = ?", (text, i))
            cvecs = base_vecs[picks[:: LONG_SENTENCES // LONG_WINDOWS][1:LONG_WINDOWS]]
            cvecs = cvecs + rng.normal(0, 0.02, cvecs.shape)
            cvecs /= np.linalg.norm(cvecs, axis=1, keepdims=True)
            chunk_rows += [
                ("memory", i, j + 1, model, revision, dim, v.astype(np.float32).tobytes())
                for j, v in enumerate(cvecs)
            ]
        conn.executemany("INSERT INTO vector_chunks VALUES (?, ?, ?, ?, ?, ?, ?)", chunk_rows)
    conn.execute("COMMIT")
    conn.close()


# --named: each query names a person, as "Alice: why are deployments blocked" (the
# re-ranker then also embeds the query without its names: `rerank.topic_query`)
NAMES = ["Alice", "Bob", "Carol", "Dave"]


def server_params(
    home: Path, settings: dict[str, str] | None = None, repo: Path | None = None
) -> StdioServerParameters:
    """A ``memtrio mcp`` on ``home``; in ``repo`` with the code feature on, if given."""
    env = {k: os.environ[k] for k in ("PATH", "HOME", "PYTHONPATH") if k in os.environ}
    env.update(
        {
            "MEMTRIO_HOME": str(home),
            "MEMTRIO_EMBEDDINGS": "on",
            "MEMTRIO_CODE": "off" if repo is None else "on",
            "MEMTRIO_LOG_LEVEL": "warning",
            "MEMTRIO_SERVE_ATTACH": "off",  # the embedded server, no owner left behind
            **(settings or {}),
        }
    )
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "memtrio.supervisors.cli", "mcp"],
        env=env,
        cwd=str(home if repo is None else repo),
    )


def server_pid(exclude: set[int] | None = None) -> int | None:
    """This process's ``memtrio mcp`` child (one not in ``exclude``)."""
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if exclude and entry.name.isdigit() and int(entry.name) in exclude:
            continue
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == me and b"memtrio.supervisors.cli" in cmdline:
            return int(entry.name)
    return None


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` so far (immune to other processes' load)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


async def measure_server(
    home: Path, calls: int, rng: random.Random, args: argparse.Namespace
) -> dict[str, Any]:
    settings = dict(item.split("=", 1) for item in args.set)
    async with Client(server_params(home, settings), read_timeout_seconds=600) as client:
        pid = server_pid()
        started = time.perf_counter()
        first = await client.call_tool("recall", {"query": "warm up", "limit": 10})
        assert not first.is_error, first.content
        first_recall_s = time.perf_counter() - started
        remember_ms = []
        for i, text in enumerate(template_texts(rng, calls)):
            t0 = time.perf_counter()
            out = await client.call_tool(
                "remember",
                {"content": f"{text} (bench {i})", "entities": [f"bench-entity-{i % 7}"]},
            )
            remember_ms.append((time.perf_counter() - t0) * 1000)
            assert not out.is_error, out.content
        # The ranker builds the memories' hnsw graph in the background after the cache
        # loads (minutes at 100,000: the first start of a store that has none saved) and
        # searches exactly meanwhile; unless told not to, wait for it (the server idle).
        settle_s = await settled([pid], SETTLE_MAX_S) if pid and not args.no_settle else 0.0
        recall_ms = []
        rankings = set()
        cpu_before = cpu_seconds(pid) if pid else float("nan")
        for i in range(calls):
            query = QUERIES[i % len(QUERIES)]
            if args.named:
                query = f"{NAMES[i % len(NAMES)]}: {query}"
            t0 = time.perf_counter()
            out = await client.call_tool("recall", {"query": query, "limit": 10})
            recall_ms.append((time.perf_counter() - t0) * 1000)
            assert not out.is_error, out.content
            rankings.add(out.structured_content["ranking"])
        recall_cpu_ms = (cpu_seconds(pid) - cpu_before) * 1000 / calls if pid else float("nan")
        rss = peak_rss_mb(pid) if pid else float("nan")
        load = os.getloadavg()[0]
    return {
        "first_recall_s (cache load + model load)": round(first_recall_s, 2),
        "remember_p50_ms": round(statistics.median(remember_ms), 1),
        "remember_p99_ms": round(pct(remember_ms, 99), 1),
        "settled_s": settle_s,
        "recall_p50_ms": round(statistics.median(recall_ms), 1),
        "recall_p99_ms": round(pct(recall_ms, 99), 1),
        "recall_server_cpu_ms": round(recall_cpu_ms, 1),
        "recall_ranking": sorted(rankings),
        "load_avg_1min": round(load, 2),
        "server_peak_rss_mb": round(rss, 1),
    }


# -- --anchors: recall with code anchors on every memory (issue #33) -----------------

GIT = ["git", "-c", "user.email=bench@example.com", "-c", "user.name=bench"]
GIT += ["-c", "commit.gpgsign=false"]
ANCHOR_KINDS = ("function", "method", "class")
EDITED_FILES = 12  # files edited after anchoring: their anchored symbols become stale


def run_git(root: Path, *args: str) -> str:
    return subprocess.run(
        [*GIT, "-C", str(root), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def make_checkout(repo: Path) -> Path:
    """A Git repository holding a copy of this repository's ``actors/`` (real source
    files), in one commit; its resolved root."""
    source = Path(__file__).resolve().parent.parent / "actors"
    shutil.copytree(source, repo / "actors", ignore=shutil.ignore_patterns("__pycache__"))
    run_git(repo.parent, "init", "-q", "-b", "main", str(repo))
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-qm", "a copy of memtrio's actors/")
    return repo.resolve()


async def code_targets(home: Path, repo: Path) -> list[CodeTarget]:
    """The functions, methods and classes of ``repo`` (each once in its file), as the
    code index has them (with their digests)."""
    async with standalone_service(home, file_timeout=30.0, name="bench") as (service, _):
        report = await service.refresh(repo)
        cid = await service.db(service.index.checkout_id, str(repo))
        targets = []
        for path in sorted(await service.db(service.index.file_map, cid)):
            rows = await service.db(service.index.places_in, cid, path)
            names = [r[1] for r in rows]
            targets += [
                CodeTarget(path, qname, kind, digest)
                for _, qname, kind, digest in rows
                if kind in ANCHOR_KINDS and names.count(qname) == 1
            ]
    print(f"indexed {report.indexed} files: {len(targets)} symbols", file=sys.stderr)
    return targets


def anchor_all(home: Path, size: int, targets: list[CodeTarget], commit: str, seed: int) -> int:
    """Give each of the ``size`` memories 1-2 anchors to ``targets`` through the store's
    `Anchors.set`; the anchor rows written."""
    prng = random.Random(seed)
    written = time.time()

    def write(tx: Any) -> int:
        rows = 0
        for memory_id in range(1, size + 1):
            picks = prng.sample(targets, prng.randint(1, 2))
            tx.anchors.set(
                memory_id,
                [Anchor(t.path, t.symbol, t.kind, commit, t.digest, written) for t in picks],
            )
            rows += len(picks)
        return rows

    with Direct(db_path(home)) as store:
        return store.write(write)


def edit_checkout(repo: Path, targets: list[CodeTarget], seed: int) -> tuple[int, int]:
    """Edit `EDITED_FILES` anchored files after anchoring (uncommitted, as an agent's
    work in progress): a line added to every function's body, and one function deleted
    in each. (files edited, symbols in them)."""
    prng = random.Random(seed)
    paths = sorted({t.path for t in targets if t.kind == "function"})
    chosen = prng.sample(paths, min(EDITED_FILES, len(paths)))
    symbols = 0
    for path in chosen:
        file = repo / path
        lines = file.read_text().splitlines(keepends=True)
        out = []
        for line in lines:
            out.append(line)
            stripped = line.lstrip()
            if stripped.startswith(("def ", "async def ")) and line.rstrip().endswith(":"):
                indent = line[: len(line) - len(stripped)] + "    "
                out.append(f"{indent}_edited = True  # bench: the body changed\n")
        file.write_text("".join(out))
        symbols += sum(1 for t in targets if t.path == path)
    return len(chosen), symbols


IDLE_CPU_S = 0.05  # a server using less CPU than this over a second is idle
SETTLE_MAX_S = 900.0  # an hnsw graph of 100,000 memories takes minutes on 2 busy cores


async def settled(pids: list[int], most: float = SETTLE_MAX_S) -> float:
    """Wait until every server of ``pids`` is idle (its background work after the first
    recall done: the ranker builds its vector index in a thread then, which would
    otherwise be counted against whichever server started last), at most ``most``
    seconds; the seconds waited."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < most:
        before = [cpu_seconds(pid) for pid in pids]
        await trio.sleep(1.0)
        if all(cpu_seconds(pid) - b < IDLE_CPU_S for pid, b in zip(pids, before, strict=True)):
            break
    return round(time.perf_counter() - t0, 1)


def server_pids() -> set[int]:
    found: set[int] = set()
    while (pid := server_pid(found)) is not None:
        found.add(pid)
    return found


async def measure_anchors(
    plain: Path, anchored: Path, repo: Path, args: argparse.Namespace
) -> dict[str, Any]:
    """Recall on both stores side by side: the same queries, alternating which server
    goes first, ``args.rounds`` rounds of ``args.calls`` recalls."""
    settings = dict(item.split("=", 1) for item in args.set)
    names = ("none", "anchors")
    async with AsyncExitStack() as stack:
        clients = []
        pids = []
        first_s = []
        for home in (plain, anchored):  # one after the other: each one's pid is known
            before = server_pids()
            client = await stack.enter_async_context(
                Client(server_params(home, settings, repo), read_timeout_seconds=600)
            )
            t0 = time.perf_counter()
            out = await client.call_tool("recall", {"query": "warm up", "limit": 10})
            assert not out.is_error, out.content
            first_s.append(round(time.perf_counter() - t0, 2))
            (pid,) = server_pids() - before
            clients.append(client)
            pids.append(pid)
        settle_s = await settled(pids)
        cpu = {pid: cpu_seconds(pid) for pid in pids}
        stale_seen = 0
        shown = 0
        rounds: list[dict[str, float]] = []
        all_ms: dict[str, list[float]] = {n: [] for n in names}
        cpu_ms: dict[str, float] = dict.fromkeys(names, 0.0)
        cpu_rounds: list[dict[str, float]] = []
        for r in range(args.rounds):
            ms: dict[str, list[float]] = {n: [] for n in names}
            round_cpu = {pid: cpu_seconds(pid) for pid in pids}
            for i in range(args.calls):
                query = QUERIES[(r * args.calls + i) % len(QUERIES)]
                order = (0, 1) if (r * args.calls + i) % 2 == 0 else (1, 0)
                for k in order:
                    t0 = time.perf_counter()
                    out = await clients[k].call_tool("recall", {"query": query, "limit": 10})
                    ms[names[k]].append((time.perf_counter() - t0) * 1000)
                    assert not out.is_error, out.content
                    if k == 1:
                        memories = out.structured_content["memories"]
                        shown += sum(1 for m in memories if m.get("code"))
                        stale_seen += sum(1 for m in memories if m.get("stale"))
                        assert all("code" in m for m in memories), memories[:1]
                    else:
                        assert not any("code" in m for m in out.structured_content["memories"])
            rounds.append({n: statistics.median(ms[n]) for n in names})
            cpu_rounds.append(
                {
                    n: (cpu_seconds(pid) - round_cpu[pid]) * 1000 / args.calls
                    for n, pid in zip(names, pids, strict=True)
                }
            )
            for n in names:
                all_ms[n] += ms[n]
        for name, pid in zip(names, pids, strict=True):
            cpu_ms[name] = (cpu_seconds(pid) - cpu[pid]) * 1000 / (args.rounds * args.calls)
        load = os.getloadavg()[0]
    p50 = {n: statistics.median(all_ms[n]) for n in names}
    return {
        "first_recall_s (none, anchors)": first_s,
        "settled_s (both idle before measuring)": settle_s,
        "recalls_per_server": args.rounds * args.calls,
        "p50_ms_by_round (none/anchors)": [
            f"{row['none']:.1f}/{row['anchors']:.1f}" for row in rounds
        ],
        "recall_p50_ms_none": round(p50["none"], 1),
        "recall_p50_ms_anchors": round(p50["anchors"], 1),
        "p50_ratio": round(p50["anchors"] / p50["none"], 3),
        "median_round_ratio": round(
            statistics.median(row["anchors"] / row["none"] for row in rounds), 3
        ),
        "recall_p99_ms_none": round(pct(all_ms["none"], 99), 1),
        "recall_p99_ms_anchors": round(pct(all_ms["anchors"], 99), 1),
        "server_cpu_ms_per_recall_none": round(cpu_ms["none"], 2),
        "server_cpu_ms_per_recall_anchors": round(cpu_ms["anchors"], 2),
        "server_cpu_ms_by_round (none/anchors)": [
            f"{row['none']:.1f}/{row['anchors']:.1f}" for row in cpu_rounds
        ],
        "memories_shown_with_anchors": shown,
        "of_them_stale": stale_seen,
        "load_avg_1min": round(load, 2),
    }


async def anchors_run(args: argparse.Namespace) -> list[dict[str, Any]]:
    workdir = Path(tempfile.mkdtemp(prefix="memtrio-bench-anchors-"))
    try:
        return await anchors_in(workdir, args)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


async def anchors_in(workdir: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    rng = random.Random(7)
    base = template_texts(rng, args.templates)
    vecs, model, revision, _ = await embed_all(workdir / "embed", base)
    repo = make_checkout(workdir / "repo")
    scope = default_scope(repo)
    commit = run_git(repo, "rev-parse", "HEAD")
    results = []
    for size in args.sizes:
        plain, anchored = workdir / f"n{size}-none", workdir / f"n{size}-anchors"
        plain.mkdir(parents=True)
        build_store(plain, size, base, vecs, model, revision, seed=size, scope=scope)
        anchored.mkdir(parents=True)
        shutil.copy2(db_path(plain), db_path(anchored))
        targets = await code_targets(anchored, repo)
        rows = anchor_all(anchored, size, targets, commit, seed=size)
        files, symbols = edit_checkout(repo, targets, seed=size)
        print(
            f"{size} memories, {rows} anchors to {len(targets)} symbols; "
            f"edited {files} files holding {symbols} of the symbols",
            file=sys.stderr,
        )
        row = {
            "memories": size,
            "anchors": rows,
            "symbols": len(targets),
            **await measure_anchors(plain, anchored, repo, args),
        }
        run_git(repo, "checkout", "-q", "--", ".")  # the next size starts from the commit
        print(json.dumps(row), file=sys.stderr)
        results.append(row)
    return results


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    workdir = Path(tempfile.mkdtemp(prefix="memtrio-bench-"))
    try:  # a 100,000-memory store is most of a gigabyte: none is left in the temporary dir
        return await sizes_in(workdir, args)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


async def sizes_in(workdir: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    rng = random.Random(7)
    base = template_texts(rng, args.templates)
    vecs, model, revision, throughput = await embed_all(workdir / "embed", base)
    results = []
    for size in args.sizes:
        home = workdir / f"n{size}"
        home.mkdir(parents=True)
        kept = None
        if args.keep:
            kept = Path(args.keep) / f"n{size}-t{args.templates}-long{args.long_share}-{model}"
        started = time.perf_counter()
        if kept is not None and db_path(kept).exists():
            shutil.copytree(kept, home, dirs_exist_ok=True)
            print(f"copied {size} memories from {kept}", file=sys.stderr)
        else:
            build_store(
                home, size, base, vecs, model, revision, seed=size, long_share=args.long_share
            )
            print(
                f"built {size} memories in {time.perf_counter() - started:.1f} s", file=sys.stderr
            )
            if kept is not None:
                shutil.copytree(home, kept)
        row = {"memories": size, **await measure_server(home, args.calls, rng, args), **throughput}
        if kept is not None and not (kept / INDEX_DIR).exists() and (home / INDEX_DIR).exists():
            shutil.copytree(home / INDEX_DIR, kept / INDEX_DIR)  # the graph the server built
        print(json.dumps(row), file=sys.stderr)
        results.append(row)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[10_000, 100_000]
    )
    parser.add_argument("--calls", type=int, default=200, help="remember and recall calls per size")
    parser.add_argument(
        "--templates",
        type=int,
        default=2000,
        help="distinct sentences embedded for the synthetic store",
    )
    parser.add_argument(
        "--long-share",
        type=float,
        default=0.1,
        help=f"share of memories that are long ({LONG_SENTENCES} sentences, {LONG_WINDOWS} embedding windows)",
    )
    parser.add_argument(
        "--named", action="store_true", help='queries that name a person ("Alice: why ...")'
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a MEMTRIO_* setting of the measured server, e.g. MEMTRIO_RETRIEVAL_TOPIC_QUERY=false",
    )
    parser.add_argument(
        "--keep",
        metavar="DIR",
        help="keep each store built (and the hnsw graph its server saves) in DIR and measure "
        "a copy of it in the next runs with the same size, templates and long share",
    )
    parser.add_argument(
        "--no-settle",
        action="store_true",
        help="measure recall at once, while the ranker may still build its hnsw graph "
        "in the background (searching exactly meanwhile), as before issue #38's fit",
    )
    parser.add_argument(
        "--anchors",
        action="store_true",
        help="recall with and without code anchors on every memory, side by side (issue #33)",
    )
    parser.add_argument(
        "--rounds", type=int, default=5, help="--anchors: rounds of --calls recalls per server"
    )
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    bad = [s for s in args.set if not s.startswith("MEMTRIO_") or "=" not in s]
    if bad:
        parser.error(f"--set {bad[0]!r}: give MEMTRIO_NAME=VALUE")
    results = trio.run(anchors_run if args.anchors else main_async, args)
    if args.anchors:
        for row in results:
            for key, value in row.items():
                print(f"{key}: {value}")
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2))
        return 0
    keys = list(results[0])
    print("| " + " | ".join(keys) + " |")
    print("| " + " | ".join("---" for _ in keys) + " |")
    for row in results:
        print("| " + " | ".join(str(row[k]) for k in keys) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
