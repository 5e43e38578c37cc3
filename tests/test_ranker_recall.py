"""The ranker on its own: a store database written with plain SQL, the real model.

Changes are announced the way the store announces them (`Change` records to
the ranker's listener), or not at all (another process), and the ranking must
follow.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, get_type_hints

import numpy as np
import pytest
import waits
from memtrio.actors.embedder import feature as embedder_feature
from memtrio.actors.embedder.handle import EMBEDDER
from memtrio.actors.ranker import feature as ranker_feature
from memtrio.actors.ranker import item_index as ranker_vectors
from memtrio.actors.ranker import mmr
from memtrio.actors.ranker import rank as rank_mod
from memtrio.actors.ranker.graph import RecallCache
from memtrio.actors.ranker.handle import RANKER, Ranked, RankerHandle
from memtrio.actors.ranker.item_index import IndexChoice, ItemIndex
from memtrio.actors.ranker.service import Ranker, RankerError
from memtrio.actors.store.domain.embeddings import put_vector, vecs_of
from memtrio.actors.store.domain.memories import NewMemory, insert_memory
from memtrio.actors.store.sqlite import schema
from memtrio.actors.store.sqlite.db import db_path
from memtrio.actors.store.sqlite.tx import tx as sqlite_tx
from memtrio.actors.store.writer import Change
from memtrio.supervisors import config as config_mod
from memtrio.supervisors import faults
from memtrio.supervisors.app import build_context, open_app
from memtrio.supervisors.context import AppContext
from test_recall_e2e import DEEP_QUERY, FILLER, NEEDLE

UNRELATED = [
    "The office coffee machine is descaled on the first Monday of each month.",
    "Our CI runners use Ubuntu 22.04 images with a warm pip cache.",
    "Frontend components are written in TypeScript with strict null checks.",
    "The quarterly planning meeting moved to the large conference room.",
    "Docker images are tagged with the short git commit hash.",
    "We format Python code with ruff and a line length of 100.",
    "The design team prefers Figma for wireframes and prototypes.",
    "Release notes are drafted in the CHANGELOG before each tag.",
]


@dataclass
class Store:
    """A bare store database: rows written by SQL, vectors by the real model."""

    conn: sqlite3.Connection
    app: AppContext

    def scope(self, name: str) -> int:
        self.conn.execute("INSERT OR IGNORE INTO scopes (name) VALUES (?)", (name,))
        return self.conn.execute("SELECT id FROM scopes WHERE name = ?", (name,)).fetchone()[0]

    async def vec(self, text: str) -> bytes:
        result = await self.app.service(EMBEDDER).embed([text])
        return result.vectors[0].tobytes()

    def put_vec(self, kind: str, item_id: int, data: bytes, model: str | None = None) -> Change:
        pool = self.app.service(EMBEDDER)
        self.conn.execute(
            "INSERT OR REPLACE INTO vectors (kind, item_id, model, revision, dim, vec) VALUES (?, ?, ?, ?, ?, ?)",
            (kind, item_id, model or pool.model, pool.revision, 384, data),
        )
        return Change(
            kind=kind, id=item_id, vector=data, model=model or pool.model, revision=pool.revision
        )

    async def entity(
        self, name: str, scopes: Sequence[str] = ("global",)
    ) -> tuple[int, list[Change]]:
        now = time.time()
        cur = self.conn.execute(
            "INSERT INTO entities (name, canonical_name, kind, created_at, updated_at) VALUES (?, ?, 'entity', ?, ?)",
            (name, " ".join(name.split()).casefold(), now, now),
        )
        eid = cur.lastrowid
        for s in scopes:
            self.conn.execute("INSERT INTO entity_scopes VALUES (?, ?)", (eid, self.scope(s)))
        return eid, [self.put_vec("entity", eid, await self.vec(name))]

    async def memory(
        self,
        content: str,
        scopes: Sequence[str] = ("global",),
        memory_type: str = "observation",
        entities: Sequence[int] = (),
        embed: bool = True,
    ) -> tuple[int, list[Change]]:
        now = time.time()
        cur = self.conn.execute(
            "INSERT INTO memories (content, memory_type, created_at, updated_at) VALUES (?, ?, ?, ?)",
            (content, memory_type, now, now),
        )
        mid = cur.lastrowid
        for s in scopes:
            self.conn.execute("INSERT INTO memory_scopes VALUES (?, ?)", (mid, self.scope(s)))
        for e in entities:
            self.conn.execute("INSERT INTO memory_entities VALUES (?, ?)", (mid, e))
        if embed:
            return mid, [self.put_vec("memory", mid, await self.vec(content))]
        return mid, [Change(kind="memory", id=mid)]


@asynccontextmanager
async def running(
    home: Path, env: dict[str, str] | None = None
) -> AsyncIterator[tuple[Store, Ranker]]:
    conn = sqlite3.connect(str(db_path(home)), isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    schema.migrate(conn)
    cfg = config_mod.load(home, env=env or {})
    app = build_context(cfg, home)
    try:
        async with open_app(app, [embedder_feature.FEATURE, ranker_feature.FEATURE]):
            ranker = app.service(RANKER)  # imported once wanted (actors/ranker/feature.py)
            assert isinstance(ranker, ranker_feature.StartingRanker)
            yield Store(conn, app), await ranker.load()
    finally:
        conn.close()


async def test_a_recall_before_the_ranker_loaded_waits_for_it_and_ranks_by_meaning(
    home: Path,
) -> None:
    """No client was initialized (a CLI command): nothing loads the ranker's modules until a
    recall asks; that recall waits for the ranker instead of failing (lexical ranking)."""
    conn = sqlite3.connect(str(db_path(home)), isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    schema.migrate(conn)
    app = build_context(config_mod.load(home, env={}), home)
    try:
        async with open_app(app, [embedder_feature.FEATURE, ranker_feature.FEATURE]):
            store = Store(conn, app)
            for text in UNRELATED:
                await store.memory(text)
            target, _ = await store.memory("Auth tokens are refreshed every 15 minutes.")
            handle = app.service(RANKER)
            assert isinstance(handle, ranker_feature.StartingRanker) and handle.ranker is None
            ranked = await handle.recall("why do logins expire", None, None, 5)
            assert ranked[0][0] == target and ranked.warnings == []
            assert app.service(RANKER) is handle.ranker  # the Ranker now serves recall itself
    finally:
        conn.close()


def test_the_handle_declares_the_warnings_and_reasons_a_recall_returns() -> None:
    """Issue #41: the handle said ``list`` and the memory tools read the warnings and reasons
    back with ``getattr``; its type now names them, for every implementation."""
    declared = get_type_hints(RankerHandle.recall)["return"]
    assert declared is Ranked
    assert set(get_type_hints(Ranked)) == {"warnings", "reasons"}
    for impl in (Ranker.recall, ranker_feature.StartingRanker.recall):
        assert get_type_hints(impl)["return"] is Ranked


async def fill(store: Store, ranker: Ranker, items: Sequence[str], **kw: Any) -> list[int]:
    ids = []
    changes: list[Change] = []
    for text in items:
        mid, ch = await store.memory(text, **kw)
        ids.append(mid)
        changes += ch
    ranker.on_changes(changes)
    return ids


async def test_a_paraphrase_finds_a_memory_sharing_no_word(home: Path) -> None:
    async with running(home) as (store, ranker):
        await fill(store, ranker, UNRELATED)
        [target] = await fill(
            store,
            ranker,
            ["Auth tokens are refreshed every 15 minutes; sessions end when refresh fails."],
        )
        ranked = await ranker.recall("why do logins expire", None, None, 5)
        assert ranked[0][0] == target
        assert ranked.warnings == []
        assert all(score > 0 for _, score in ranked)


async def test_two_hop_memory_through_an_entity_ranks_above_unrelated(home: Path) -> None:
    async with running(home) as (store, ranker):
        unrelated = await fill(store, ranker, UNRELATED)
        billing, ch1 = await store.entity("billing-service")
        m1, ch2 = await store.memory(
            "Stripe payment webhooks are handled by the billing-service.", entities=[billing]
        )
        m2, ch3 = await store.memory(
            "Priya is the owner of billing-service and reviews all its pull requests.",
            entities=[billing],
        )
        ranker.on_changes(ch1 + ch2 + ch3)
        query = "Whom should I ask about a bug in the Stripe webhook handler?"
        ranked = await ranker.recall(query, None, None, 20)
        order = [mid for mid, _ in ranked]
        assert order[0] == m1
        assert m2 in order and all(
            order.index(m2) < order.index(u) for u in unrelated if u in order
        )
        # The graph is what lifts it: without it, its margin over the unrelated ones is smaller.
        flat = dict(await ranker.recall(query, None, None, 20, use_graph=False))
        best_unrelated = max(flat.get(u, 0.0) for u in unrelated)
        graph = dict(ranked)
        assert (
            graph[m2] / max(graph.get(u, 1e-12) for u in unrelated)
            > flat.get(m2, 0.0) / best_unrelated
        )


# Recall through every index backend ([vectors] backend); "auto" past its threshold is hnsw,
# and so is "hnsw" from exact_below vectors (0 here: a graph from the first one).
BACKENDS = {
    "exact": ({"MEMTRIO_VECTORS_BACKEND": "exact"}, "exact"),
    "hnsw": ({"MEMTRIO_VECTORS_BACKEND": "hnsw", "MEMTRIO_VECTORS_EXACT_BELOW": "0"}, "hnsw"),
    "ivf": ({"MEMTRIO_VECTORS_BACKEND": "ivf"}, "ivf"),
    "auto-large": (
        {"MEMTRIO_VECTORS_BACKEND": "auto", "MEMTRIO_VECTORS_AUTO_THRESHOLD": "1"},
        "hnsw",
    ),
}


@pytest.mark.parametrize("backend", sorted(BACKENDS))
async def test_scope_and_type_filters_apply_before_ranking(home: Path, backend: str) -> None:
    env, kind = BACKENDS[backend]
    async with running(home, env) as (store, ranker):
        await fill(store, ranker, UNRELATED[:4])
        hub, ch0 = await store.entity("deploy pipeline", scopes=["global", "repo:/b"])
        # The best match lives in repo:/b; it must neither appear nor pass rank to its neighbours.
        mb, ch1 = await store.memory(
            "The deploy pipeline rolls back automatically when health checks fail.",
            scopes=["repo:/b"],
            entities=[hub],
        )
        ma, ch2 = await store.memory(
            "Deploy pipeline runs are announced in the releases channel.",
            scopes=["repo:/a"],
            entities=[hub],
        )
        mt, ch3 = await store.memory(
            "Rollbacks are triggered by failing health checks after deploys.",
            scopes=["repo:/a"],
            memory_type="Decision",
        )
        ranker.on_changes(ch0 + ch1 + ch2 + ch3)
        query = "what happens when a deploy health check fails"
        everything = [m for m, _ in await ranker.recall(query, None, None, 10)]
        assert everything[0] in (mb, mt)
        in_a = await ranker.recall(query, ["repo:/a", "global"], None, 10)
        assert mb not in [m for m, _ in in_a]
        ids_by_scope = [
            store.conn.execute("SELECT id FROM scopes WHERE name = ?", (n,)).fetchone()[0]
            for n in ("repo:/a", "global")
        ]
        assert [m for m, _ in await ranker.recall(query, ids_by_scope, None, 10)] == [
            m for m, _ in in_a
        ]
        decisions = await ranker.recall(query, ["repo:/a", "global"], "decision", 10)
        assert [m for m, _ in decisions] == [mt]  # type compares case-insensitively
        # Restricting first means the filtered memory leaves no trace: the ranking equals
        # that of a store where it never existed. (The scores move by a few per cent only
        # because deleting it changes the store-wide BM25 statistics the re-ranker reads.)
        store.conn.execute("DELETE FROM memories WHERE id = ?", (mb,))
        ranker.on_changes([Change(kind="memory", id=mb, deleted=True)])
        without = await ranker.recall(query, ["repo:/a", "global"], None, 10)
        assert [m for m, _ in without] == [m for m, _ in in_a]
        assert dict(without) == pytest.approx(dict(in_a), rel=0.1)
        assert ranker.stats()["vector_index"]["memory"] == kind


@pytest.mark.parametrize("backend", sorted(BACKENDS))
async def test_updates_and_deletes_are_followed(home: Path, backend: str) -> None:
    env, kind = BACKENDS[backend]
    async with running(home, env) as (store, ranker):
        await fill(store, ranker, UNRELATED)
        [mid] = await fill(store, ranker, ["Postgres connection pool size is 20 per worker."])
        query = "database connection limits"
        assert (await ranker.recall(query, None, None, 3))[0][0] == mid
        new_text = "The cafeteria serves vegetarian lasagna on Fridays."
        store.conn.execute(
            "UPDATE memories SET content = ?, memory_type = 'note' WHERE id = ?", (new_text, mid)
        )
        ranker.on_changes([store.put_vec("memory", mid, await store.vec(new_text))])
        assert (await ranker.recall("what food is served at lunch", None, None, 1))[0][0] == mid
        assert [m for m, _ in await ranker.recall(query, None, "note", 5)] == [mid]
        store.conn.execute("DELETE FROM memories WHERE id = ?", (mid,))
        ranker.on_changes([Change(kind="memory", id=mid, deleted=True)])
        assert mid not in [
            m for m, _ in await ranker.recall("what food is served at lunch", None, None, 10)
        ]
        assert ranker.stats()["vectors"]["memory"] == len(UNRELATED)
        assert ranker.stats()["vector_index"]["memory"] == kind


async def test_writes_by_another_process_are_noticed(home: Path) -> None:
    async with running(home) as (store, ranker):
        await fill(store, ranker, UNRELATED)
        await ranker.recall("anything", None, None, 1)
        mid, _ = await store.memory(
            "Kafka consumers commit offsets only after the batch is processed."
        )
        # No change record: as if another memtrio process had written it.
        ranked = await ranker.recall("when are message queue offsets committed", None, None, 3)
        assert ranked[0][0] == mid


async def test_every_window_of_a_long_memory_is_loaded_and_searched(home: Path) -> None:
    async with running(home) as (store, ranker):
        await fill(store, ranker, UNRELATED)
        await ranker.recall("anything", None, None, 1)  # the cache is loaded
        text = FILLER + NEEDLE + FILLER[:300]
        mid, _ = await store.memory(text, embed=False)
        result = await store.app.service(EMBEDDER).embed([text], max_chunks=16)
        [vec] = vecs_of(result)
        assert vec.count >= 2 and result.truncated == [False]
        put_vector(sqlite_tx(store.conn), "memory", mid, vec)
        # No change record (another process): the reload reads chunk 0 and the others.
        flat = {"use_lexical": False, "use_graph": False}
        ranked = await ranker.recall(DEEP_QUERY, None, None, 3, **flat)
        assert ranked[0][0] == mid
        assert ranker.stats()["vector_rows"]["memory"] == len(UNRELATED) + vec.count
        # A chunk of another model than its chunk 0 never counts.
        store.conn.execute("UPDATE vector_chunks SET model = 'other' WHERE item_id = ?", (mid,))
        ranker.on_changes([Change(kind="memory", id=mid)])
        ranked = await ranker.recall(DEEP_QUERY, None, None, 3, **flat)
        assert ranked[0][0] != mid
        assert ranker.stats()["vector_rows"]["memory"] == len(UNRELATED) + 1


async def test_literal_entity_names_anchor_the_walk(home: Path) -> None:
    async with running(home) as (store, ranker):
        await fill(store, ranker, UNRELATED)
        zx, ch = await store.entity("ZX-9000")
        m, ch2 = await store.memory(
            "The flaky integration test was caused by a clock skew on one runner.", entities=[zx]
        )
        ranker.on_changes(ch + ch2)
        ranked = await ranker.recall("notes on ZX-9000", None, None, 3)
        assert ranked[0][0] == m


async def test_vectors_of_another_model_are_never_compared(home: Path) -> None:
    # Thread neighbours and the re-ranker (whose candidates include thread neighbours)
    # off: they may bring a memory in without comparing any vector.
    env = {"MEMTRIO_RETRIEVAL_NEIGHBOUR_WEIGHT": "0", "MEMTRIO_RETRIEVAL_RERANK": "false"}
    async with running(home, env=env) as (store, ranker):
        await fill(store, ranker, UNRELATED)
        mid, _ = await store.memory(
            "Secrets are stored in Vault, never in environment files.", embed=False
        )
        store.put_vec(
            "memory",
            mid,
            (await store.vec("Secrets are stored in Vault")),
            model="some-other-model",
        )
        ranker.on_changes([Change(kind="memory", id=mid, vector=None)])
        ranked = await ranker.recall("where do we keep credentials", None, None, 10)
        # Its only vector is of another model: it may come from the lexical seeds only.
        assert ranker.stats()["vectors"]["memory"] == len(UNRELATED)
        assert mid not in [m for m, _ in ranked]


async def test_lexical_matches_seed_the_walk(home: Path) -> None:
    async with running(home) as (store, ranker):
        await fill(store, ranker, UNRELATED)
        [mid] = await fill(
            store, ranker, ["Ticket QX-4471 tracks the intermittent 502 from the gateway."]
        )
        ranked = await ranker.recall("QX-4471", None, None, 3, use_graph=False)
        assert ranked[0][0] == mid


async def test_model_failure_at_recall_time_raises_for_the_lexical_fallback(
    home: Path, capsys: Any
) -> None:
    async with running(home) as (store, ranker):
        await fill(store, ranker, UNRELATED[:2])
        faults.configure("embedder.embed=raise@1")
        with pytest.raises(RankerError, match="falling back to lexical"):
            await ranker.recall("anything", None, None, 3)
        assert len(await ranker.recall("anything", None, None, 3)) == 2


def unit_rows(seed: int, n: int, dim: int) -> np.ndarray:
    """``n`` random unit vectors of ``dim`` dimensions (float32), reproducible by ``seed``."""
    vecs = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


@pytest.mark.parametrize("backend", ["exact", "hnsw", "ivf"])
def test_item_index_search_filters_and_removes(backend: str) -> None:
    index = ItemIndex(4, IndexChoice(backend=backend, exact_below=0))  # type: ignore[arg-type]
    vecs = unit_rows(0, 10, 4)
    for i, v in enumerate(vecs, start=1):
        index.upsert(i, v)
    ids, scores = index.search(vecs[2], 3)
    assert ids[0] == 3 and scores[0] == pytest.approx(1.0, abs=1e-5)
    allowed = np.ones(11, dtype=bool)
    allowed[3] = False
    ids, _ = index.search(vecs[2], 3, allowed)
    assert 3 not in ids and len(ids) == 3
    index.remove(3)
    index.remove(10)
    assert len(index) == 8 and 3 not in index.ids() and 10 not in index.ids()
    ids, _ = index.search(vecs[8], 1)
    assert ids[0] == 9  # the row moved by the removal is still found by its id


@pytest.mark.parametrize("backend", ["exact", "hnsw", "ivf"])
def test_best_cosines_are_those_of_each_items_best_window(backend: str) -> None:
    """The re-ranker's batch lookup: the best window of each item, 0 for an unknown one."""
    index = ItemIndex(4, IndexChoice(backend=backend, exact_below=0))  # type: ignore[arg-type]
    vecs = unit_rows(1, 6, 4)
    index.upsert(1, vecs[0])
    index.upsert(2, vecs[1:4])  # three windows
    index.upsert(3, vecs[4])
    q = vecs[2]
    got = index.best_cosines(q, [3, 2, 99, 1])
    want = [vecs[4] @ q, max(vecs[1:4] @ q), 0.0, vecs[0] @ q]
    assert got == pytest.approx(want, abs=1e-4)
    assert got[1] == pytest.approx(1.0, abs=1e-4)  # the matching window, not the first


