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
vector separately (see ``actors.ranker.item_index``).

``allowed`` restricts a search to some ids, inside the search (a filtered id
never takes a slot of the top k): a set of ids, or a boolean numpy array
indexed by id (ids beyond its end are not allowed), or an `arrays.IdFilter`.

Consistency with the database: the SQLite table is the truth. An index is
memory only: it is built from the table at start, and kept
current by the writes that follow; after a crash nothing of it survives to
disagree with the table. `reconcile` brings an index that already holds
vectors (a long-lived one, after another process wrote the table) back to a
given (ids, vectors) truth: it removes ids the table no longer has and
upserts the missing and changed ones; `reconcile_batches` does the same with
the truth read in batches. The ranker saves a built hnsw graph and, at the
next start, loads it and reconciles it with the table instead of building
it again (``actors.ranker.item_index``).

Thread-safety: none. Each owner serialises its calls (the ranker actor, the
vector tools' actor).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

import numpy as np
import numpy.typing as npt

from .arrays import (
    KINDS,
    MAX_DIMS,
    MAX_TOP_K,
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
    "MAX_TOP_K",
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
    "reconcile_batches",
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

    def get_many(self, ids: npt.ArrayLike) -> tuple[Mask, Vectors]:
        """Which of ``ids`` are held, and the stored vectors of those (in order), as `get`."""
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
    expansion_search: int = 128,
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
    return reconcile_batches(index, [as_batch(ids, vectors, index.dims)])


def reconcile_batches(index: VectorIndex, batches: Iterable[tuple[Ids, Vectors]]) -> dict[str, int]:
    """`reconcile` with the truth streamed in (ids, vectors) batches (a table read in parts)."""
    added = updated = 0
    seen: list[Ids] = []
    for truth_ids, truth in batches:
        found, stored = index.get_many(truth_ids)
        changed = np.zeros(len(truth_ids), dtype=bool)
        if found.any():
            changed[found] = _differs(stored, truth[found], index.metric)
        todo = ~found | changed
        if todo.any():
            index.add(truth_ids[todo], truth[todo])
        added += int((~found).sum())
        updated += int(changed.sum())
        seen.append(truth_ids)
    every = np.concatenate(seen) if seen else np.zeros(0, dtype=np.int64)
    stale = np.setdiff1d(index.ids(), every)
    if len(stale):
        index.remove(stale)
    return {"removed": len(stale), "added": added, "updated": updated}


def _differs(stored: Vectors, wanted: Vectors, metric: Metric) -> Mask:
    """Row by row: is the stored vector not the wanted one (beyond quantization noise)?"""
    if metric == "cos":
        return np.einsum("ij,ij->i", normalized(stored), normalized(wanted)) < 0.999
    scale = np.maximum(np.linalg.norm(wanted, axis=1), 1e-12)
    return np.linalg.norm(stored - wanted, axis=1) / scale > 0.01
