"""In-memory vector indexes: one float32 matrix per kind (memory, entity, relation).

`ExactIndex` holds them in a numpy matrix and searches by exact cosine (dot
product of L2-normalised vectors). An approximate index for stores beyond
~100,000 vectors would offer the same methods (``__len__``, ``upsert``,
``remove``, ``search``); usearch, for instance, holds several vectors per key
with ``multi=True``.

An item may have several vectors: the windows (chunks) of a text longer than
the embedding model's token limit. The index holds one row per vector with a
row -> item map; an item's similarity to a query is the best of its rows
(max over chunks), and a search returns items, never the same one twice.

Filtering happens inside the search (``allowed``: a boolean array indexed by
item id), so a filtered item never takes a slot of the top k.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

INITIAL_CAPACITY = 1024
GROWTH_SLACK = 1024  # spare rows after a load; beyond that the matrix grows by half


class ExactIndex:
    """A growable (capacity, dim) float32 matrix, one row per vector.

    Row order is arbitrary (removal swaps in the last row); ``_rows`` maps an
    item to its rows, ``_ids`` a row to its item.
    """

    def __init__(self, dim: int, capacity: int = INITIAL_CAPACITY) -> None:
        self.dim = dim
        self._mat = np.zeros((max(capacity, 1), dim), dtype=np.float32)
        self._ids = np.zeros(max(capacity, 1), dtype=np.int64)
        self._rows: dict[int, list[int]] = {}
        self._n = 0  # rows in use
        self.version = 0  # bumped whenever the set of ids changes

    def __len__(self) -> int:
        """Items (not rows) in the index."""
        return len(self._rows)

    def __contains__(self, item_id: int) -> bool:
        return item_id in self._rows

    @property
    def rows(self) -> int:
        """Vectors (rows) in the index; more than `len` when items have several."""
        return self._n

    def ids(self) -> np.ndarray:
        """The item id of every row (an item with several vectors appears several times)."""
        return self._ids[: self._n]

    def vectors(self, item_id: int) -> np.ndarray | None:
        """The item's vectors, (n, dim), or None."""
        rows = self._rows.get(item_id)
        return None if rows is None else self._mat[rows]

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

    def upsert(self, item_id: int, vectors: np.ndarray) -> None:
        """Set the item's vectors: shape (dim,) for one, (n, dim) for several (replaces what it had)."""
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim == 1:
            vectors = vectors[None, :]
        if vectors.ndim != 2 or vectors.shape[1] != self.dim or len(vectors) == 0:
            raise ValueError(
                f"vectors of item {item_id} have shape {vectors.shape}, expected (n, {self.dim})"
            )
        rows = self._rows.get(item_id)
        if rows is not None and len(rows) == len(vectors):
            self._mat[rows] = vectors  # same number of windows: in place
            return
        if rows is not None:
            self.remove(item_id)
        n = len(vectors)
        self._grow(self._n + n)
        start = self._n
        self._mat[start : start + n] = vectors
        self._ids[start : start + n] = item_id
        self._rows[item_id] = list(range(start, start + n))
        self._n += n
        self.version += 1

    def load_rows(self, rows: Iterable[tuple[int, bytes]], count: int) -> int:
        """Replace the contents with up to ``count`` (item id, float32 bytes) rows, copied
        straight into the matrix (no intermediate copies: at 100,000 vectors those doubled
        the peak memory of a start). An item may come in several rows (its chunks). Rows of
        another length are skipped. Returns the rows loaded."""
        capacity = max(count + GROWTH_SLACK, INITIAL_CAPACITY)
        self._mat = np.zeros((capacity, self.dim), dtype=np.float32)
        self._ids = np.zeros(capacity, dtype=np.int64)
        self._rows = {}
        nbytes = self.dim * 4
        n = 0
        for item_id, blob in rows:
            if len(blob) != nbytes or n >= capacity:
                continue
            self._mat[n] = np.frombuffer(blob, dtype=np.float32)
            self._ids[n] = item_id
            self._rows.setdefault(int(item_id), []).append(n)
            n += 1
        self._n = n
        self.version += 1
        return n

    def remove(self, item_id: int) -> None:
        rows = self._rows.pop(item_id, None)
        if rows is None:
            return
        self.version += 1
        # Highest first: the last row is then never one of this item's own.
        for row in sorted(rows, reverse=True):
            last = self._n - 1
            if row != last:
                self._mat[row] = self._mat[last]
                moved = int(self._ids[last])
                self._ids[row] = moved
                peers = self._rows[moved]
                peers[peers.index(last)] = row
            self._n = last

    def scores(self, query: np.ndarray) -> np.ndarray:
        """Cosine of ``query`` with every row (row order = `ids`)."""
        return self._mat[: self._n] @ query.astype(np.float32, copy=False)

    def search(
        self, query: np.ndarray, k: int, allowed: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` best items (int64 ids, distinct) and their scores (float32), best first.

        An item's score is the best cosine of its vectors. ``allowed``: a
        boolean array indexed by item id; ids beyond its end, or False in it,
        are skipped.
        """
        empty = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        if self._n == 0 or k <= 0:
            return empty
        scores = self.scores(query)
        ids = self._ids[: self._n]
        valid = self._n
        if allowed is not None:
            ok = np.zeros(self._n, dtype=bool)
            inside = ids < len(allowed)
            ok[inside] = allowed[ids[inside]]
            scores = np.where(ok, scores, -np.inf)
            valid = int(ok.sum())
            if valid == 0:
                return empty
        k = min(k, len(self._rows))
        multi = self._n > len(self._rows)  # some item has several rows
        # The best rows, widened until they hold k distinct items (or every valid row).
        take = min(valid, 2 * k if multi else k)
        while True:
            if take < self._n:
                top = np.argpartition(-scores, take - 1)[:take]
            else:
                top = np.arange(self._n)
            top = top[np.argsort(-scores[top], kind="stable")]
            top = top[np.isfinite(scores[top])]
            if not multi:
                break
            _, first = np.unique(ids[top], return_index=True)
            if len(first) >= k or take >= valid:
                top = top[np.sort(first)]
                break
            take = min(valid, take * 2)
        top = top[:k]
        return ids[top].copy(), scores[top].astype(np.float32)
