"""Ranking signals beyond the seeds and PageRank: thread neighbours, and explanations.

**Thread neighbours.** Memories written one after the other into the same
scope, each within `NEIGHBOUR_GAP` seconds of the previous one, form a
*thread* (a conversation told turn by turn, a session's notes). The context
a question needs is often in the turn next to the one that matches it ("what
did she answer when ...": the answer is the reply). `neighbour_context` gives
each memory ``weight`` times the score of each of its thread neighbours up
to ``window`` places away (halved for each place further), before the best
are taken, so a neighbour of a strong match can enter the results and a
session where several turns match rises above a single stray match.

**Explanations.** `explain` turns what the ranker recorded (which seed kinds
put mass on a memory, which seeded graph nodes it is linked to, which
neighbour lent it score) into short readable reasons, for ``recall(...,
explain=true)``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .dates import Day, matches
from .graph import KIND_CODE, RecallCache, node, node_id, node_kind

NEIGHBOUR_GAP = 3600.0  # seconds between two memories of one thread, at most
NEIGHBOUR_SOURCES = 50  # the best memories whose score spreads to their neighbours
# ids looked at on each side for the next allowed memory: a thread whose next turn is
# further away than this behind unselected memories ends there
NEIGHBOUR_SCAN = 4096
NEIGHBOUR_NEAR = 32  # ids on each side read at once for a memory's nearest neighbours


def next_allowed(allowed: np.ndarray, start: int, step: int) -> int | None:
    """The nearest allowed memory id after ``start`` (``step`` 1) or before it (-1), looked
    for among the next `NEIGHBOUR_SCAN` ids (a slice of the mask: no pass over the store)."""
    if step > 0:
        segment = allowed[start + 1 : start + 1 + NEIGHBOUR_SCAN]
        return start + 1 + int(segment.argmax()) if segment.any() else None
    segment = allowed[max(0, start - NEIGHBOUR_SCAN) : start][::-1]
    return start - 1 - int(segment.argmax()) if segment.any() else None


def thread_neighbours(
    cache: RecallCache, memory_id: int, allowed: np.ndarray, window: int
) -> list[tuple[int, int]]:
    """(neighbour id, distance) of ``memory_id`` in its thread, up to ``window`` each side.

    ``allowed``: the allowed memories, a mask by id (the thread is followed
    within the selection only: the next allowed id, skipping the others).
    """
    items = cache.items["memory"]
    if memory_id >= len(allowed) or not allowed[memory_id]:
        return []
    # the allowed ids close by, in one pass over a small slice of the mask; beyond it (a
    # selection with gaps), `next_allowed` looks further, as far as `NEIGHBOUR_SCAN`
    low = max(0, memory_id - NEIGHBOUR_NEAR)
    near = (np.flatnonzero(allowed[low : memory_id + NEIGHBOUR_NEAR + 1]) + low).tolist()
    at = near.index(memory_id)
    out: list[tuple[int, int]] = []
    for step in (-1, 1):
        prev, i = memory_id, at
        for distance in range(1, window + 1):
            i += step
            other = near[i] if 0 <= i < len(near) else next_allowed(allowed, prev, step)
            if (
                other is None
                or items.scope[other] != items.scope[prev]
                or (abs(items.created[other] - items.created[prev]) > NEIGHBOUR_GAP)
            ):
                break
            out.append((other, distance))
            prev = other
    return out


def thread_ones(cache: RecallCache, ids: list[int], allowed: np.ndarray) -> list[int]:
    """The thread neighbours one place away of all of ``ids``, at once: the union of
    `thread_neighbours` with ``window`` 1 over them, found with array steps (the allowed
    ids before and after each, the same scope, within `NEIGHBOUR_GAP` seconds), not a
    Python walk per memory."""
    if not ids:
        return []
    items = cache.items["memory"]
    wanted = np.asarray(ids, dtype=np.int64)
    wanted = wanted[wanted < len(allowed)]
    wanted = wanted[allowed[wanted]]
    present = np.flatnonzero(allowed)
    at = np.searchsorted(present, wanted)
    out: list[np.ndarray] = []
    for step in (-1, 1):
        i = at + step
        inside = (i >= 0) & (i < len(present))
        here, other = wanted[inside], present[i[inside]]
        near = (
            (np.abs(other - here) <= NEIGHBOUR_SCAN)
            & (items.scope[other] == items.scope[here])
            & ~(np.abs(items.created[other] - items.created[here]) > NEIGHBOUR_GAP)
        )
        out.append(other[near])
    return np.unique(np.concatenate(out)).tolist()


def neighbour_context(
    cache: RecallCache,
    ids: np.ndarray,
    scores: np.ndarray,
    allowed: np.ndarray,
    weight: float,
    window: int,
) -> tuple[np.ndarray, np.ndarray, dict[int, int]]:
    """Scores smoothed over thread neighbours: (ids, scores, lender) where ``lender`` maps a
    memory to the neighbour that gave it the most score.

    Only the best `NEIGHBOUR_SOURCES` memories lend; any allowed neighbour may receive.
    """
    if weight <= 0 or window <= 0 or len(ids) == 0:
        return ids, scores, {}
    total = dict(zip(ids.tolist(), scores.tolist(), strict=True))
    best_gift: dict[int, tuple[float, int]] = {}
    top = np.argsort(-scores, kind="stable")[:NEIGHBOUR_SOURCES]
    for i in top.tolist():
        source, s = int(ids[i]), float(scores[i])
        for other, distance in thread_neighbours(cache, source, allowed, window):
            gift = weight * s / (2 ** (distance - 1))
            total[other] = total.get(other, 0.0) + gift
            if gift > best_gift.get(other, (0.0, 0))[0]:
                best_gift[other] = (gift, source)
    out_ids = np.fromiter(total.keys(), dtype=np.int64, count=len(total))
    out_scores = np.fromiter(total.values(), dtype=np.float64, count=len(total))
    return out_ids, out_scores, {m: src for m, (_, src) in best_gift.items()}


def date_matched(cache: RecallCache, memory_id: int, wanted: list[Day]) -> bool:
    """Whether the memory's dates (`dates.memory_dates`) meet one of the question's."""
    found = cache.dates.get(memory_id) if cache.dates is not None else None
    return found is not None and bool(found) and any(matches(c, found) for c in wanted)


def date_first(
    cache: RecallCache, candidates: list[tuple[int, float]], wanted: list[Day]
) -> list[tuple[int, float]]:
    """The FTS5 candidates with those whose dates meet the question's first (else as they were)."""
    if not wanted or cache.dates is None:
        return candidates
    hit = [c for c in candidates if date_matched(cache, c[0], wanted)]
    if not hit:
        return candidates
    return hit + [c for c in candidates if not date_matched(cache, c[0], wanted)]