@pytest.mark.parametrize("backend", ["exact", "hnsw", "ivf"])
def test_item_index_items_with_several_vectors_score_by_their_best(backend: str) -> None:
    """A long text's windows: one row each, the item scores by its best row, appears once."""
    choice = IndexChoice(backend=backend, exact_below=0)  # type: ignore[arg-type]
    index = ItemIndex(3, choice)
    e = np.eye(3, dtype=np.float32)
    index.upsert(1, np.stack([e[0], e[1]]))  # two windows
    index.upsert(2, e[2])
    index.upsert(3, np.stack([e[2] * 0.6 + e[1] * 0.8, e[0]]))
    assert (len(index), index.rows) == (3, 5)
    ids, scores = index.search(e[1], 3)
    assert ids.tolist() == [1, 3, 2] and scores.tolist() == pytest.approx([1.0, 0.8, 0.0])
    allowed = np.array([False, False, True, True])
    assert index.search(e[1], 3, allowed)[0].tolist() == [3, 2]
    index.remove(1)  # its rows go; the rows moved into their place keep their items
    assert (len(index), index.rows) == (2, 3) and 1 not in index.ids()
    assert index.search(e[0], 1)[0].tolist() == [3]
    index.upsert(3, e[1])  # fewer windows after an update
    assert index.rows == 2 and index.search(e[0], 2)[1].tolist() == pytest.approx([0.0, 0.0])
    index.upsert(2, np.stack([e[0], e[1], e[2]]))  # more windows
    assert index.rows == 4 and index.search(e[0], 1)[0].tolist() == [2]
    loaded = ItemIndex(3, choice)
    loaded.load_rows([(7, e[0].tobytes()), (7, e[1].tobytes()), (8, e[2].tobytes())], 3)
    assert (len(loaded), loaded.rows) == (2, 3)
    assert loaded.search(e[1], 2)[0].tolist() == [7, 8]


