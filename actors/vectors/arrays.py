"""Array types and checks shared by the vector index backends (see `index` for the interface)."""

from __future__ import annotations

from collections.abc import Set
from typing import Literal, Protocol, TypeAlias, get_args

import numpy as np
import numpy.typing as npt

from ...protocol.plural import plural

Kind = Literal["exact", "hnsw", "ivf"]
Metric = Literal["cos", "ip", "l2sq"]
Quantization = Literal["f32", "f16", "bf16", "i8"]
KINDS: tuple[str, ...] = get_args(Kind)
METRICS: tuple[str, ...] = get_args(Metric)
QUANTIZATIONS: tuple[str, ...] = get_args(Quantization)

Ids: TypeAlias = npt.NDArray[np.int64]
Vectors: TypeAlias = npt.NDArray[np.float32]
Scores: TypeAlias = npt.NDArray[np.float32]
Mask: TypeAlias = npt.NDArray[np.bool_]


class IdFilter(Protocol):
    """An ``allowed`` given as a function of ids (for ids that encode something, such as
    the ranker's window keys): which ids pass, how many may pass, and which (when few)."""

    def __call__(self, ids: Ids) -> Mask: ...

    def count(self) -> int:
        """At most how many ids pass (it picks the search strategy)."""
        ...

    def keys(self) -> Ids:
        """Every id that passes (called only when `count` is small)."""
        ...


Allowed: TypeAlias = Set[int] | Mask | IdFilter | None
StatValue: TypeAlias = int | float | str | bool

MAX_TOP_K = 100  # results a vector tool may ask for (the reference's limit; indexes allow more)
MAX_DIMS = 4096  # the largest embedding the vector tools accept (the reference's limit)


def check_dims(dims: int) -> None:
    if not 1 <= dims <= MAX_DIMS:
        raise ValueError(f"dims must be 1-{MAX_DIMS}, not {dims}")


def as_batch(ids: npt.ArrayLike, vectors: npt.ArrayLike, dims: int) -> tuple[Ids, Vectors]:
    """``ids`` as int64 (n,) and ``vectors`` as float32 (n, dims), checked."""
    id_arr = np.atleast_1d(np.asarray(ids, dtype=np.int64))
    vec_arr = np.asarray(vectors, dtype=np.float32)
    if vec_arr.ndim == 1 and len(id_arr) == 1:
        vec_arr = vec_arr[None, :]
    if vec_arr.ndim != 2 or vec_arr.shape != (len(id_arr), dims):
        raise ValueError(
            f"vectors have shape {vec_arr.shape}, expected ({len(id_arr)}, {dims}) "
            f"for {plural(len(id_arr), 'id')} of {plural(dims, 'dimension')}"
        )
    if len(np.unique(id_arr)) != len(id_arr):
        raise ValueError("an id appears more than once in one add")
    if not np.isfinite(vec_arr).all():
        raise ValueError("vectors must be finite (no NaN or infinity)")
    return id_arr, vec_arr


def as_query(query: npt.ArrayLike, dims: int) -> Vectors:
    q = np.asarray(query, dtype=np.float32)
    if q.shape != (dims,):
        raise ValueError(f"the query has shape {q.shape}, expected ({dims},)")
    return q


def normalized(vectors: Vectors) -> Vectors:
    """Rows scaled to unit length (a zero row stays zero)."""
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return (vectors / np.where(norms > 0, norms, 1.0)).astype(np.float32, copy=False)


def allowed_mask(ids: Ids, allowed: Allowed) -> Mask | None:
    """Which of ``ids`` are ``allowed`` (None: all)."""
    if allowed is None:
        return None
    if callable(allowed):
        return allowed(ids)
    if isinstance(allowed, np.ndarray):
        ok = np.zeros(len(ids), dtype=bool)
        inside = (ids >= 0) & (ids < len(allowed))
        ok[inside] = allowed[ids[inside]]
        return ok
    if not allowed:
        return np.zeros(len(ids), dtype=bool)
    return np.isin(ids, np.fromiter(allowed, dtype=np.int64, count=len(allowed)))


def allowed_count(allowed: Allowed) -> int | None:
    """How many ids ``allowed`` admits at most (None: no limit)."""
    if allowed is None:
        return None
    if callable(allowed):
        return allowed.count()
    if isinstance(allowed, np.ndarray):
        return int(np.count_nonzero(allowed))
    return len(allowed)


def allowed_ids(allowed: Set[int] | Mask | IdFilter) -> Ids:
    if callable(allowed):
        return allowed.keys()
    if isinstance(allowed, np.ndarray):
        return np.flatnonzero(allowed).astype(np.int64)
    return np.fromiter(allowed, dtype=np.int64, count=len(allowed))


def top_k(ids: Ids, scores: Scores, k: int) -> tuple[Ids, Scores]:
    """The ``k`` best of (ids, scores), best first (ties: lower id first)."""
    if k <= 0 or len(ids) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    if k < len(scores):
        part = np.argpartition(-scores, k - 1)[:k]
        ids, scores = ids[part], scores[part]
    order = np.lexsort((ids, -scores))
    return ids[order].astype(np.int64), scores[order].astype(np.float32)


def similarity(rows: Vectors, query: Vectors, metric: Metric) -> Scores:
    """Score of ``query`` against each row (rows already normalised for ``cos``)."""
    if metric == "l2sq":
        diff = rows - query
        return -np.einsum("ij,ij->i", diff, diff)
    return rows @ query