def date_boost(
    cache: RecallCache, ids: np.ndarray, scores: np.ndarray, wanted: list[Day], weight: float
) -> tuple[np.ndarray, set[int]]:
    """Scores times ``1 + weight`` for the memories whose dates meet the question's:
    (scores, the boosted ids)."""
    if not wanted or weight <= 0 or cache.dates is None or len(ids) == 0:
        return scores, set()
    hit = np.fromiter(
        (date_matched(cache, int(i), wanted) for i in ids.tolist()), dtype=bool, count=len(ids)
    )
    return np.where(hit, scores * (1 + weight), scores), set(ids[hit].tolist())


def explain(
    cache: RecallCache,
    links: Mapping[int, set[int]],
    ranked: list[tuple[int, float]],
    seed_notes: dict[int, list[str]],
    reset: dict[int, float],
    lender: dict[int, int],
    use_graph: bool,
    dated: set[int] | None = None,
) -> dict[int, list[str]]:
    """Reasons for each ranked memory: its seeds, the seeded graph nodes it is linked to
    in ``links`` (the graph PageRank walked: the paths it brought mass along), the
    neighbour that lent it score."""
    out: dict[int, list[str]] = {}
    for memory_id, _ in ranked:
        n = node("memory", memory_id)
        reasons = list(seed_notes.get(n, []))
        if use_graph:
            for other in sorted(links.get(n, ()), key=lambda m: -reset.get(m, 0.0)):
                if other not in reset:
                    break
                reasons.append(f"graph: linked to seeded {describe(cache, other)}")
                if len(reasons) >= 6:
                    break
        source = lender.get(memory_id)
        if source is not None:
            reasons.append(f"neighbour: written next to memory {source} in the same thread")
        if dated and memory_id in dated:
            reasons.append("date: about the date the query names")
        out[memory_id] = reasons or ["graph: reached by PageRank from the seeds"]
    return out


def describe(cache: RecallCache, n: int) -> str:
    kind = node_kind(n)
    if kind == KIND_CODE["entity"]:
        return f"entity {cache.entity_name.get(node_id(n), node_id(n))!r}"
    if kind == KIND_CODE["relation"]:
        return f"relation {node_id(n)}"
    if kind == KIND_CODE["term"] and cache.terms is not None:
        return f"term {cache.terms.keys[node_id(n)]!r}"
    return f"memory {node_id(n)}"