def test_item_index_auto_picks_hnsw_for_a_large_load_and_keeps_every_window() -> None:
    e = np.eye(3, dtype=np.float32)
    rows = [(7, e[0].tobytes()), (7, e[1].tobytes()), (8, e[2].tobytes())]
    small = ItemIndex(3, IndexChoice(auto_threshold=10))
    large = ItemIndex(3, IndexChoice(auto_threshold=3))
    for index in (small, large):
        assert index.load_rows(rows, 3) == 3
        assert index.search(e[1], 2)[0].tolist() == [7, 8]
        assert sorted(index.vectors(7).tolist()) == sorted(e[:2].tolist())
    assert (small.backend.kind, large.backend.kind) == ("exact", "hnsw")
    small.upsert(9, np.stack([e[0], e[2]]) * 0.5)  # grows past a threshold of 4: moves
    small.choice = IndexChoice(auto_threshold=4)
    small.upsert(10, e[2])
    assert small.backend.kind == "hnsw" and small.rows == 6 and len(small) == 4
    assert small.search(e[2], 4)[0].tolist()[:2] in ([8, 10], [10, 8])


def test_a_saved_hnsw_graph_is_loaded_and_reconciled_with_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ranker_vectors, "SAVE_MIN_ROWS", 1)
    vecs = unit_rows(3, 60, 8)
    rows = [(i, vecs[i].tobytes()) for i in range(1, 50)] + [(7, vecs[55].tobytes())]
    choice = IndexChoice(backend="hnsw", exact_below=0)
    saved = choice.saved_path(tmp_path / "vector-index", "memory", "m", "r", 8)
    first = ItemIndex(8, choice)
    assert first.load_rows(rows, len(rows), saved) == 50
    assert saved.is_file() and saved.stat().st_mode & 0o077 == 0  # private
    # The table moved on while no server ran (or the server crashed after the save):
    # item 3 deleted, item 4 rewritten, item 7 lost its second window, item 59 is new.
    table = [(i, vecs[i].tobytes()) for i in range(1, 50) if i != 3] + [(59, vecs[59].tobytes())]
    table[2] = (4, vecs[58].tobytes())
    reconciled: list[dict[str, int]] = []
    real = ranker_vectors.reconcile_batches
    monkeypatch.setattr(
        ranker_vectors,
        "reconcile_batches",
        lambda index, batches: reconciled.append(real(index, batches)) or reconciled[-1],
    )
    again = ItemIndex(8, choice)
    assert again.load_rows(table, len(table), saved) == 49
    assert reconciled == [{"removed": 2, "added": 1, "updated": 1}]
    assert (len(again), again.rows) == (49, 49) and 3 not in again
    assert again.search(vecs[58], 1)[0].tolist() == [4]
    assert again.search(vecs[59], 1)[0].tolist() == [59]
    assert again.search(vecs[55], 1)[0].tolist() != [7]
    saved.write_bytes(b"not a graph")  # unreadable: built from the table instead
    rebuilt = ItemIndex(8, choice)
    assert rebuilt.load_rows(table, len(table), saved) == 49 and len(reconciled) == 1
    assert rebuilt.search(vecs[58], 1)[0].tolist() == [4]
    other = choice.saved_path(tmp_path / "vector-index", "memory", "m2", "r", 8)
    ItemIndex(8, choice).load_rows(table, len(table), other)  # another model: replaces it
    assert sorted(p.name for p in saved.parent.iterdir()) == [other.name]


