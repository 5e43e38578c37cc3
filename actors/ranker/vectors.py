"""In-memory vector indexes: one float32 matrix per kind (memory, entity, relation).

`VectorIndex` is the interface the ranker uses; `ExactIndex` implements it
with a numpy matrix and an exact cosine (dot product of L2-normalised vectors)
search. An approximate index (usearch, HNSW) can implement the same four
methods for stores beyond ~100,000 vectors.

Filtering happens inside the search (``allowed``: a boolean array indexed by
item id), so a filtered item never takes a slot of the top k.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

import numpy as np

INITIAL_CAPACITY = 1024
GROWTH_SLACK = 1024  # spare rows after a load; beyond that the matrix grows by half


class VectorIndex(Protocol):
    dim: int

    def __len__(self) -> int: ...

    def upsert(self, item_id: int, vector: np.ndarray) -> None: ...

    def remove(self, item_id: int) -> None: ...

    def search(
        self, query: np.ndarray, k: int, allowed: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` best item ids (int64) and their cosine scores (float32), best first.

        ``allowed``: a boolean array indexed by item id; ids beyond its end, or
        False in it, are skipped.
        """
        ...


class ExactIndex:
    """A growable (capacity, dim) float32 matrix; row order is arbitrary (removal swaps in the last row)."""

    def __init__(self, dim: int, capacity: int = INITIAL_CAPACITY) -> None:
        self.dim = dim
        self._mat = np.zeros((max(capacity, 1), dim), dtype=np.float32)
        self._ids = np.zeros(max(capacity, 1), dtype=np.int64)
        self._row: dict[int, int] = {}
        self._n = 0
        self.version = 0  # bumped whenever the set of ids changes

    def __len__(self) -> int:
        return self._n

    def __contains__(self, item_id: int) -> bool:
        return item_id in self._row

    def ids(self) -> np.ndarray:
        return self._ids[: self._n]

    def vector(self, item_id: int) -> np.ndarray | None:
        row = self._row.get(item_id)
        return None if row is None else self._mat[row]

    def _grow(self, need: int) -> None:
        cap = self._mat.shape[0]
        if need <= cap:
            return
        new_cap = max(need, cap + cap // 2)
        mat = np.zeros((new_cap, self.dim), dtype=np.float32)
        mat[: self._n] = self._mat[: self._n]
        ids = np.zeros(new_cap, dtype=np.int64)
        ids[: self._n] = self._ids[: self._n]
        self._mat, self._ids = mat, ids

    def upsert(self, item_id: int, vector: np.ndarray) -> None:
        if vector.shape != (self.dim,):
            raise ValueError(
                f"vector of item {item_id} has shape {vector.shape}, expected ({self.dim},)"
            )
        row = self._row.get(item_id)
        if row is None:
            self._grow(self._n + 1)
            row = self._n
            self._n += 1
            self._row[item_id] = row
            self._ids[row] = item_id
            self.version += 1
        self._mat[row] = vector

    def load_rows(self, rows: Iterable[tuple[int, bytes]], count: int) -> int:
        """Replace the contents with up to ``count`` (id, float32 bytes) rows, copied straight
        into the matrix (no intermediate copies: at 100,000 vectors those doubled the peak
        memory of a start). Rows of another length are skipped. Returns the rows loaded."""
        capacity = max(count + GROWTH_SLACK, INITIAL_CAPACITY)
        self._mat = np.zeros((capacity, self.dim), dtype=np.float32)
        self._ids = np.zeros(capacity, dtype=np.int64)
        self._row = {}
        nbytes = self.dim * 4
        n = 0
        for item_id, blob in rows:
            if len(blob) != nbytes or n >= capacity:
                continue
            self._mat[n] = np.frombuffer(blob, dtype=np.float32)
            self._ids[n] = item_id
            self._row[int(item_id)] = n
            n += 1
        self._n = n
        self.version += 1
        return n

    def remove(self, item_id: int) -> None:
        row = self._row.pop(item_id, None)
        if row is None:
            return
        self.version += 1
        last = self._n - 1
        if row != last:
            self._mat[row] = self._mat[last]
            moved = int(self._ids[last])
            self._ids[row] = moved
            self._row[moved] = row
        self._n = last

    def scores(self, query: np.ndarray) -> np.ndarray:
        """Cosine of ``query`` with every row (row order = `ids`)."""
        return self._mat[: self._n] @ query.astype(np.float32, copy=False)

    def search(
        self, query: np.ndarray, k: int, allowed: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        if self._n == 0 or k <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        scores = self.scores(query)
        ids = self._ids[: self._n]
        if allowed is not None:
            ok = np.zeros(self._n, dtype=bool)
            inside = ids < len(allowed)
            ok[inside] = allowed[ids[inside]]
            scores = np.where(ok, scores, -np.inf)
            k = min(k, int(ok.sum()))
            if k == 0:
                return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        k = min(k, self._n)
        top = np.argpartition(-scores, k - 1)[:k] if k < self._n else np.arange(self._n)
        top = top[np.argsort(-scores[top], kind="stable")]
        return ids[top].copy(), scores[top].astype(np.float32)
