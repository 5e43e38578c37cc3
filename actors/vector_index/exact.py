"""The ``exact`` backend: brute-force search over a growable numpy matrix.

Rows are packed (removal moves the last row into the hole) and the matrix
grows by half when full, so adding n vectors one at a time costs amortised
O(n) copies, not O(n^2). For ``cos`` the rows are stored normalised, so a
score is one dot product.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from .arrays import (
    Allowed,
    Ids,
    Mask,
    Metric,
    Scores,
    StatValue,
    Vectors,
    allowed_mask,
    as_batch,
    as_query,
    check_dims,
    normalized,
    similarity,
    top_k,
)

INITIAL_CAPACITY = 1024


class ExactVectors:
    """`VectorIndex` by exhaustive search: every result is the true top k."""

    kind = "exact"

    def __init__(self, dims: int, metric: Metric = "cos", capacity: int = INITIAL_CAPACITY) -> None:
        check_dims(dims)
        self.dims = dims
        self.metric: Metric = metric
        self._mat = np.zeros((max(capacity, 1), dims), dtype=np.float32)
        self._ids = np.zeros(max(capacity, 1), dtype=np.int64)
        self._row: dict[int, int] = {}  # id -> row
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def __contains__(self, item_id: object) -> bool:
        return item_id in self._row

    def reserve(self, capacity: int) -> None:
        """Make room for ``capacity`` vectors at once (a bulk load then copies nothing)."""
        if capacity <= self._mat.shape[0]:
            return
        mat = np.zeros((capacity, self.dims), dtype=np.float32)
        mat[: self._n] = self._mat[: self._n]
        ids = np.zeros(capacity, dtype=np.int64)
        ids[: self._n] = self._ids[: self._n]
        self._mat, self._ids = mat, ids

    def add(self, ids: npt.ArrayLike, vectors: npt.ArrayLike) -> None:
        id_arr, vecs = as_batch(ids, vectors, self.dims)
        if self.metric == "cos":
            vecs = normalized(vecs)
        rows = np.fromiter((self._row.get(int(i), -1) for i in id_arr), np.int64, len(id_arr))
        old = rows >= 0
        self._mat[rows[old]] = vecs[old]
        new = ~old
        count = int(new.sum())
        if count:
            need = self._n + count
            if need > self._mat.shape[0]:
                self.reserve(max(need, self._mat.shape[0] * 3 // 2))
            start = self._n
            self._mat[start:need] = vecs[new]
            self._ids[start:need] = id_arr[new]
            for offset, item_id in enumerate(id_arr[new].tolist()):
                self._row[item_id] = start + offset
            self._n = need

    def remove(self, ids: npt.ArrayLike) -> None:
        for item_id in np.atleast_1d(np.asarray(ids, dtype=np.int64)).tolist():
            row = self._row.pop(item_id, None)
            if row is None:
                continue
            last = self._n - 1
            if row != last:
                moved = int(self._ids[last])
                self._mat[row] = self._mat[last]
                self._ids[row] = moved
                self._row[moved] = row
            self._n = last

    def search(self, query: npt.ArrayLike, k: int, allowed: Allowed = None) -> tuple[Ids, Scores]:
        q = as_query(query, self.dims)
        if self.metric == "cos":
            q = normalized(q)
        ids = self._ids[: self._n]
        scores = similarity(self._mat[: self._n], q, self.metric)
        ok = allowed_mask(ids, allowed)
        if ok is not None:
            ids, scores = ids[ok], scores[ok]
        return top_k(ids, scores, k)

    def scores(self, query: npt.ArrayLike) -> tuple[Ids, Scores]:
        """Every id with its score against ``query`` (row order)."""
        q = as_query(query, self.dims)
        if self.metric == "cos":
            q = normalized(q)
        return self._ids[: self._n].copy(), similarity(self._mat[: self._n], q, self.metric)

    def get(self, item_id: int) -> Vectors | None:
        row = self._row.get(int(item_id))
        return None if row is None else self._mat[row].copy()

    def get_many(self, ids: npt.ArrayLike) -> tuple[Mask, Vectors]:
        id_arr = np.atleast_1d(np.asarray(ids, dtype=np.int64))
        rows = np.fromiter((self._row.get(int(i), -1) for i in id_arr), np.int64, len(id_arr))
        found = rows >= 0
        return found, self._mat[rows[found]]

    def matrix(self) -> tuple[Ids, Vectors]:
        """(ids, vectors) held, as views: valid until the next change."""
        return self._ids[: self._n], self._mat[: self._n]

    def ids(self) -> Ids:
        return self._ids[: self._n].copy()

    def reindex(self) -> None:
        """Nothing to rebuild; gives back the spare rows beyond a quarter of the size."""
        spare = self._mat.shape[0] - self._n
        if spare > max(INITIAL_CAPACITY, self._n // 4):
            keep = max(self._n + self._n // 4, INITIAL_CAPACITY)
            self._mat = self._mat[:keep].copy()
            self._ids = self._ids[:keep].copy()

    def stats(self) -> dict[str, StatValue]:
        return {
            "backend": self.kind,
            "metric": self.metric,
            "dims": self.dims,
            "vectors": self._n,
            "capacity": int(self._mat.shape[0]),
            "memory_bytes": int(self._mat.nbytes + self._ids.nbytes),
        }
