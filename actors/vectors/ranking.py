"""The arithmetic of the vector tools: recommendation queries, MMR, Reciprocal Rank Fusion.

Pure functions over numpy arrays and id lists; the handlers (``tools``)
fetch the candidates and call these.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

RRF_K = 60  # Reciprocal Rank Fusion's constant (Cormack et al.; mcp-memory's)

Matrix = npt.NDArray[np.float32]


def unit(vectors: Matrix) -> Matrix:
    """Rows scaled to unit length (a zero row stays zero)."""
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return (vectors / np.where(norms > 0, norms, 1.0)).astype(np.float32, copy=False)


def recommend_query(positive: Matrix, negative: Matrix, normalize: bool) -> Matrix:
    """The mean of the positive examples minus the mean of the negative ones (none: zero).

    With ``normalize`` (the cosine metric) each example counts by its
    direction only, so a long vector does not outweigh the others.
    """
    if normalize:
        positive = unit(positive)
        negative = unit(negative) if len(negative) else negative
    query = positive.mean(axis=0)
    if len(negative):
        query = query - negative.mean(axis=0)
    return query.astype(np.float32)


def mmr(
    query: Matrix, ids: Sequence[int], vectors: Matrix, top_k: int, lam: float
) -> list[tuple[int, float]]:
    """Maximal Marginal Relevance: pick ``top_k`` of the candidates one at a time.

    Each step takes the candidate maximising ``lam * cos(q, d) - (1 - lam) *
    max cos(d, s)`` over those already selected ``s`` (the first pick is the
    most relevant). Ties go to the earlier candidate. Returns (id, cos(q, d))
    in selection order.
    """
    if not len(ids) or top_k <= 0:
        return []
    cands = unit(np.asarray(vectors, dtype=np.float32))
    q = unit(np.asarray(query, dtype=np.float32)[None, :])[0]
    relevance = cands @ q
    redundancy = np.full(len(ids), -np.inf, dtype=np.float32)
    chosen: list[int] = []
    free = np.ones(len(ids), dtype=bool)
    for _ in range(min(top_k, len(ids))):
        penalty = np.where(np.isfinite(redundancy), redundancy, 0.0)
        marginal = lam * relevance - (1.0 - lam) * penalty
        marginal = np.where(free, marginal, -np.inf)
        best = int(np.argmax(marginal))
        chosen.append(best)
        free[best] = False
        redundancy = np.maximum(redundancy, cands @ cands[best])
    return [(int(ids[i]), float(relevance[i])) for i in chosen]


@dataclass
class Fused:
    """One result of `rrf`: its fused score and its 1-based rank in each list (None: absent)."""

    id: int
    score: float
    vector_rank: int | None
    text_rank: int | None


def rrf(
    vector_ids: Sequence[int],
    text_ids: Sequence[int],
    vec_weight: float,
    text_weight: float,
    k: int = RRF_K,
) -> list[Fused]:
    """Reciprocal Rank Fusion of two rankings, best first.

    ``score(d) = vec_weight / (k + rank_vec(d)) + text_weight / (k + rank_text(d))``
    with 1-based ranks; a list that lacks ``d`` adds nothing. Ties keep the
    better vector rank, then the better text rank.
    """
    out: dict[int, Fused] = {}
    for rank, item in enumerate(vector_ids, start=1):
        out[item] = Fused(item, vec_weight / (k + rank), rank, None)
    for rank, item in enumerate(text_ids, start=1):
        fused = out.setdefault(item, Fused(item, 0.0, None, None))
        fused.score += text_weight / (k + rank)
        fused.text_rank = rank
    big = len(vector_ids) + len(text_ids) + 1
    return sorted(
        out.values(),
        key=lambda f: (-f.score, f.vector_rank or big, f.text_rank or big),
    )


def boost(fused: list[Fused], degrees: dict[int, int], weight: float) -> list[Fused]:
    """Multiply each score by ``1 + weight * degree / max degree`` and re-sort (stable)."""
    top = max((degrees.get(f.id, 0) for f in fused), default=0)
    if weight <= 0 or top == 0:
        return fused
    for f in fused:
        f.score *= 1.0 + weight * degrees.get(f.id, 0) / top
    return sorted(fused, key=lambda f: -f.score)
