"""What one recall costs on a big store: no Python work per posting, per hub peer, per link
or per vector where one batch step does it (issue #38: recall p50 at 100,000 memories).

The costs are counted, not timed (timings flake on shared cores): the Python function
calls a step makes (`sys.setprofile`; a C function such as numpy's is not one), and the
backend lookups. Each test also checks the step's result against the plain computation.
"""

from __future__ import annotations

import math
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from memtrio.actors.ranker import mmr, rerank
from memtrio.actors.ranker import rank as rank_mod
from memtrio.actors.ranker.graph import RecallCache, node
from memtrio.actors.store.direct import Direct
from memtrio.actors.store.interfaces import StoreTx
from memtrio.actors.store.interfaces.fulltext import TextQuery
from memtrio.actors.store.sqlite.snapshot import SqliteSnapshot

DIM = 8


class Calls:
    """Python function calls made inside `counting` (generator resumptions count too)."""

    def __init__(self) -> None:
        self.count = 0


@contextmanager
def counting() -> Iterator[Calls]:
    calls = Calls()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            calls.count += 1

    sys.setprofile(profile)
    try:
        yield calls
    finally:
        sys.setprofile(None)


# -- FTS5 seeds on a big store: the postings of a common word scored in numpy -----------


def fill(direct: Direct, contents: list[str]) -> list[int]:
    def op(tx: StoreTx) -> list[int]:
        sql = (
            "INSERT INTO memories (content, memory_type, importance, created_at, updated_at)"
            " VALUES (?, 'observation', 0, 1, 1) RETURNING id"
        )
        return [int(tx.conn.execute(sql, (c,)).fetchone()[0]) for c in contents]

    return direct.write(op)


def test_window_scores_call_nothing_per_posting_and_sum_the_idfs(tmp_path: Path) -> None:
    store = Direct(tmp_path / "memtrio.sqlite")
    try:
        # 3,000 memories hold "deploy", every third "rollback", every fifth "canary"
        texts = [
            " ".join(
                ["deploy"] + ["rollback"] * (i % 3 == 0) + ["canary"] * (i % 5 == 0) + [f"n{i}"]
            )
            for i in range(3_000)
        ]
        ids = fill(store, texts)
        low = ids[1_000]
        query = TextQuery(["deploy", "rollback", "canary"], ["deploy", "rollback", "canary"])
        with counting() as calls:
            seeds = store.read(lambda tx: tx.fulltext.seed_memories(query, low, 50))
        assert calls.count < 300, calls.count  # not one per posting (2,000 in the window)
    finally:
        store.close()
    # the plain computation: each phrase's IDF from its share of the window, summed per
    # memory; best first, ties to the newest
    newest, window = ids[-1], ids[-1] - low + 1
    expected: dict[int, float] = {}
    phrases = [
        [m for m, t in zip(ids, texts, strict=True) if m >= low and word in t.split()]
        for word in ("deploy", "rollback", "canary")
    ]
    pairs = [  # NEAR(a b) of neighbouring query words: both words in a short memory
        [m for m, t in zip(ids, texts, strict=True) if m >= low and a in t and b in t]
        for a, b in (("deploy", "rollback"), ("rollback", "canary"))
    ]
    for found in [*phrases, *pairs]:
        if not found:
            continue
        n = min(len(found) * newest / window, newest)
        idf = math.log(1 + (newest - n + 0.5) / (n + 0.5))
        for m in found:
            expected[m] = expected.get(m, 0.0) + idf
    best = sorted(expected.items(), key=lambda kv: (-kv[1], -kv[0]))[:50]
    assert [(s.id, s.score) for s in seeds] == best


# -- PageRank's neighbourhood and subgraph: no call per hub peer or per link --------------


