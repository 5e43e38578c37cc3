"""Semantic recall end to end: the official MCP client against `memtrio mcp` with embeddings on.

One server per test module keeps the model load to one (about a second).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp_client import call, ok, open_client

ON = {"MEMTRIO_EMBEDDINGS": "on"}

UNRELATED = [
    "The office coffee machine is descaled on the first Monday of each month.",
    "Our CI runners use Ubuntu 22.04 images with a warm pip cache.",
    "Frontend components are written in TypeScript with strict null checks.",
    "The quarterly planning meeting moved to the large conference room.",
    "Docker images are tagged with the short git commit hash.",
    "We format Python code with ruff and a line length of 100.",
]


def ids_of(payload: dict[str, Any]) -> list[int]:
    return [m["id"] for m in payload["memories"]]


async def test_semantic_recall_through_mcp(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    async with open_client(home, env=ON) as client:
        unrelated = [(await ok(client, "remember", content=text))["id"] for text in UNRELATED]
        token = await ok(
            client,
            "remember",
            content="Auth tokens are refreshed every 15 minutes; sessions end when refresh fails.",
            memory_type="decision",
        )
        assert token["warnings"] == []

        # A paraphrase that shares no word with the memory finds it.
        found = await ok(client, "recall", query="why do logins expire", limit=3)
        assert found["ranking"] == "semantic"
        assert ids_of(found)[0] == token["id"]
        lexical = await ok(client, "recall", query="why do logins expire", use_embeddings=False)
        assert token["id"] not in ids_of(lexical)

        # Two hops: the owner memory is linked to the query only through the entity.
        webhook = await ok(
            client,
            "remember",
            content="Stripe payment webhooks are handled by the billing-service.",
            entities=["billing-service"],
        )
        owner = await ok(
            client,
            "remember",
            content="Priya is the owner of billing-service and reviews all its pull requests.",
            entities=["billing-service"],
        )
        ranked = ids_of(
            await ok(
                client, "recall", query="Who can fix a bug in the Stripe webhook handler?", limit=20
            )
        )
        assert ranked[0] == webhook["id"]
        assert owner["id"] in ranked
        assert all(ranked.index(owner["id"]) < ranked.index(u) for u in unrelated if u in ranked)

        # memory_type filters before ranking.
        typed = await ok(client, "recall", query="why do logins expire", memory_type="Decision")
        assert ids_of(typed) == [token["id"]]

        # Long text: stored, and the cut is reported.
        long = await ok(client, "remember", content="lorem ipsum dolor " * 400)
        assert long["warnings"] and "trunc" in long["warnings"][0]

        resource = await client.read_resource("memtrio://embedding")
        body = json.loads(resource.contents[0].text)
        assert body["model"] == "all-MiniLM-L6-v2-int8" and body["dimensions"] == 384


async def test_remember_fails_and_stores_nothing_when_the_model_cannot_load(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {**ON, "MEMTRIO_EMBEDDING_MODEL": str(tmp_path / "no-such-model")}
    async with open_client(home, env=env) as client:
        is_error, text = await call(client, "remember", content="this must not be stored")
        assert is_error and "no-such-model" in str(text)
        stats = await ok(client, "stats")
        assert stats["memories"] == 0
        # Recall still answers, lexically, and says why.
        answer = await ok(client, "recall", query="stored")
        assert answer["ranking"] == "lexical"


@pytest.mark.parametrize("flag", ["off"])
async def test_embeddings_off_never_publishes_a_model(tmp_path: Path, flag: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    async with open_client(home, env={"MEMTRIO_EMBEDDINGS": flag}) as client:
        await ok(client, "remember", content="plain lexical memory about caches")
        answer = await ok(client, "recall", query="caches")
        assert answer["ranking"] == "lexical" and len(answer["memories"]) == 1
        resource = await client.read_resource("memtrio://embedding")
        assert json.loads(resource.contents[0].text)["model"] is None


async def test_memories_written_without_embeddings_are_embedded_at_recall(tmp_path: Path) -> None:
    import sqlite3

    home = tmp_path / "home"
    home.mkdir()
    async with open_client(home, env={"MEMTRIO_EMBEDDINGS": "off"}) as client:
        for text in UNRELATED[:3]:
            await ok(client, "remember", content=text)
        target = await ok(
            client,
            "remember",
            content="Auth tokens are refreshed every 15 minutes; sessions end when refresh fails.",
        )
    async with open_client(home, env=ON) as client:
        found = await ok(client, "recall", query="why do logins expire", limit=2)
        assert found["ranking"] == "semantic" and ids_of(found)[0] == target["id"]
    conn = sqlite3.connect(str(home / "memtrio.sqlite"))
    try:
        assert conn.execute("SELECT count(*) FROM vectors WHERE kind = 'memory'").fetchone()[0] == 4
    finally:
        conn.close()
