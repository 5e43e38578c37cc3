"""The vector index backends (actors.vectors) against exact search on random data."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from memtrio.actors.vector_index import hnsw, ivf
from memtrio.actors.vector_index.index import MAX_DIMS, make_index, reconcile

DIMS = 32
BACKENDS = ("exact", "hnsw", "ivf")
METRICS = ("cos", "ip", "l2sq")


def clustered(n: int, dims: int = DIMS, centers: int = 20, seed: int = 0) -> np.ndarray:
    """Vectors around a few centers (embeddings cluster; uniform noise is the hard case)."""
    rng = np.random.default_rng(seed)
    middle = rng.normal(size=(centers, dims))
    return (middle[rng.integers(0, centers, n)] + 0.35 * rng.normal(size=(n, dims))).astype(
        np.float32
    )


def brute(vecs: np.ndarray, ids: np.ndarray, q: np.ndarray, k: int, metric: str) -> np.ndarray:
    if metric == "cos":
        vecs = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
        q = q / np.linalg.norm(q)
    scores = -((vecs - q) ** 2).sum(axis=1) if metric == "l2sq" else vecs @ q
    return ids[np.argsort(-scores, kind="stable")[:k]]


def build(kind: str, metric: str = "cos", **options: int | str):
    if kind == "ivf":
        options = {"nlist": 16, "nprobe": 6, **options}
    return make_index(kind, DIMS, metric, **options)  # type: ignore[arg-type]


def recall_at_10(index, vecs: np.ndarray, ids: np.ndarray, metric: str, queries: int = 40) -> float:
    rng = np.random.default_rng(7)
    hits = 0
    for row in rng.choice(len(vecs), queries, replace=False):
        q = vecs[row] + 0.1 * rng.normal(size=DIMS).astype(np.float32)
        want = set(brute(vecs, ids, q, 10, metric).tolist())
        got, _ = index.search(q, 10)
        hits += len(want & set(got.tolist()))
    return hits / (10 * queries)


@pytest.mark.parametrize("metric", METRICS)
@pytest.mark.parametrize("kind", BACKENDS)
def test_search_matches_exact_search(kind: str, metric: str) -> None:
    vecs = clustered(2000)
    ids = np.arange(100, 2100, dtype=np.int64)
    index = build(kind, metric)
    index.add(ids, vecs)
    assert len(index) == 2000
    if kind == "exact":
        q = vecs[5] + 0.2
        got, scores = index.search(q, 10)
        assert got.tolist() == brute(vecs, ids, q, 10, metric).tolist()
        assert (np.diff(scores) <= 0).all()  # best first
    else:
        assert recall_at_10(index, vecs, ids, metric) >= 0.9


def test_scores_are_similarities_or_negated_squared_distances() -> None:
    a = np.array([[3.0, 4.0] + [0.0] * (DIMS - 2)], dtype=np.float32)
    q = np.array([3.0, 0.0] + [0.0] * (DIMS - 2), dtype=np.float32)
    for kind in BACKENDS:
        for metric, want in (("cos", 0.6), ("ip", 9.0), ("l2sq", -16.0)):
            index = build(kind, metric)
            index.add([1], a)
            got, scores = index.search(q, 5)
            assert got.tolist() == [1]
            assert scores[0] == pytest.approx(want, rel=1e-3), (kind, metric)


@pytest.mark.parametrize("kind", BACKENDS)
def test_upsert_replaces_and_remove_forgets(kind: str) -> None:
    vecs = clustered(300)
    index = build(kind)
    index.add(np.arange(300), vecs)
    far = -vecs[0]
    index.add([7], far[None, :])  # upsert: id 7 now points the other way
    assert len(index) == 300
    assert index.search(far, 1)[0].tolist() == [7]
    stored = index.get(7)
    assert stored is not None and float(stored @ far / np.linalg.norm(far)) > 0.99
    index.remove([7, 12345])  # unknown ids are ignored
    assert len(index) == 299 and 7 not in index and index.get(7) is None
    assert 7 not in index.search(far, 50)[0].tolist()
    assert sorted(index.ids().tolist()) == [i for i in range(300) if i != 7]


@pytest.mark.parametrize("kind", BACKENDS)
def test_allowed_filter_inside_the_search(kind: str) -> None:
    vecs = clustered(1500)
    ids = np.arange(1500, dtype=np.int64)
    index = build(kind)
    index.add(ids, vecs)
    q = vecs[3]
    odd = {i for i in range(1500) if i % 2}
    mask = np.zeros(1500, dtype=bool)
    mask[1::2] = True
    for allowed in (odd, mask):
        got, _ = index.search(q, 10, allowed=allowed)
        assert len(got) == 10 and all(i % 2 for i in got.tolist())
    few = {4, 900, 1400}
    assert sorted(index.search(q, 10, allowed=few)[0].tolist()) == sorted(few)
    assert len(index.search(q, 10, allowed=set())[0]) == 0
    assert len(index.search(q, 10, allowed=np.zeros(3, dtype=bool))[0]) == 0


def test_hnsw_wide_filter_widens_until_it_has_k() -> None:
    vecs = clustered(6000, centers=3)
    index = build("hnsw")
    index.add(np.arange(6000), vecs)
    # One id in 30 allowed: too many for the exact path, too few for one graph pass.
    allowed = set(range(0, 6000, 30))
    assert len(allowed) > hnsw.EXACT_FILTER_SHARE * 6000
    got, _ = index.search(vecs[0], 10, allowed=allowed)
    assert len(got) == 10 and set(got.tolist()) <= allowed


@pytest.mark.parametrize("kind", BACKENDS)
def test_empty_index_and_k_beyond_size(kind: str) -> None:
    index = build(kind)
    q = np.ones(DIMS, dtype=np.float32)
    got, scores = index.search(q, 10)
    assert len(got) == 0 and len(scores) == 0 and len(index) == 0
    index.remove([1])
    index.add([1, 2], np.eye(2, DIMS, dtype=np.float32))
    assert sorted(index.search(q, 100)[0].tolist()) == [1, 2]
    assert index.stats()["vectors"] == 2 and index.stats()["backend"] == kind


@pytest.mark.parametrize("kind", BACKENDS)
def test_dims_are_checked(kind: str) -> None:
    index = build(kind)
    with pytest.raises(ValueError, match="expected"):
        index.add([1], np.ones((1, DIMS + 1), dtype=np.float32))
    with pytest.raises(ValueError, match="expected"):
        index.add([1, 2], np.ones((1, DIMS), dtype=np.float32))
    with pytest.raises(ValueError, match="more than once"):
        index.add([1, 1], np.ones((2, DIMS), dtype=np.float32))
    with pytest.raises(ValueError, match="expected"):
        index.search(np.ones(DIMS - 1, dtype=np.float32), 3)
    assert len(index) == 0
    with pytest.raises(ValueError, match="dims"):
        make_index(kind, MAX_DIMS + 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="metric"):
        make_index(kind, DIMS, "hamming")  # type: ignore[arg-type]


def test_exact_grows_without_copying_per_add() -> None:
    index = make_index("exact", DIMS)
    capacities = set()
    for i in range(5000):
        index.add([i], np.full((1, DIMS), i + 1, dtype=np.float32))
        capacities.add(index.stats()["capacity"])
    assert len(capacities) <= 8  # geometric growth: a handful of reallocations
    index.remove(np.arange(0, 5000, 2))
    assert len(index) == 2500 and index.get(4999) is not None


def test_ivf_is_exact_until_trained_then_trains_and_retrains() -> None:
    vecs = clustered(16 * ivf.TRAIN_PER_LIST + 50)
    ids = np.arange(len(vecs), dtype=np.int64)
    index = make_index("ivf", DIMS, nlist=16, nprobe=1)
    half = 300
    index.add(ids[:half], vecs[:half])
    assert index.stats()["trained"] is False
    q = vecs[1]
    assert index.search(q, 10)[0].tolist() == brute(vecs[:half], ids[:half], q, 10, "cos").tolist()
    index.add(ids[half:], vecs[half:])  # crosses nlist * TRAIN_PER_LIST: trains
    assert index.stats()["trained"] is True and len(index) == len(vecs)
    index.reindex()
    assert recall_at_10(index, vecs, ids, "cos") >= 0.6  # one cell of 16 probed


@pytest.mark.parametrize("quantization", ["f16", "bf16", "i8"])
def test_hnsw_quantization_keeps_recall(quantization: str) -> None:
    vecs = clustered(2000)
    ids = np.arange(2000, dtype=np.int64)
    index = build("hnsw", quantization=quantization)
    index.add(ids, vecs)
    assert index.stats()["quantization"] == quantization
    assert recall_at_10(index, vecs, ids, "cos") >= 0.85


def test_hnsw_reindex_drops_deleted_nodes() -> None:
    vecs = clustered(500)
    index = build("hnsw")
    index.add(np.arange(500), vecs)
    index.remove(np.arange(250))
    assert index.stats()["deleted_nodes"] == 250
    index.reindex()
    assert index.stats()["deleted_nodes"] == 0 and len(index) == 250
    assert sorted(index.ids().tolist()) == list(range(250, 500))


@pytest.mark.parametrize("kind", BACKENDS)
def test_reconcile_brings_an_index_back_to_the_table(kind: str) -> None:
    vecs = clustered(400)
    index = build(kind)
    index.add(np.arange(400), vecs)
    # The table now: ids 0-299 kept (id 5 rewritten), 300-399 deleted, 400-449 new.
    truth_ids = np.concatenate([np.arange(300), np.arange(400, 450)])
    truth = np.concatenate([vecs[:300], clustered(50, seed=9)])
    truth[5] = -truth[5]
    counts = reconcile(index, truth_ids, truth)
    assert counts == {"removed": 100, "added": 50, "updated": 1}
    assert sorted(index.ids().tolist()) == truth_ids.tolist()
    assert index.search(truth[5], 1)[0].tolist() == [5]
    assert reconcile(index, truth_ids, truth) == {"removed": 0, "added": 0, "updated": 0}


def test_deferred_hnsw_build_serves_exact_then_takes_over_with_the_changes_made_meanwhile(
    tmp_path, monkeypatch
) -> None:
    from memtrio.actors.ranker import item_index as ranker_vectors
    from memtrio.actors.ranker.item_index import IndexChoice, ItemIndex, keys_of

    monkeypatch.setattr(ranker_vectors, "SAVE_MIN_ROWS", 100)
    monkeypatch.setattr(ranker_vectors, "DEFER_MIN_ROWS", 100)

    dims, n = 16, 400
    vecs = clustered(n, dims)
    table = [(i, vecs[i].tobytes()) for i in range(n)]
    table.append((3, clustered(1, dims, seed=9)[0].tobytes()))  # item 3 has a second window
    index = ItemIndex(dims, IndexChoice(backend="hnsw", exact_below=0))
    saved = tmp_path / "graph.usearch"
    assert index.load_rows(iter(table), len(table), saved, defer=True) == n + 1
    build = index.build
    assert build is not None and index.backend.kind == "exact"  # served at once, exactly
    assert index.search(vecs[42], 1)[0].tolist() == [42]

    # Changes while the graph is being built: a new vector, a removal, a new item,
    # and item 3 down to one window.
    moved = clustered(1, dims, seed=5)[0]
    index.upsert(10, moved)
    index.remove(11)
    index.upsert(1000, vecs[12] * -1)
    index.upsert(3, vecs[3])
    assert not index.adopt_build()  # not built yet: still exact
    build.run(iter(table), len(table))  # the builder's snapshot: the table before the changes
    assert saved.is_file()  # saved for the next start
    assert index.backend.kind == "exact" and index.adopt_build()
    assert index.backend.kind == "hnsw" and index.build is None
    assert index.search(moved, 1)[0].tolist() == [10]
    assert 11 not in index.search(vecs[11], 5)[0].tolist()
    assert index.search(vecs[12] * -1, 1)[0].tolist() == [1000]
    assert keys_of(3, 2)[1] not in index.backend  # the dropped window is gone from the graph
    assert len(index.backend) == n + 1 - 1  # 400 items, one removed, one added, one window fewer


def test_a_cancelled_deferred_build_stops_and_never_takes_over(monkeypatch) -> None:
    from memtrio.actors.ranker import item_index as ranker_vectors
    from memtrio.actors.ranker.item_index import IndexChoice, ItemIndex

    monkeypatch.setattr(ranker_vectors, "DEFER_MIN_ROWS", 100)
    vecs = clustered(300, 16)
    table = [(i, vecs[i].tobytes()) for i in range(300)]
    index = ItemIndex(16, IndexChoice(backend="hnsw", exact_below=0))
    index.load_rows(iter(table), len(table), None, defer=True)
    build = index.build
    assert build is not None
    build.cancel()  # the cache was replaced, or the ranker stopped
    build.run(iter(table), len(table))
    assert build.graph is None and not index.adopt_build() and index.backend.kind == "exact"


def test_the_hnsw_backend_loaded_first_leaves_the_embedding_model_loadable() -> None:
    """usearch's compiled module loaded before onnxruntime's crashed the process on
    onnxruntime's import (SIGSEGV); the backend loads its native libraries in a safe order
    (actors/native.py). A fresh process, as a tool that needs only the vectors would be."""
    code = (
        "import memtrio.actors.vector_index.hnsw\n"
        "from memtrio.actors.embedder.model import OnnxEncoder, resolve_spec\n"
        "vectors, _ = OnnxEncoder(resolve_spec('', 256), 'cpu').encode(['hello world'])\n"
        "print(vectors.shape)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.strip() == "(1, 384)"


def test_an_hnsw_index_is_exact_while_small_and_grows_into_a_graph_built_in_the_background() -> (
    None
):
    """[vectors] backend = "hnsw" (the default): under ``exact_below`` vectors the index is
    searched exactly; one that grows past it while serving gets its graph built in the
    background (exact meanwhile), not inline in the call that crossed the threshold."""
    from memtrio.actors.ranker.item_index import IndexChoice, ItemIndex

    vecs = clustered(60, 16)
    index = ItemIndex(16, IndexChoice(backend="hnsw", exact_below=50))
    assert index.load_rows(iter([(i, vecs[i].tobytes()) for i in range(40)]), 40, None, True) == 40
    assert index.backend.kind == "exact" and index.build is None  # small: exact, no graph
    for i in range(40, 60):
        index.upsert(i, vecs[i])
    build = index.build
    assert build is not None and index.backend.kind == "exact"  # past it: built aside
    assert index.search(vecs[55], 1)[0].tolist() == [55]
    build.run(iter([(i, vecs[i].tobytes()) for i in range(60)]), 60)
    assert index.adopt_build() and index.backend.kind == "hnsw"
    assert index.search(vecs[55], 1)[0].tolist() == [55]