def test_cache_named_entities_match_whole_words() -> None:
    cache = RecallCache("m", "r", 4)
    cache._name_entity(1, "auth service")
    cache._name_entity(2, "redis")
    cache._name_entity(3, "c++")
    allowed = np.ones(4, dtype=bool)
    assert cache.named_entities("How does the Auth  Service talk to Redis?", allowed) == [2, 1]
    assert cache.named_entities("rediscover the author services", allowed) == []
    assert cache.named_entities("modern C++ idioms", allowed) == [3]


async def test_an_entity_gaining_a_scope_through_a_memory_is_followed(home: Path) -> None:
    async with running(home) as (store, ranker):
        gateway, ch0 = await store.entity("payments-gateway", scopes=["repo:/b"])
        m1, ch1 = await store.memory(
            "The payments-gateway retries card charges.", scopes=["repo:/b"], entities=[gateway]
        )
        ranker.on_changes(ch0 + ch1)
        await ranker.recall("card charges", None, None, 3)
        cache = ranker._cache
        assert cache is not None
        assert not cache.items["entity"].allowed(cache.selected_scopes(["repo:/a"]))[gateway]
        # The store links an existing entity to a memory of another scope: it reports the
        # memory only, and adds the scope to the entity.
        m2, ch2 = await store.memory(
            "Priya owns payments-gateway.", scopes=["repo:/a"], entities=[gateway]
        )
        store.conn.execute(
            "INSERT INTO entity_scopes VALUES (?, ?)", (gateway, store.scope("repo:/a"))
        )
        ranker.on_changes(ch2)
        ranked = await ranker.recall("payments-gateway", ["repo:/a"], None, 3)
        assert [m for m, _ in ranked] == [m2]
        cache = ranker._cache
        assert cache.items["entity"].allowed(cache.selected_scopes(["repo:/a"]))[gateway]


