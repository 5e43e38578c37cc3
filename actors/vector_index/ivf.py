"""The ``ivf`` backend: k-means IVF-Flat in numpy.

``nlist`` centroids split the space into cells; each cell holds its vectors
in full precision (an `ExactVectors`). A query scores the centroids, then
searches the ``nprobe`` best cells exhaustively and merges their top k. A
filtered search (``allowed``) that finds fewer than k there probes the next
cells, closest first, until it has k.

Until it is trained the index is one exact cell, so results are always
right. It trains itself when it first holds `TRAIN_PER_LIST` vectors per
cell (``nlist * 39``, as Faiss advises), which happens during the bulk load
of a populated store; `reindex` retrains over the current vectors (after
heavy writes the cells drift from the data). Vectors added later go to their
closest cell without retraining.

k-means: `KMEANS_ITERATIONS` Lloyd rounds over a sample of at most
`TRAIN_SAMPLE_PER_LIST` vectors per cell, seeded with random distinct
vectors (a fixed seed: the same data trains the same cells). For ``cos`` the
vectors and centroids are unit length (spherical k-means).
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
    as_batch,
    as_query,
    check_dims,
    normalized,
    similarity,
    top_k,
)
from .exact import ExactVectors

TRAIN_PER_LIST = 39  # vectors per cell before the index trains itself
TRAIN_SAMPLE_PER_LIST = 256  # k-means sample: at most this many vectors per cell
KMEANS_ITERATIONS = 12
ASSIGN_BATCH = 16384  # vectors assigned to cells per matrix product
SEED = 15


class IvfVectors:
    """`VectorIndex` by inverted lists: exact until trained, then ``nprobe`` cells a query."""

    kind = "ivf"

    def __init__(self, dims: int, metric: Metric = "cos", *, nlist: int = 256, nprobe: int = 8):
        check_dims(dims)
        if nlist < 1 or nprobe < 1:
            raise ValueError(f"nlist and nprobe must be >= 1, not {nlist} and {nprobe}")
        self.dims = dims
        self.metric: Metric = metric
        self.nlist = nlist
        self.nprobe = nprobe
        self._centroids: Vectors | None = None
        self._cells: list[ExactVectors] = [ExactVectors(dims, metric)]
        self._cell_of: dict[int, int] = {}

    @property
    def trained(self) -> bool:
        return self._centroids is not None

    def __len__(self) -> int:
        return len(self._cell_of)

    def __contains__(self, item_id: object) -> bool:
        return item_id in self._cell_of

    def _assign(self, vecs: Vectors) -> npt.NDArray[np.int64]:
        assert self._centroids is not None
        out = np.empty(len(vecs), dtype=np.int64)
        for start in range(0, len(vecs), ASSIGN_BATCH):
            out[start : start + ASSIGN_BATCH] = _closest(
                vecs[start : start + ASSIGN_BATCH], self._centroids, self.metric
            )
        return out

    def add(self, ids: npt.ArrayLike, vectors: npt.ArrayLike) -> None:
        id_arr, vecs = as_batch(ids, vectors, self.dims)
        if len(id_arr) == 0:
            return
        if self.metric == "cos":
            vecs = normalized(vecs)
        cells = self._assign(vecs) if self.trained else np.zeros(len(id_arr), dtype=np.int64)
        moved = [
            (i, old)
            for i, (item_id, cell) in enumerate(zip(id_arr.tolist(), cells.tolist(), strict=True))
            if (old := self._cell_of.get(item_id)) is not None and old != cell
        ]
        for i, old in moved:
            self._cells[old].remove([int(id_arr[i])])
        for cell in np.unique(cells).tolist():
            chosen = cells == cell
            self._cells[cell].add(id_arr[chosen], vecs[chosen])
        self._cell_of.update(zip(id_arr.tolist(), cells.tolist(), strict=True))
        if not self.trained and len(self) >= self.nlist * TRAIN_PER_LIST:
            self.train()

    def remove(self, ids: npt.ArrayLike) -> None:
        for item_id in np.atleast_1d(np.asarray(ids, dtype=np.int64)).tolist():
            cell = self._cell_of.pop(item_id, None)
            if cell is not None:
                self._cells[cell].remove([item_id])

    def search(self, query: npt.ArrayLike, k: int, allowed: Allowed = None) -> tuple[Ids, Scores]:
        q = as_query(query, self.dims)
        if self._centroids is None:
            return self._cells[0].search(q, k, allowed)
        if self.metric == "cos":
            q = normalized(q)
        near = similarity(self._centroids, q, _coarse(self.metric))
        order = np.argsort(-near, kind="stable")
        found = [self._cells[cell].search(q, k, allowed) for cell in order[: self.nprobe].tolist()]
        have = sum(len(f[0]) for f in found)
        # A filter may leave the probed cells short of k: probe further cells until k.
        for cell in order[self.nprobe :].tolist() if allowed is not None else ():
            if have >= k:
                break
            found.append(self._cells[cell].search(q, k, allowed))
            have += len(found[-1][0])
        ids = np.concatenate([f[0] for f in found])
        scores = np.concatenate([f[1] for f in found])
        return top_k(ids, scores, k)

    def get(self, item_id: int) -> Vectors | None:
        cell = self._cell_of.get(int(item_id))
        return None if cell is None else self._cells[cell].get(item_id)

    def get_many(self, ids: npt.ArrayLike) -> tuple[Mask, Vectors]:
        id_arr = np.atleast_1d(np.asarray(ids, dtype=np.int64))
        found = [v for v in (self.get(int(i)) for i in id_arr)]
        mask = np.array([v is not None for v in found], dtype=bool)
        kept = [v for v in found if v is not None]
        return mask, np.stack(kept) if kept else np.zeros((0, self.dims), dtype=np.float32)

    def ids(self) -> Ids:
        return np.fromiter(self._cell_of, dtype=np.int64, count=len(self._cell_of))

    def _held(self) -> tuple[Ids, Vectors]:
        parts = [cell.matrix() for cell in self._cells if len(cell)]
        if not parts:
            return np.zeros(0, dtype=np.int64), np.zeros((0, self.dims), dtype=np.float32)
        return (
            np.concatenate([p[0] for p in parts]),
            np.concatenate([p[1] for p in parts]),
        )

    def train(self) -> None:
        """k-means over the vectors held, then every vector to its closest cell.

        With fewer vectors than ``nlist`` it stays one exact cell."""
        ids, vecs = self._held()
        if len(ids) < self.nlist:
            return
        self._centroids = kmeans(vecs, self.nlist, self.metric)
        cells = self._assign(vecs)
        fresh = [ExactVectors(self.dims, self.metric, capacity=1) for _ in range(self.nlist)]
        for cell in range(self.nlist):
            chosen = np.flatnonzero(cells == cell)
            fresh[cell].reserve(len(chosen) + len(chosen) // 4 + 16)
            fresh[cell].add(ids[chosen], vecs[chosen])
        self._cells = fresh
        self._cell_of = dict(zip(ids.tolist(), cells.tolist(), strict=True))

    def reindex(self) -> None:
        """Retrain the cells over the current vectors."""
        self.train()

    def stats(self) -> dict[str, StatValue]:
        sizes = [len(c) for c in self._cells]
        return {
            "backend": self.kind,
            "metric": self.metric,
            "dims": self.dims,
            "vectors": len(self),
            "trained": self.trained,
            "nlist": self.nlist,
            "nprobe": self.nprobe,
            "largest_cell": max(sizes) if sizes else 0,
            "memory_bytes": sum(int(c.stats()["memory_bytes"]) for c in self._cells),
        }


def _coarse(metric: Metric) -> Metric:
    """How vectors are compared to centroids: ip for unit vectors, l2sq otherwise."""
    return "l2sq" if metric == "l2sq" else "ip"


def _closest(vecs: Vectors, centroids: Vectors, metric: Metric) -> npt.NDArray[np.int64]:
    if metric == "l2sq":
        # argmin |x - c|^2 = argmax (2 x.c - |c|^2)
        sq = np.einsum("ij,ij->i", centroids, centroids)
        return np.argmax(2 * (vecs @ centroids.T) - sq, axis=1)
    return np.argmax(vecs @ centroids.T, axis=1)


def kmeans(vecs: Vectors, nlist: int, metric: Metric) -> Vectors:
    """``nlist`` centroids of ``vecs`` (Lloyd's algorithm on a sample; see the module doc)."""
    rng = np.random.default_rng(SEED)
    sample_size = min(len(vecs), nlist * TRAIN_SAMPLE_PER_LIST)
    sample = vecs[np.sort(rng.choice(len(vecs), sample_size, replace=False))]
    centroids = sample[rng.choice(len(sample), nlist, replace=False)].copy()
    for _ in range(KMEANS_ITERATIONS):
        cells = _closest(sample, centroids, metric)
        counts = np.bincount(cells, minlength=nlist)
        sums = np.zeros_like(centroids)
        filled = np.flatnonzero(counts)
        starts = (np.cumsum(counts) - counts)[filled]
        sums[filled] = np.add.reduceat(sample[np.argsort(cells, kind="stable")], starts, axis=0)
        empty = counts == 0
        centroids[~empty] = sums[~empty] / counts[~empty, None]
        if empty.any():  # an empty cell restarts at a random vector
            centroids[empty] = sample[rng.choice(len(sample), int(empty.sum()), replace=False)]
        if metric != "l2sq":
            centroids = normalized(centroids)
    return centroids.astype(np.float32)
