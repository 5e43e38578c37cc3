"""Recall's extra signals and options end to end (official MCP client, embeddings on):
thread neighbours, ``max_tokens`` and ``explain``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from mcp_client import ok, open_client
from memtrio.actors.ranker.graph import RecallCache
from memtrio.actors.ranker.signals import (
    NEIGHBOUR_GAP,
    NEIGHBOUR_NEAR,
    NEIGHBOUR_SCAN,
    neighbour_context,
    thread_neighbours,
    thread_ones,
)

ON = {"MEMTRIO_EMBEDDINGS": "on"}

# A conversation told turn by turn: the answer to "what did the vet say about Rex's
# leg" is the reply, which shares no word with the question.
CONVERSATION = [
    "Carol: The vet clinic on Elm Street opens at eight on Saturdays.",
    "Dave: Rex chewed through his second leash this month.",
    "Carol: I repainted the fence in the backyard last weekend.",
    "Dave: My sister is visiting from Lisbon in June.",
    "Carol: What did the vet say about Rex's leg after the X-ray?",
    "Dave: Just a sprain, thankfully. Two weeks of rest and short walks only.",
    "Carol: We should try the new ramen place downtown.",
    "Dave: The train strike delayed my commute by an hour today.",
]
QUESTION = "What did the vet say about Rex's leg?"


def ids_of(payload: dict[str, Any]) -> list[int]:
    return [m["id"] for m in payload["memories"]]


async def remember_all(client: Any, texts: list[str]) -> list[int]:
    return [(await ok(client, "remember", content=text))["id"] for text in texts]


async def test_the_reply_after_the_matching_turn_is_found_through_its_thread(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    found: dict[str, list[int]] = {}
    modes = {  # the fixed mixture without and with thread neighbours, and the re-ranker
        "fixed": {"MEMTRIO_RETRIEVAL_RERANK": "false", "MEMTRIO_RETRIEVAL_NEIGHBOUR_WEIGHT": "0"},
        "neighbours": {
            "MEMTRIO_RETRIEVAL_RERANK": "false",
            "MEMTRIO_RETRIEVAL_NEIGHBOUR_WEIGHT": "0.35",
        },
        "reranked": {},
    }
    explained: dict[str, dict] = {}
    for mode, settings in modes.items():
        async with open_client(home, env={**ON, **settings}) as client:
            if mode == "fixed":
                ids = await remember_all(client, CONVERSATION)
            found[mode] = ids_of(await ok(client, "recall", query=QUESTION, limit=3))
            if mode != "fixed":
                explained[mode] = await ok(client, "recall", query=QUESTION, limit=3, explain=True)
    asked, answer = ids[4], ids[5]
    assert found["fixed"][0] == asked and answer not in found["fixed"]
    for mode in ("neighbours", "reranked"):
        assert found[mode][0] == asked and answer in found[mode]
        reasons = {m["id"]: m["explain"] for m in explained[mode]["memories"]}
        assert any(r.startswith("neighbour:") and str(asked) in r for r in reasons[answer])


async def test_max_tokens_returns_the_best_memories_that_fit(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    long_text = "Deploys to production need a green staging run. " + "Details follow. " * 60
    async with open_client(home, env=ON) as client:
        long_id, short_id, other_id = await remember_all(
            client,
            [
                long_text,
                "Deploys to production happen on Tuesdays after the staging run.",
                "Production deploys are announced in the #ops channel.",
            ],
        )
        full = await ok(client, "recall", query="production deploys staging", limit=3)
        assert set(ids_of(full)) == {long_id, short_id, other_id} and "tokens" not in full
        budget = await ok(
            client, "recall", query="production deploys staging", limit=3, max_tokens=40
        )
        # The long memory (about 250 tokens) does not fit; the two short ones do.
        assert set(ids_of(budget)) == {short_id, other_id}
        assert 0 < budget["tokens"] <= 40
        assert budget["tokens"] == sum(-(-len(m["content"]) // 4) for m in budget["memories"])
        one = await ok(client, "recall", query="production deploys staging", max_tokens=17)
        assert len(one["memories"]) == 1 and one["tokens"] <= 17
        nothing = await ok(client, "recall", query="production deploys staging", max_tokens=1)
        assert nothing["memories"] == [] and nothing["tokens"] == 0


async def test_explain_names_the_seeds_and_the_graph_path(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    async with open_client(home, env=ON) as client:
        webhook = await ok(
            client,
            "remember",
            content="Stripe payment webhooks are handled by the billing-service.",
            entities=["billing-service"],
        )
        owner = await ok(
            client,
            "remember",
            content="Priya owns it and reviews all its pull requests.",
            entities=["billing-service"],
        )
        plain = await ok(client, "recall", query="Stripe webhooks billing-service", limit=5)
        assert all("explain" not in m for m in plain["memories"])
        out = await ok(
            client, "recall", query="Stripe webhooks billing-service", limit=5, explain=True
        )
        reasons = {m["id"]: m["explain"] for m in out["memories"]}
        assert any(r.startswith("lexical: #1") for r in reasons[webhook["id"]])
        assert any(r.startswith("dense: #") for r in reasons[webhook["id"]])
        assert "graph: linked to seeded entity 'billing-service'" in reasons[owner["id"]]
        lexical = await ok(
            client,
            "recall",
            query="Stripe webhooks",
            use_embeddings=False,
            explain=True,
        )
        assert lexical["memories"][0]["explain"][0].startswith("lexical: #1, BM25 ")


def test_a_thread_stops_at_another_scope_and_at_an_hour_of_silence() -> None:
    cache = RecallCache("m", "r", 4)
    table = cache.items["memory"]
    # ids 1-4 written a minute apart in scope 7; 5 in scope 8; 6 two hours after 4.
    for memory_id, scope, minute in ((1, 7, 0), (2, 7, 1), (3, 7, 2), (4, 7, 3), (5, 8, 4)):
        table.set(memory_id, [scope], created=minute * 60.0)
    table.set(6, [7], created=3 * 60.0 + 7200)
    allowed = table.allowed(None)
    assert thread_neighbours(cache, 2, allowed, 2) == [(1, 1), (3, 1), (4, 2)]
    assert thread_neighbours(cache, 4, allowed, 2) == [(3, 1), (2, 2)]
    assert thread_neighbours(cache, 6, allowed, 2) == []
    # Within a selection: with scope 8 left out, 6 follows 4 but an hour of silence parts them.
    only_7 = table.allowed(np.array([7], dtype=np.int32))
    assert thread_neighbours(cache, 4, only_7, 1) == [(3, 1)]
    ids, scores, lender = neighbour_context(
        cache, np.array([2]), np.array([1.0]), table.allowed(None), 0.3, 2
    )
    got = dict(zip(ids.tolist(), scores.tolist(), strict=True))
    assert got == {2: 1.0, 1: 0.3, 3: 0.3, 4: 0.15}
    assert lender == {1: 2, 3: 2, 4: 2}


def test_a_thread_is_followed_across_unselected_memories_near_and_far() -> None:
    """The next allowed memory of a thread is found whether it is a few ids away or more
    than the slice read at once (`NEIGHBOUR_NEAR`) behind memories of another scope."""
    cache = RecallCache("m", "r", 4)
    table = cache.items["memory"]
    far = 3 * NEIGHBOUR_NEAR
    # thread of scope 7 at ids 1, 2, 5 and 5 + far, one second apart; scope 8 fills the gaps
    mine = [1, 2, 5, 5 + far, 6 + far]
    for memory_id in range(1, 7 + far):
        table.set(memory_id, [7 if memory_id in mine else 8], created=float(memory_id))
    only_7 = table.allowed(np.array([7], dtype=np.int32))
    assert thread_neighbours(cache, 2, only_7, 6) == [(1, 1), (5, 1), (5 + far, 2), (6 + far, 3)]
    assert thread_neighbours(cache, 6 + far, only_7, 3) == [(5 + far, 1), (5, 2), (2, 3)]
    # the whole store selected: scope 8 in between ends the thread of scope 7
    assert thread_neighbours(cache, 5, table.allowed(None), 3) == []


def test_the_neighbours_one_place_away_of_many_are_those_of_each() -> None:
    """`thread_ones` finds at once what `thread_neighbours` finds one memory at a time,
    one place away: across unselected memories near and beyond `NEIGHBOUR_SCAN`, not
    past another scope or an hour of silence, nothing for an unselected memory."""
    rng = np.random.default_rng(11)
    cache = RecallCache("m", "r", 4)
    table = cache.items["memory"]
    n = 12_000
    # half a second apart (a gap of NEIGHBOUR_SCAN ids is within the hour), 3% after an
    # hour of silence (none across the two gaps below); the scope changes every 5,000 ids
    steps = np.where(rng.random(n + 1) < 0.03, NEIGHBOUR_GAP + 1, 0.5)
    far, near = (500, 500 + NEIGHBOUR_SCAN + 50), (5_200, 5_200 + NEIGHBOUR_SCAN - 50)
    for low, high in (far, near):
        steps[low - 1 : high + 1] = 0.5
    created = np.cumsum(steps)
    for memory_id in range(1, n + 1):
        table.set(memory_id, [7 + (memory_id // 5_000) % 2], created=float(created[memory_id]))
    allowed = table.allowed(None) & (rng.random(len(table.present)) < 0.7)
    for low, high in (far, near):  # nothing selected in between but the two ends
        allowed[low:high] = False
        allowed[[low - 1, high]] = True
    ids = sorted({*rng.integers(1, n + 1, 600).tolist(), far[0] - 1, near[0] - 1, n + 5})
    expected = sorted({o for m in ids for o, _ in thread_neighbours(cache, m, allowed, 1)})
    assert (near[1], 1) in thread_neighbours(cache, near[0] - 1, allowed, 1)  # the scan's reach
    assert (far[1], 1) not in thread_neighbours(cache, far[0] - 1, allowed, 1)
    assert len(expected) > 200
    assert thread_ones(cache, ids, allowed) == expected
    assert thread_ones(cache, [], allowed) == []