def _unit(*parts: float) -> np.ndarray:
    v = np.array(parts, dtype=np.float32)
    return v / np.linalg.norm(v)


def _mmr_cache() -> tuple[RecallCache, dict[str, np.ndarray], np.ndarray]:
    """Memories 1 and 2 are the same text; 3 answers the same query from another side."""
    cache = RecallCache("m", "r", 4)
    cache.index["memory"].upsert(1, _unit(1, 1, 1, 0))
    cache.index["memory"].upsert(2, _unit(1, 1, 1, 0))
    cache.index["memory"].upsert(3, _unit(1, 1, 0, 1))
    cache.index["memory"].upsert(4, _unit(1, 1, 0, 1.03))  # a little less relevant than 3
    for i in (1, 2, 3, 4):
        cache.items["memory"].set(i, [1])
    masks = {kind: cache.items[kind].allowed(None) for kind in ("memory", "entity", "relation")}
    return cache, masks, _unit(1, 1, 0, 0)


def test_diversification_keeps_a_duplicate_from_crowding_the_top() -> None:
    cache, masks, query = _mmr_cache()
    empty = sqlite3.connect(":memory:", isolation_level=None)
    # The memories here are one thread (adjacent ids): neighbours off, MMR alone.
    seeds_only = rank_mod.Params(use_graph=False, use_lexical=False, neighbour_weight=0.0)

    def order(**kw: float) -> list[int]:
        params = replace(seeds_only, **kw)
        # No lexical seeds: the store is only asked for its own nearest (SQLite: none).
        ranked = rank_mod.rank(cache, sqlite_tx(empty), "q", query, masks, 3, params)
        return [item_id for item_id, _ in ranked]

    # Off: the equally relevant duplicate takes the second place.
    assert order(mmr_lambda=1.0) == [1, 2, 3]
    # Default: the other side of the answer comes before the copy, the copy stays in.
    assert rank_mod.Params().mmr_lambda == 0.9
    assert order() == [1, 3, 2]
    # Stronger: even a less relevant but different memory beats the copy.
    assert order(mmr_lambda=0.5, seed_top_k=4)[:2] == [1, 3]
    assert sorted(order(mmr_lambda=0.5, seed_top_k=4)) == [1, 2, 3]