def hub_cache(members: int) -> tuple[RecallCache, dict[str, np.ndarray]]:
    """An entity linked to ``members`` memories, each of them also in a relation of 10."""
    cache = RecallCache("m", "r", DIM)
    hub = node("entity", 1)
    for m in range(1, members + 1):
        cache._link(node("memory", m), hub)
        cache._link(node("memory", m), node("relation", 1 + m // 10))
    for r in range(1, members // 10 + 2):
        cache._link(node("relation", r), node("entity", 2))
    masks = {
        "memory": np.ones(members + 1, dtype=bool),
        "entity": np.ones(3, dtype=bool),
        "relation": np.ones(members // 10 + 2, dtype=bool),
    }
    return cache, masks


def test_the_neighbourhood_walk_calls_nothing_per_peer_of_a_hub() -> None:
    cache, masks = hub_cache(3_000)
    with counting() as calls:
        nodes = rank_mod.neighbourhood(cache, [node("entity", 1)], masks)
    assert len(nodes) == rank_mod.MAX_NEIGHBOURHOOD
    assert calls.count < 50, calls.count  # 1,500 peers entered, none a Python call
    assert nodes[0] == node("entity", 1)
    assert set(nodes[1:]) <= cache.adj[node("entity", 1)] | {
        p for m in cache.adj[node("entity", 1)] for p in cache.adj[m]
    }


def test_pagerank_reads_the_subgraph_without_a_call_per_link() -> None:
    cache, masks = hub_cache(1_000)
    reset = {node("memory", m): 1.0 for m in range(1, 41)}
    with counting() as calls:
        nodes, ranks, _ = rank_mod.personalized_pagerank(cache, reset, masks, 0.5)
    links = sum(len(cache.adj[n]) for n in nodes.tolist())
    assert calls.count < links / 2, (calls.count, links)
    # the seeds hold most of the mass, and their relations, entities and
    # the hub's other memories the rest
    rank_of = dict(zip(nodes.tolist(), ranks.tolist(), strict=True))
    assert math.isclose(sum(ranks), 1.0)
    assert min(rank_of[n] for n in reset) > max(
        rank_of[node("memory", m)] for m in range(41, 1_001) if node("memory", m) in rank_of
    )


# -- maximal marginal relevance: the pool's vectors in one batch lookup --------------------


def unit(rng: np.random.Generator, rows: int = 1) -> np.ndarray:
    v = rng.normal(size=(rows, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def counted(obj: Any, name: str, tally: dict[str, int]) -> None:
    original: Callable[..., Any] = getattr(obj, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        tally[name] = tally.get(name, 0) + 1
        return original(*args, **kwargs)

    setattr(obj, name, wrapper)


def test_mmr_reads_its_pool_in_one_lookup_windows_and_all() -> None:
    rng = np.random.default_rng(3)
    cache = RecallCache("m", "r", DIM)
    index = cache.index["memory"]
    for m in range(1, 31):
        index.upsert(m, unit(rng, 3 if m % 4 == 0 else 1))  # every fourth: three windows
    index.upsert(31, index.vectors(1)[0])  # a copy of memory 1
    pool = list(range(1, 32))  # memory 32 has no vector: similar to nothing
    expected = [index.vectors(m) for m in [*pool, 32]]
    tally: dict[str, int] = {}
    counted(index.backend, "get", tally)
    counted(index.backend, "get_many", tally)
    got = index.vectors_of([*pool, 32])
    assert tally == {"get_many": 1}
    for want, have in zip(expected, got, strict=True):
        assert (want is None and have is None) or np.array_equal(want, have)
    ranked = [(m, 1.0 - m / 100) for m in [*pool, 32]]
    tally.clear()
    out = mmr.diversify(cache, ranked, 10, 0.5, 32)
    assert tally == {"get_many": 1}
    assert 31 not in [m for m, _ in out]  # the copy of memory 1 is kept out of the first 10
    assert out[0] == (1, 0.99)


# -- the re-ranker's features of notes: no thread walk, each text read once ----------------


def test_the_features_of_notes_walk_no_thread_and_read_each_text_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only a memory that starts with a speaker label can be a turn of a conversation; the
    neighbour features of any other are 0. So the candidates of a store of notes (one
    thread: written a second apart) are not walked one by one along their thread, and
    their texts are read once, for their shapes and their coverage of the query at once.
    The best cosine the cosine gaps are measured from is still over the candidates'
    neighbours one place away: the index may have passed over the nearest memory."""
    rng = np.random.default_rng(5)
    cache = RecallCache("m", "r", DIM)
    index = cache.index["memory"]
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE memories (id INTEGER PRIMARY KEY, content TEXT)")
    q = unit(rng)[0]
    for m in range(1, 301):
        cache.items["memory"].set(m, [1], 0, 1000.0 + m)
        conn.execute(
            "INSERT INTO memories VALUES (?, ?)", (m, f"Deploy note {m}: roll back step {m % 7}.")
        )
        index.upsert(m, q if m == 100 else unit(rng))
    index.upsert(99, q + unit(rng)[0] * 0.2)  # near the query, next to the nearest
    allowed = cache.items["memory"].allowed(None)
    cos = dict(zip(range(1, 301), index.best_cosines(q, list(range(1, 301))).tolist(), strict=True))
    # the nearest memory (100) missed by the index: the 50 next ones, 99 first of them
    order = sorted((m for m in cos if m != 100), key=lambda m: -cos[m])[: rerank.POOL]
    assert order[0] == 99
    dense = (np.array(order), np.array([cos[m] for m in order]))
    lexical = [(m, 10.0 - r / 10) for r, m in enumerate(range(3, 300, 7)) if m not in (100, 101)]
    snap = SqliteSnapshot(conn)
    reads: dict[str, int] = {}
    counted(snap, "text_ends", reads)
    monkeypatch.setattr(rerank, "thread_neighbours", rerank.thread_neighbours)  # restored after
    counted(rerank, "thread_neighbours", reads)
    ids, rows, lenders, turns = rerank.features(
        cache, snap, "roll back step 3", q, allowed, lexical, dense
    )
    assert reads == {"text_ends": 1}  # no walk along the thread, one read of the texts
    assert set(ids) == set(order) | {m for m, _ in lexical} and 100 not in ids
    assert turns == set() and lenders == {}
    at = {m: i for i, m in enumerate(ids)}
    column = rerank.FEATURES.index
    # the gap to the nearest memory, a neighbour of a candidate that is not one
    assert rows[at[99], column("note_cosine_gap")] == pytest.approx(cos[99] - cos[100])
    assert rows[at[99], column("note_cosine_gap")] < 0
    # a note's evidence is in its own columns, none in a turn's or its neighbours'
    own = [column(f) for f in (*rerank.OWN_FEATURES, *rerank.NEIGHBOUR_FEATURES, "subject")]
    assert not rows[:, own].any()
    assert rows[at[3], column("note_lexical")] == 1.0 and rows[at[3], column("note_coverage")] > 0


# -- numpy's BLAS in a memtrio process: one thread ------------------------------------------

BLAS_THREADS = """
import os
import memtrio.actors.ranker.rank
import numpy as np
a = np.ones((1500, 1500), dtype=np.float32)
a @ a  # a product big enough for OpenBLAS to share out, had it threads
print(sum(1 for _ in os.scandir("/proc/self/task")))
"""


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="OpenBLAS starts no thread on one core")
def test_a_memtrio_process_multiplies_matrices_on_its_own_thread() -> None:
    """Each of the ranker's small products handed to a second BLAS thread and back cost
    ten times its work on busy shared cores; the actors package keeps BLAS to one thread
    (``OPENBLAS_NUM_THREADS``, unless the user set it)."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    out = subprocess.run(
        [sys.executable, "-c", BLAS_THREADS], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1"]  # the main thread only
    env["OPENBLAS_NUM_THREADS"] = "2"  # a user's own setting is kept
    out = subprocess.run(
        [sys.executable, "-c", BLAS_THREADS], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.stdout.split() == ["2"], out.stderr
