"""The learned re-ranker (actors/ranker/rerank.py): its features and its diversification,
and end to end what it is for: the reply after a matching turn is found, while a long
self-contained reply does not take the place of the short turn that matches."""

from __future__ import annotations

import numpy as np
from mcp_client import ok, open_client
from memtrio.actors.ranker import rerank
from memtrio.actors.ranker.graph import RecallCache

ON = {"MEMTRIO_EMBEDDINGS": "on"}


def thread_cache(n: int, gap_after: int | None = None) -> RecallCache:
    """Memories 1..n in one scope, written a second apart (one thread), except an hour's
    gap after ``gap_after`` (two threads)."""
    cache = RecallCache("m", "r", 4)
    t = 1000.0
    for m in range(1, n + 1):
        cache.items["memory"].set(m, [1], 0, t)
        t += 7200.0 if m == gap_after else 1.0
    return cache


def test_diversify_moves_a_chosen_memorys_neighbour_down_unless_clearly_better() -> None:
    cache = thread_cache(10)
    allowed = cache.items["memory"].allowed(None)
    ranked = [(1, 0.5), (2, 0.4), (7, 0.3)]
    # 2 is written next to 1: log(0.4) - 1 < log(0.3), so 7 comes second.
    assert [m for m, _ in rerank.diversify(cache, ranked, allowed, 3, 1.0)] == [1, 7, 2]
    assert rerank.diversify(cache, ranked, allowed, 3, 0.0) == ranked  # off
    # A neighbour far better than the rest keeps its place; scores are kept as ranked.
    clear = [(1, 0.5), (2, 0.45), (7, 0.01)]
    assert rerank.diversify(cache, clear, allowed, 3, 1.0) == clear
    # Memories of two threads (an hour apart) are not neighbours.
    split = thread_cache(10, gap_after=1)
    allowed = split.items["memory"].allowed(None)
    assert [m for m, _ in rerank.diversify(split, ranked, allowed, 3, 1.0)] == [1, 2, 7]


def test_weights_cover_every_feature() -> None:
    assert rerank.WEIGHTS.shape == (len(rerank.FEATURES),)
    assert np.isfinite(rerank.WEIGHTS).all() and np.abs(rerank.WEIGHTS).sum() > 0
    rows = np.eye(len(rerank.FEATURES))
    assert np.allclose(rerank.scores(rows), rerank.WEIGHTS)
    w = rerank.softmax_weights(np.array([3.0, 1.0, 2.0]))
    assert np.isclose(w.sum(), 1.0) and list(np.argsort(-w)) == [0, 2, 1]


LONG_REPLY = (
    "assistant: Congratulations! With Wells Fargo's pre-approval for $350,000 and a $325,000"
    " house, you have room for closing costs. "
) + " ".join(
    f"Step {i}: compare lenders, closing costs, inspection fees, insurance, escrow and taxes"
    " before you sign anything, and keep every document the bank sends you."
    for i in range(1, 16)
)
CHAT = [
    "user: I'm buying a $325,000 house and Wells Fargo pre-approved me for $350,000.",
    LONG_REPLY,
    "user: Can you suggest a recipe for a quick weeknight pasta?",
    "assistant: Try garlic, olive oil, chili flakes and parsley with spaghetti.",
    "user: My sister moved to Chicago last month.",
    "assistant: Chicago has wonderful neighbourhoods; Lincoln Park is lovely in spring.",
]


async def test_a_long_reply_does_not_take_the_place_of_the_short_turn_that_matches(
    tmp_path,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    async with open_client(home, env=ON) as client:
        ids = [(await ok(client, "remember", content=t))["id"] for t in CHAT]
        found = await ok(
            client, "recall", query="How much did Wells Fargo pre-approve me for?", limit=3
        )
        got = [m["id"] for m in found["memories"]]
        assert got[0] == ids[0], [m["content"][:40] for m in found["memories"]]
        explained = await ok(
            client, "recall", query="How much did Wells Fargo pre-approve me for?", explain=True
        )
        first = explained["memories"][0]
        assert first["id"] == ids[0]
        assert any(r.startswith("reranked: #1") for r in first["explain"])
        assert any(r.startswith("lexical: #") for r in first["explain"])
