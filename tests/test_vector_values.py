"""What a vector must be to be stored and searched, and the ranker's loads of rows that are not.

Issue 29, item 1: a value finite as a float64 but not as the float32 the table
keeps (or the f16 an hnsw index keeps) was accepted, and a row holding one
stopped every later load. `ValueRule` is the one rule: a vector it accepts
scores finitely on every backend, metric and quantization; a row it refuses is
skipped by every load (the tools' index: tests/test_poisoned_vectors.py; the
ranker's: here).
"""

from __future__ import annotations

import math
import sqlite3
import struct
import time
from pathlib import Path

import numpy as np
import pytest
from memtrio.actors.ranker.item_index import DeferredBuild, IndexChoice, ItemIndex, keys_of
from memtrio.actors.store.domain.embeddings import Vec, put_vector
from memtrio.actors.store.sqlite import schema
from memtrio.actors.store.sqlite.tx import tx as sqlite_tx
from memtrio.actors.vector_index.arrays import MAX_NORM, ValueRule, value_rule
from memtrio.actors.vector_index.index import KINDS, METRICS, QUANTIZATIONS, make_index


def pack(*values: float) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def test_value_rule_refuses_values_the_stored_type_cannot_hold() -> None:
    f32 = ValueRule()
    text = f32.problem([1e39, 0, 0])
    assert text is not None and "`embedding`[0]" in text and "float32" in text
    assert "finite" in (f32.problem([0, math.nan], "q") or "")
    assert "length" in (f32.problem([1e30, 1e30]) or "")  # finite, but its scores overflow
    assert f32.problem([-0.0, 3e-45, 1e15]) is None  # -0, a float32 subnormal, a big finite value
    f16 = value_rule("hnsw", "cos", "f16")
    assert "half precision" in (f16.problem([70000.0, 0]) or "")
    assert f16.problem([65504.0, 0]) is None
    assert value_rule("exact", "cos", "f16").problem([70000.0, 0]) is None  # exact keeps float32
    assert "8-bit" in (value_rule("auto", "ip", "i8").problem([1.5, 0]) or "")
    assert value_rule("hnsw", "cos", "i8").problem([1e5, 0]) is None  # cos: each unit vector scaled
    assert value_rule("hnsw", "l2sq", "bf16").problem([1e15, 0]) is None


@pytest.mark.parametrize("quantization", QUANTIZATIONS)
@pytest.mark.parametrize("metric", METRICS)
@pytest.mark.parametrize("kind", KINDS)
def test_every_accepted_vector_scores_finitely(kind: str, metric: str, quantization: str) -> None:
    rule = value_rule(kind, metric, quantization)
    dims = 4
    edge = min(rule.limit, MAX_NORM / math.sqrt(dims)) * 0.999
    rows = np.array(
        [[edge] * dims, [-edge] * dims, [edge, 0, 0, 0], [1e-3, 0, 0, 0], [0, 0, 0, 0]],
        dtype=np.float32,
    )
    assert all(rule.problem(r) is None for r in rows)
    assert rule.usable(rows).all()
    index = make_index(kind, dims, metric, quantization=quantization)  # type: ignore[arg-type]
    index.add(np.arange(len(rows)), rows)
    for query in rows:
        ids, scores = index.search(query, len(rows))
        assert np.isfinite(scores).all(), (query, ids, scores)


def test_ranker_load_skips_unusable_rows_and_leaves_their_items_out() -> None:
    good = pack(1, 0, 0)
    rows = [
        (1, good),
        (2, pack(math.nan, 0, 0)),
        (3, "not bytes"),
        (4, pack(0, 1, 0)),
        (4, pack(0, math.inf, 0)),  # window 1 of item 4 is bad: the item is left out whole
        (5, pack(1, 0)),
        (6, pack(1e30, 1e30, 0)),
    ]
    index = ItemIndex(3, IndexChoice(backend="exact"), "memory")
    assert index.load_rows(rows, len(rows)) == 1  # before: ValueError, recall fell back for good
    assert index.ids().tolist() == [1] and index.skipped == {2, 3, 4, 5, 6}
    assert index.search(np.array([1, 0, 0], dtype=np.float32), 5)[0].tolist() == [1]
    index.upsert(7, np.array([math.nan, 0, 0]))  # an update of a bad vector: left out, no error
    assert 7 not in index and 7 in index.skipped
    index.upsert(2, np.array([0, 0, 1]))  # a good vector replaces the bad one
    assert 2 in index and 2 not in index.skipped


def test_deferred_hnsw_build_skips_unusable_rows() -> None:
    rows = [(1, pack(1, 0, 0)), (2, pack(0, 1, 0)), (2, pack(math.nan, 0, 0)), (3, b"\x00")]
    build = DeferredBuild(IndexChoice(backend="hnsw", quantization="f16"), 3, len(rows), None)
    build.run(rows, len(rows))
    assert build.graph is not None
    assert sorted(build.graph.ids().tolist()) == [1]
    assert not any(k in build.graph for k in keys_of(2, 2).tolist())


def test_model_vector_that_is_not_finite_is_not_stored(tmp_path: Path) -> None:
    conn = sqlite3.connect(str(tmp_path / "m.sqlite"), isolation_level=None)
    schema.migrate(conn)
    now = time.time()
    conn.execute(
        "INSERT INTO memories (content, created_at, updated_at) VALUES ('m', ?, ?)", (now, now)
    )
    assert put_vector(sqlite_tx(conn), "memory", 1, Vec(pack(1, 0, 0), 3, "m", "r"))
    # A model gone wrong: NaN. Nothing of it is stored, and the old vector goes (now missing).
    assert not put_vector(sqlite_tx(conn), "memory", 1, Vec(pack(math.nan, 0, 0), 3, "m", "r2"))
    assert conn.execute("SELECT count(*) FROM vectors").fetchone() == (0,)
