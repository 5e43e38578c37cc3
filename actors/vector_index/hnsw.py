"""The ``hnsw`` backend: a usearch HNSW graph (https://github.com/unum-cloud/usearch).

Options are the reference's ``--vec-*`` flags: ``quantization`` (the scalar
kind the graph stores: f32, f16, bf16, i8; i8 suits ``cos`` only, as it
clips components to [-1, 1]), ``connectivity`` (M), ``expansion_add``
(efConstruction) and ``expansion_search`` (efSearch).

usearch returns distances; they become scores, higher is better:
``1 - distance`` for cos and ip, ``-distance`` for l2sq.

Filtering (``allowed``): usearch's Python search takes no predicate, so a
filtered search asks for more neighbours than ``k`` (``k`` divided by the
allowed share, twice over) and keeps the allowed ones, widening until it has
``k`` of them. When the allowed ids are few (at most `EXACT_FILTER_LIMIT`,
or under `EXACT_FILTER_SHARE` of the index) it scores them exactly instead:
fetching a few thousand vectors beats walking most of the graph.

Removal marks graph nodes deleted (usearch keeps them as waypoints);
`reindex` rebuilds the graph from the vectors it holds.

`save` and `load` keep a built graph across restarts (building one of
1,000,000 vectors takes minutes); a loaded graph is only a head start: its
owner reconciles it with the table (`index.reconcile_batches`).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import numpy as np
import numpy.typing as npt

# isort: off
from .. import native  # noqa: F401 - loaded before usearch (actors/native.py)
from usearch.index import Index, ScalarKind

# isort: on

from ...supervisors import private
from .arrays import (
    Allowed,
    Ids,
    Mask,
    Metric,
    Quantization,
    Scores,
    StatValue,
    Vectors,
    allowed_count,
    allowed_ids,
    allowed_mask,
    as_batch,
    as_query,
    check_dims,
    normalized,
    similarity,
    top_k,
)

EXACT_FILTER_LIMIT = 4096  # allowed ids scored exactly rather than through the graph
EXACT_FILTER_SHARE = 0.02  # ... or when they are under this share of the index
GET_BATCH = 65536  # vectors fetched from usearch at once by `reindex`


class HnswVectors:
    """`VectorIndex` on a usearch graph: approximate, fast at millions of vectors."""

    kind = "hnsw"

    def __init__(
        self,
        dims: int,
        metric: Metric = "cos",
        *,
        quantization: Quantization = "f32",
        connectivity: int = 16,
        expansion_add: int = 200,
        expansion_search: int = 128,
    ) -> None:
        check_dims(dims)
        self.dims = dims
        self.metric: Metric = metric
        self.quantization: Quantization = quantization
        self.connectivity = connectivity
        self.expansion_add = expansion_add
        self.expansion_search = expansion_search
        self._index = self._new_index()
        self._deleted = 0  # nodes removed since the graph was built (left as waypoints)

    def _new_index(self) -> Index:
        return Index(
            ndim=self.dims,
            metric=self.metric,
            dtype=self.quantization,
            connectivity=self.connectivity,
            expansion_add=self.expansion_add,
            expansion_search=self.expansion_search,
        )

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, item_id: object) -> bool:
        if not isinstance(item_id, int | np.integer):
            return False
        return bool(self._index.contains(int(item_id)))

    def add(self, ids: npt.ArrayLike, vectors: npt.ArrayLike, threads: int = 0) -> None:
        """Upsert (an existing id is removed, then added). ``threads``: 0 = every core."""
        id_arr, vecs = as_batch(ids, vectors, self.dims)
        if len(id_arr) == 0:
            return
        present = np.asarray(self._index.contains(id_arr), dtype=bool).reshape(-1)
        if present.any():
            self.remove(id_arr[present])
        self._index.add(id_arr, vecs, threads=threads)

    def remove(self, ids: npt.ArrayLike) -> None:
        id_arr = np.atleast_1d(np.asarray(ids, dtype=np.int64))
        if len(id_arr) == 0 or len(self._index) == 0:
            return
        removed = np.asarray(self._index.remove(id_arr))
        self._deleted += int(removed.sum())

    def _scores(self, distances: npt.NDArray[np.float32]) -> Scores:
        d = np.asarray(distances, dtype=np.float32)
        return -d if self.metric == "l2sq" else (1.0 - d).astype(np.float32)

    def search(self, query: npt.ArrayLike, k: int, allowed: Allowed = None) -> tuple[Ids, Scores]:
        q = as_query(query, self.dims)
        size = len(self._index)
        if k <= 0 or size == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        count = allowed_count(allowed)
        if allowed is not None and count is not None:
            if count == 0:
                return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
            if count <= EXACT_FILTER_LIMIT or count < EXACT_FILTER_SHARE * size:
                return self._exact_among(q, k, allowed)
        want = k if count is None else min(size, int(2 * k * size / max(count, 1)) + k)
        while True:
            want = min(want, size)
            found = self._index.search(q, want, threads=1)
            ids = np.asarray(found.keys, dtype=np.int64)
            scores = self._scores(found.distances)
            ok = allowed_mask(ids, allowed)
            if ok is not None:
                ids, scores = ids[ok], scores[ok]
            if len(ids) >= k or want >= size:
                return top_k(ids, scores, k)
            want *= 4

    def _exact_among(self, q: Vectors, k: int, allowed: Allowed) -> tuple[Ids, Scores]:
        """Score the allowed ids exactly from their stored (dequantized) vectors."""
        assert allowed is not None
        candidates = allowed_ids(allowed)
        present = candidates[np.asarray(self._index.contains(candidates), dtype=bool).reshape(-1)]
        if len(present) == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        rows = self._vectors(present)
        if self.metric == "cos":
            rows, q = normalized(rows), normalized(q)
        return top_k(present, similarity(rows, q, self.metric), k)

    def _vectors(self, ids: Ids) -> Vectors:
        got = self._index.get(ids, dtype=ScalarKind.F32)
        return np.asarray(got, dtype=np.float32).reshape(len(ids), self.dims)

    def get(self, item_id: int) -> Vectors | None:
        if int(item_id) not in self:
            return None
        return self._vectors(np.array([int(item_id)], dtype=np.int64))[0]

    def get_many(self, ids: npt.ArrayLike) -> tuple[Mask, Vectors]:
        id_arr = np.atleast_1d(np.asarray(ids, dtype=np.int64))
        if len(id_arr) == 0 or len(self._index) == 0:
            return np.zeros(len(id_arr), dtype=bool), np.zeros((0, self.dims), dtype=np.float32)
        found = np.asarray(self._index.contains(id_arr), dtype=bool).reshape(-1)
        if not found.any():
            return found, np.zeros((0, self.dims), dtype=np.float32)
        return found, self._vectors(id_arr[found])

    def save(self, path: Path) -> None:
        """Write the graph to ``path`` (private, atomically: a temporary file renamed over it)."""
        temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        private.create_file(temp)
        try:
            self._index.save(str(temp))
            os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise

    def load(self, path: Path) -> bool:
        """Replace the graph with the one saved at ``path``; False (graph unchanged) if there
        is none or it does not fit this index (dims, quantization, metric) or cannot be read."""
        if not path.is_file():
            return False
        fresh = self._new_index()
        try:
            fresh.load(str(path))
        except (RuntimeError, ValueError, OSError):
            return False
        if fresh.ndim != self.dims or fresh.dtype.name.lower() != self.quantization:
            return False
        if fresh.metric_kind != self._index.metric_kind:
            return False
        self._index = fresh
        self._deleted = 0
        return True

    def ids(self) -> Ids:
        return np.asarray(self._index.keys, dtype=np.int64).copy()

    def reindex(self) -> None:
        """A fresh graph of the vectors held (without the deleted waypoints)."""
        ids = self.ids()
        fresh = self._new_index()
        for start in range(0, len(ids), GET_BATCH):
            part = ids[start : start + GET_BATCH]
            fresh.add(part, self._vectors(part))
        self._index = fresh
        self._deleted = 0

    def stats(self) -> dict[str, StatValue]:
        return {
            "backend": self.kind,
            "metric": self.metric,
            "dims": self.dims,
            "vectors": len(self._index),
            "quantization": self.quantization,
            "connectivity": self.connectivity,
            "expansion_add": self.expansion_add,
            "expansion_search": self.expansion_search,
            "deleted_nodes": self._deleted,
            "memory_bytes": int(self._index.memory_usage),
        }
