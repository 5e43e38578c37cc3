"""One interface for every vector index backend, and the factory that makes them.

::

    index = make_index("hnsw", dims=384, metric="cos", quantization="f16")
    index.add(ids, vectors)              # upsert: int64 ids (n,), float32 vectors (n, dims)
    ids, scores = index.search(query, k=10, allowed={3, 5, 8})
    index.remove(ids)

Backends (`KINDS`):

- ``exact``: brute force over a numpy matrix (`exact.ExactVectors`). Always
  right; a query costs one matrix-vector product (~0.1 s at 1,000,000 x 384
  on 2 cores).
- ``hnsw``: a usearch graph (`hnsw.HnswVectors`): approximate, about a
  millisecond per query at 1,000,000 vectors, with optional scalar
  quantization (f16, bf16, i8) of the stored vectors.
- ``ivf``: k-means IVF-Flat in numpy (`ivf.IvfVectors`): exact until trained,
  then probes the ``nprobe`` closest of ``nlist`` cells.

Scores, best first, are *higher is better* for every metric: the cosine
similarity (``cos``), the dot product (``ip``) or the negated squared
Euclidean distance (``l2sq``: ``-|q - v|^2``).

An id holds one vector; adding an id again replaces its vector (upsert).
Callers with several vectors per item (the windows of a long text) key each
vector separately (see ``actors.ranker.vectors``).

``allowed`` restricts a search to some ids, inside the search (a filtered id
never takes a slot of the top k): a set of ids, or a boolean numpy array
indexed by id (ids beyond its end are not allowed), or an `arrays.IdFilter`.

Consistency with the database: the SQLite table is the truth. An index is
memory only: it is built from the table at start, and kept
current by the writes that follow; after a crash nothing of it survives to
disagree with the table. `reconcile` brings an index that already holds
vectors (a long-lived one, after another process wrote the table) back to a
given (ids, vectors) truth: it removes ids the table no longer has and
upserts the missing and changed ones.

Thread-safety: none. Each owner serialises its calls (the ranker actor, the
vector tools' actor).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

from .arrays import (
    KINDS,
    MAX_DIMS,
    METRICS,
    QUANTIZATIONS,
    Allowed,
    IdFilter,
    Ids,
    Kind,
    Mask,
    Metric,
    Quantization,
    Scores,
    StatValue,
    Vectors,
    as_batch,
    check_dims,
    normalized,
)
from .exact import ExactVectors
from .hnsw import HnswVectors
from .ivf import IvfVectors

__all__ = [
    "KINDS",
    "MAX_DIMS",
    "METRICS",
    "QUANTIZATIONS",
    "Allowed",
    "IdFilter",
    "Ids",
    "Kind",
    "Mask",
    "Metric",
    "Quantization",
    "Scores",
    "StatValue",
    "VectorIndex",
    "Vectors",
    "make_index",
    "reconcile",
]


class VectorIndex(Protocol):
    """What every backend offers. ``kind``/``dims``/``metric`` never change."""

    kind: str
    dims: int
    metric: Metric

    def add(self, ids: npt.ArrayLike, vectors: npt.ArrayLike) -> None:
        """Upsert: each id gets its vector (replacing the one it had).

        Error handling: `ValueError` when ``vectors`` is not (len(ids), dims),
        or ids repeat within the call; the index is then unchanged.
        """
        ...

    def remove(self, ids: npt.ArrayLike) -> None:
        """Forget these ids; unknown ones are ignored."""
        ...

    def search(self, query: npt.ArrayLike, k: int, allowed: Allowed = None) -> tuple[Ids, Scores]:
        """The ``k`` best ids (distinct) and their scores, best first (see the module doc).

        Fewer than ``k`` when fewer are indexed (or allowed). `ValueError` if
        ``query`` is not (dims,).
        """
        ...

    def get(self, item_id: int) -> Vectors | None:
        """The stored vector of ``item_id`` (as the index holds it: normalised for
        ``cos``, dequantized for a quantized hnsw), or None."""
        ...

    def ids(self) -> Ids:
        """Every indexed id, in no particular order."""
        ...

    def reindex(self) -> None:
        """Rebuild internal structures from the vectors held (ivf: retrain k-means;
        hnsw: rebuild the graph without its deleted nodes; exact: nothing)."""
        ...

    def __contains__(self, item_id: object) -> bool: ...

    def __len__(self) -> int: ...

    def stats(self) -> dict[str, StatValue]:
        """Backend, size, memory and parameters, for ``vector_store_stats`` and logs."""
        ...


def make_index(
    kind: Kind,
    dims: int,
    metric: Metric = "cos",
    *,
    quantization: Quantization = "f32",
    connectivity: int = 16,
    expansion_add: int = 200,
    expansion_search: int = 64,
    nlist: int = 256,
    nprobe: int = 8,
) -> VectorIndex:
    """A new, empty index of backend ``kind`` (options a backend does not use are ignored).

    ``quantization``, ``connectivity``, ``expansion_*``: hnsw (usearch's
    scalar kind, graph degree M, efConstruction, efSearch). ``nlist``,
    ``nprobe``: ivf. Error handling: `ValueError` on an unknown kind or metric,
    or dims outside 1-`MAX_DIMS`.
    """
    check_dims(dims)
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r} (known: {', '.join(METRICS)})")
    if kind == "exact":
        return ExactVectors(dims, metric)
    if kind == "hnsw":
        return HnswVectors(
            dims,
            metric,
            quantization=quantization,
            connectivity=connectivity,
            expansion_add=expansion_add,
            expansion_search=expansion_search,
        )
    if kind == "ivf":
        return IvfVectors(dims, metric, nlist=nlist, nprobe=nprobe)
    raise ValueError(f"unknown index backend {kind!r} (known: {', '.join(KINDS)})")


def reconcile(index: VectorIndex, ids: npt.ArrayLike, vectors: npt.ArrayLike) -> dict[str, int]:
    """Make ``index`` hold exactly (``ids``, ``vectors``), the table's truth.

    Ids the index holds but the truth does not are removed; ids missing from
    the index, or whose stored vector differs (beyond quantization noise:
    cosine < 0.999, or a relative difference > 1% otherwise), are upserted.
    Returns the counts ``removed``, ``added``, ``updated``.
    """
    truth_ids, truth = as_batch(ids, vectors, index.dims)
    held = index.ids()
    stale = np.setdiff1d(held, truth_ids, assume_unique=True)
    if len(stale):
        index.remove(stale)
    have = np.isin(truth_ids, held)
    changed: list[int] = []
    for row in np.flatnonzero(have):
        stored = index.get(int(truth_ids[row]))
        if stored is None or _differs(stored, truth[row], index.metric):
            changed.append(int(row))
    todo = np.concatenate([np.flatnonzero(~have), np.asarray(changed, dtype=np.int64)])
    if len(todo):
        index.add(truth_ids[todo], truth[todo])
    return {"removed": len(stale), "added": int((~have).sum()), "updated": len(changed)}


def _differs(stored: Vectors, wanted: Vectors, metric: Metric) -> bool:
    if metric == "cos":
        a, b = normalized(stored), normalized(wanted)
        return float(a @ b) < 0.999
    scale = max(float(np.linalg.norm(wanted)), 1e-12)
    return float(np.linalg.norm(stored - wanted)) / scale > 0.01
