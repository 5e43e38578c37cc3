"""Array types and checks shared by the vector index backends (see `index` for the interface)."""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass
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


F32_MAX = float(np.finfo(np.float32).max)  # ~3.4e38
F16_MAX = 65504.0  # the largest half-precision value
MAX_NORM = 1e18  # a vector's length: every score of two such vectors is finite in float32
MAX_REPORTED = 20  # ids of unusable rows a report lists (the count is whole)
CHECK_ROWS = 8192  # rows `ValueRule.usable` checks at a time


@dataclass(frozen=True)
class ValueRule:
    """What a vector must be to be stored, indexed and scored without an overflow or a NaN.

    The table keeps float32; an hnsw index may keep a narrower type
    (``[vectors] quantization``). A vector is usable when, converted to the
    stored type, every component is finite and within ``limit`` (the widest
    value that type holds unchanged: float32's range; ±65,504 for f16; [-1, 1]
    for i8 under ``ip``/``l2sq``, which it clips), and its length is at most
    `MAX_NORM` (so a dot product or squared distance of two of them is finite
    in float32). Used for every vector a client sends (before its transaction)
    and every row loaded from the table (a row that fails is skipped).
    """

    limit: float = F32_MAX
    stored: str = "float32"

    def problem(self, given: npt.ArrayLike, field: str = "embedding") -> str | None:
        """Why ``given`` (the values as sent, or as read) is not usable, naming ``field``; None if it is."""
        wide = np.asarray(given, dtype=np.float64).reshape(-1)
        with np.errstate(over="ignore", invalid="ignore"):
            narrow = wide.astype(np.float32)
        bad = ~np.isfinite(narrow) | (np.abs(narrow) > self.limit)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            value = float(wide[i])
            if not np.isfinite(value):
                return f"`{field}`[{i}] is {value}: every value must be a finite number"
            return (
                f"`{field}`[{i}] is {value:g}, beyond what {self.stored} holds "
                f"(at most {self.limit:g} in magnitude): scale the vector down"
            )
        norm = float(np.linalg.norm(narrow.astype(np.float64)))
        if norm > MAX_NORM:
            return (
                f"`{field}` has length {norm:.3g}; at most {MAX_NORM:g} is accepted "
                "(scores of longer vectors overflow float32): scale the vector down"
            )
        return None

    def usable(self, vectors: Vectors) -> Mask:
        """Which rows of a float32 (n, dims) matrix pass (`problem` says why one does not).

        Checked `CHECK_ROWS` rows at a time, in float32: no copy of a large load.
        A NaN or infinite value makes the squared length NaN or inf, and a squared
        length that overflows float32 is inf: over the bound, as it should be.
        """
        ok = np.zeros(len(vectors), dtype=bool)
        with np.errstate(over="ignore", invalid="ignore"):
            for start in range(0, len(vectors), CHECK_ROWS):
                part = vectors[start : start + CHECK_ROWS]
                squares = np.einsum("ij,ij->i", part, part)  # NaN or inf: not <= the bound
                passed = squares <= MAX_NORM**2  # so every |v| <= MAX_NORM as well
                if self.limit < MAX_NORM:
                    passed &= (part.max(axis=1) <= self.limit) & (part.min(axis=1) >= -self.limit)
                ok[start : start + CHECK_ROWS] = passed
        return ok


def value_rule(kind: str, metric: str, quantization: str = "f32") -> ValueRule:
    """The `ValueRule` of an index of backend ``kind`` (``auto`` may become hnsw, so its
    quantization counts), ``metric`` and ``quantization`` (hnsw's stored type)."""
    if kind not in ("hnsw", "auto"):
        return ValueRule()
    if quantization == "f16":
        return ValueRule(F16_MAX, 'half precision ([vectors] quantization = "f16")')
    if quantization == "i8" and metric != "cos":
        return ValueRule(
            1.0, f'8-bit integers ([vectors] quantization = "i8" under metric {metric})'
        )
    return ValueRule()  # bf16 has float32's range; i8 under cos scales each unit vector


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