def test_memory_similarity_uses_the_closest_windows_and_ignores_missing_vectors() -> None:
    cache = RecallCache("m", "r", 3)
    e = np.eye(3, dtype=np.float32)
    cache.index["memory"].upsert(1, np.stack([e[0], e[1]]))  # two windows
    cache.index["memory"].upsert(2, e[1])
    cache.index["memory"].upsert(3, e[2])
    sim = mmr.similarity_matrix(cache, [1, 2, 9, 3])  # 9 has no vector
    assert sim[0, 1] == pytest.approx(1.0) and sim[1, 0] == pytest.approx(1.0)
    assert sim[0, 3] == pytest.approx(0.0) and not sim[2].any() and not sim[:, 2].any()
    ranked = [(1, 1.0), (2, 0.9), (9, 0.8), (3, 0.7)]
    # 2, a copy of a window of 1, comes last, with the score it was chosen by (below 3's).
    diversified = mmr.diversify(cache, ranked, 4, 0.5)
    assert diversified[:3] == [(1, 1.0), (9, 0.8), (3, 0.7)] and diversified[3][0] == 2
    assert diversified[3][1] < 0.7
    assert mmr.diversify(cache, ranked, 2, 1.0) == ranked[:2]


def test_diversification_of_a_long_result_reorders_only_the_best_pool() -> None:
    cache = RecallCache("m", "r", 8)
    vecs = unit_rows(1, 150, 8)
    for i, v in enumerate(vecs, start=1):
        cache.index["memory"].upsert(i, v)
    ranked = [(i, 1.0 / i) for i in range(1, 151)]
    out = mmr.diversify(cache, ranked, 140, 0.5)
    pool = mmr.MMR_MAX_POOL
    assert len(out) == 140 and out[0] == (1, 1.0)
    assert sorted(m for m, _ in out) == list(range(1, 141))
    in_pool = [m for m, _ in out if m <= pool]
    assert in_pool != list(range(1, pool + 1))  # the pool is diversified
    # Beyond the pool: their own scores, in their order, merged by score with the pool's
    # (whose moved-down memories report the lower score they were chosen by).
    assert [(m, s) for m, s in out if m > pool] == ranked[pool:140]
    assert [s for _, s in out] == sorted((s for _, s in out), reverse=True)


