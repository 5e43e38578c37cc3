"""Maximal marginal relevance over the memories' own vectors (`diversify`), the step that
keeps near-duplicates out of the first places when the learned re-ranker is off."""

from __future__ import annotations

import numpy as np

from .graph import RecallCache

MMR_MAX_POOL = 100  # at most this many take part; a larger ``limit`` gets the rest in score order


class _Windows:
    """The cached windows of some memories, for the cosine between them.

    The cosine between two memories is that of their closest windows; a memory
    without a cached vector is similar to nothing (0).
    """

    def __init__(self, cache: RecallCache, ids: list[int]) -> None:
        index = cache.index["memory"]
        blocks: list[np.ndarray] = []
        owner: list[int] = []
        self.spans: list[tuple[int, int]] = []
        for position, vecs in enumerate(index.vectors_of(ids)):  # one batch lookup
            start = len(owner)
            if vecs is not None and len(vecs):
                blocks.append(vecs)
                owner.extend([position] * len(vecs))
            self.spans.append((start, len(owner)))
        self.n = len(ids)
        self.rows = np.concatenate(blocks) if blocks else np.zeros((0, 1), dtype=np.float32)
        owner_arr = np.asarray(owner, dtype=np.int64)
        self.starts: np.ndarray[tuple[int], np.dtype[np.intp]] | list[int] = (
            np.flatnonzero(np.r_[True, owner_arr[1:] != owner_arr[:-1]]) if owner else []
        )
        self.present = owner_arr[self.starts] if owner else owner_arr

    def similarity_to(self, position: int) -> np.ndarray:
        """Cosine of memory ``position`` to every memory, by position."""
        out = np.zeros(self.n, dtype=np.float32)
        start, end = self.spans[position]
        if start == end:
            return out
        best_row = (self.rows[start:end] @ self.rows.T).max(axis=0)
        out[self.present] = np.maximum.reduceat(best_row, self.starts)
        return out


def similarity_matrix(cache: RecallCache, ids: list[int]) -> np.ndarray:
    """Cosine between memories (a memory of several windows: its closest pair of windows).

    A memory without a cached vector is similar to nothing (0).
    """
    windows = _Windows(cache, ids)
    return (
        np.stack([windows.similarity_to(i) for i in range(len(ids))]) if ids else np.zeros((0, 0))
    )


def diversify(
    cache: RecallCache,
    ranked: list[tuple[int, float]],
    limit: int,
    lam: float,
    candidates: int = 30,
) -> list[tuple[int, float]]:
    """Re-order ``ranked`` (best first) by maximal marginal relevance; the first ``limit``.

    Greedy: the next memory maximises ``lam * relevance - (1 - lam) * max cosine
    to the memories already chosen``. Relevance is the square root of the score
    relative to the best one: the softmax-sharpened seeds make PageRank masses
    span orders of magnitude, and on the raw scale any similarity penalty
    would drop every memory after the first few. The best ``candidates`` (at
    least ``limit``, at most `MMR_MAX_POOL`) take part; a larger ``limit`` gets the
    rest in score order.

    Each chosen memory's score becomes the one its place was chosen by (`chosen_score`),
    so the list stays in score order: a memory similar to none already chosen keeps
    its score, a near-duplicate moved down reports less. A memory's gain can only fall
    as memories are chosen, so the greedy picks come out best first.
    """
    pool = ranked[: max(candidates, min(limit, MMR_MAX_POOL))]
    if len(pool) <= 1:
        return ranked[:limit]
    scores = np.array([score for _, score in pool])
    relevance = np.sqrt(scores / scores.max())
    windows = _Windows(cache, [item_id for item_id, _ in pool])
    penalty = np.zeros(len(pool))
    free = np.ones(len(pool), dtype=bool)
    top = float(scores.max())
    out: list[tuple[int, float]] = []
    for _ in range(min(limit, len(pool))):
        gain = np.where(free, lam * relevance - (1 - lam) * penalty, -np.inf)
        best = int(np.argmax(gain))
        memory, score = pool[best]
        if (1 - lam) * penalty[best] > 0:  # else, unpenalised: its own score, exactly
            score = chosen_score(top, float(gain[best]) / lam)
        out.append((memory, score))
        free[best] = False
        penalty = np.maximum(penalty, windows.similarity_to(best))
    out += ranked[len(pool) : limit]
    out.sort(key=lambda pair: -pair[1])  # stable: only a longer tail's memories move
    return out


def chosen_score(top: float, relevance: float) -> float:
    """The score of relevance ``relevance`` (on `diversify`'s square-root scale, less the
    similarity penalty) against the best score ``top``: the inverse of that scale, signed,
    so that it grows with the gain that chose the memory (below 0 for a near-duplicate
    whose penalty outweighs its relevance)."""
    return top * relevance * abs(relevance)