def test_mmr_lambda_is_a_validated_retrieval_key(home: Path) -> None:
    cfg = config_mod.load(home, env={"MEMTRIO_RETRIEVAL_MMR_LAMBDA": "1"})
    assert cfg.retrieval.mmr_lambda == 1.0
    assert config_mod.load(home, env={}).retrieval.mmr_lambda == 0.9
    with pytest.raises(
        config_mod.ConfigError, match="retrieval.mmr_lambda must be between 0 and 1"
    ):
        config_mod.load(home, env={"MEMTRIO_RETRIEVAL_MMR_LAMBDA": "1.5"})


def test_lexical_seeds_match_stems_and_prefer_phrases() -> None:
    """The ranker's FTS5 seeds: stems (not prefixes) and the proximity of neighbouring words."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    schema.migrate(conn)
    ids = {}
    for key, text in {
        "scattered": "model trains and a first aid kit",
        "phrase": "finished two model kits of tanks this week at last",
        "kitchen": "the kitchen model of the new flat",
        "charity": "I walked for two charities on consecutive days",
    }.items():
        ids[key] = insert_memory(sqlite_tx(conn), NewMemory(text, scopes=["global"]))[0]["id"]
    found = [
        rowid
        for rowid, _ in rank_mod.fts_candidates(sqlite_tx(conn), "How many model kits did I buy?")
    ]
    assert found[:2] == [ids["phrase"], ids["scattered"]]
    assert found.index(ids["kitchen"]) > 1  # matched by "model" only, never by "kits"
    charity = rank_mod.fts_candidates(sqlite_tx(conn), "charity events")
    assert [rowid for rowid, _ in charity] == [ids["charity"]]


async def test_a_large_hnsw_graph_is_built_in_the_background_and_then_serves(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"MEMTRIO_VECTORS_BACKEND": "hnsw", "MEMTRIO_VECTORS_EXACT_BELOW": "0"}
    async with running(home, env) as (store, ranker):
        ids = await fill(store, ranker, UNRELATED)
    monkeypatch.setattr(ranker_vectors, "DEFER_MIN_ROWS", 1)  # "large" from one vector
    adopted: list[str] = []
    adopt = ItemIndex.adopt_build

    def spy(index: ItemIndex) -> bool:
        took = adopt(index)
        if took:
            adopted.append(index.backend.kind)
        return took

    monkeypatch.setattr(ItemIndex, "adopt_build", spy)
    async with running(home, env) as (store, ranker):
        query = "which Ubuntu images do the CI runners use"
        # Served from the start (exact while the graph is built), the same answer after.
        assert (await ranker.recall(query, None, None, 3))[0][0] == ids[1]

        async def hnsw_serving() -> bool:  # and the answer stays the same meanwhile
            assert (await ranker.recall(query, None, None, 3))[0][0] == ids[1]
            return ranker.stats()["vector_index"]["memory"] == "hnsw"

        await waits.until(hnsw_serving, 60, 0.01)
        new, changes = await store.memory("The CI runners moved to Ubuntu 24.04 images.")
        ranker.on_changes(changes)
        assert new in [m for m, _ in await ranker.recall(query, None, None, 3)]
    assert adopted and set(adopted) == {"hnsw"}  # built in the background, not at load


async def test_a_text_that_is_not_utf8_in_the_store_does_not_stop_semantic_recall(
    home: Path,
) -> None:
    """SQLite keeps any bytes in a TEXT column (a hand edit, an older memtrio). The driver
    refused to decode such a memory, entity or scope name or vector, so re-reading it failed
    the ranker's cache (every recall fell back to lexical, the load failed at each start)."""
    async with running(home) as (store, ranker):
        unrelated = await fill(store, ranker, UNRELATED)
        [target] = await fill(
            store, ranker, ["Auth tokens are refreshed every 15 minutes (since 4 May 2023)."]
        )
        store.conn.execute(  # a vector written as a text, not even UTF-8
            "UPDATE vectors SET vec = CAST(x'ff00ff00' AS TEXT) WHERE item_id = ?",
            (unrelated[0],),
        )
        bad, changes = await store.memory("placeholder, written over below")
        entity, more = await store.entity("placeholder entity")
        store.conn.execute(
            "UPDATE memories SET content = CAST(x'ff20323032332066e9' AS TEXT),"
            " memory_type = CAST(x'fe' AS TEXT) WHERE id = ?",
            (bad,),
        )
        store.conn.execute(
            "UPDATE entities SET canonical_name = CAST(x'c328' AS TEXT) WHERE id = ?", (entity,)
        )
        store.conn.execute("INSERT INTO scopes (name) VALUES (CAST(x'80' AS TEXT))")
        ranker.on_changes(changes + more)  # re-read the rows that changed
        ranked = await ranker.recall("why do logins expire", None, None, 5)
        # Semantic (no fallback warning); the unreadable vector counts as missing, and with
        # no store actor here to re-embed it the recall says so.
        assert ranked[0][0] == target
        assert ranked.warnings == [
            "1 memory in the searched scopes has no vector of the current model yet and ranks "
            "by its words only (each recall embeds at most 64 of each kind); run memtrio reembed"
        ]
        ranker.on_changes([Change(kind="reset", id=0)])  # reload everything
        ranked = await ranker.recall("why do logins expire", None, None, 5)
        assert ranked[0][0] == target
        assert ranker.stats()["items"]["memory"] == len(UNRELATED) + 2
