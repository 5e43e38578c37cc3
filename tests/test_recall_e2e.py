"""Semantic recall end to end: the official MCP client against memtrio with embeddings on.

One server per test module keeps the model load to one (about a second).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp_client import call, every_transport, ok, only_on, open_client
from stores import both_stores, rows

# On PostgreSQL (stdio) only the semantic smoke path (vectors through the store's own index);
# the rest of the store path is driven on both backends by tests/test_storage_contract*.py.
pytestmark = [every_transport]
# Each server of these loads the embedding model (seconds on two cores); what they test does
# not depend on the transport, so the network transports are represented by Streamable HTTP.
LOADS_THE_MODEL = only_on(
    "stdio", "http", reason="loads the model per server; the model path is transport-independent"
)

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


@LOADS_THE_MODEL
@both_stores
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

        # Long text: embedded as overlapping windows; only text beyond the last of
        # [embedding] max_chunks windows is cut, and that is reported.
        long = await ok(client, "remember", content="lorem ipsum dolor " * 400)
        assert long["warnings"] == []
        longer = await ok(client, "remember", content="lorem ipsum dolor " * 1200)
        assert longer["warnings"] and "trunc" in longer["warnings"][0]

        resource = await client.read_resource("memtrio://embedding")
        body = json.loads(resource.contents[0].text)
        assert body["model"] == "all-MiniLM-L6-v2-int8" and body["dimensions"] == 384


FILLER = (
    "We walked along the beach in the late afternoon and talked about the weather, "
    "the tides, the seagulls and where to have dinner. "
) * 12  # about 340 word pieces: more than one window, even of 256 tokens
NEEDLE = "The nightly backup of the Postgres database is copied to an S3 bucket in Frankfurt. "
DEEP_QUERY = "where do the db snapshots get saved every evening"  # no word of NEEDLE


def chunk_rows(home: Path, memory_id: int) -> list[bytes]:
    return [
        r[0]
        for r in rows(
            home,
            "SELECT vec FROM vector_chunks WHERE kind = 'memory' AND item_id = ? ORDER BY chunk",
            (memory_id,),
        )
    ]


@LOADS_THE_MODEL
async def test_a_sentence_deep_in_a_long_memory_is_found_by_meaning(tmp_path: Path) -> None:
    """Vector search alone (no FTS5 seeds, no graph): the sentence sits beyond the first
    256 tokens (the model's limit), so only the memory's later windows can match the paraphrase."""
    home = tmp_path / "home"
    home.mkdir()
    env = {**ON, "MEMTRIO_RETRIEVAL_LEXICAL_SEEDS": "off", "MEMTRIO_RETRIEVAL_GRAPH": "off"}
    async with open_client(home, env=env) as client:
        for text in UNRELATED:
            await ok(client, "remember", content=text)
        await ok(client, "remember", content=FILLER)
        deep = await ok(client, "remember", content=FILLER + NEEDLE + FILLER[:300])
        assert deep["warnings"] == []
        assert len(chunk_rows(home, deep["id"])) >= 2  # 423 word pieces: windows of 128 tokens
        found = await ok(client, "recall", query=DEEP_QUERY, limit=3)
        assert found["ranking"] == "semantic" and ids_of(found)[0] == deep["id"]

        # update re-embeds every window: the old sentence no longer matches.
        before = chunk_rows(home, deep["id"])
        await ok(
            client,
            "update",
            id=deep["id"],
            content=FILLER + "The team lunch is on Fridays at the Thai place. " + FILLER[:300],
        )
        after = chunk_rows(home, deep["id"])
        assert len(after) >= 2 and after != before
        found = await ok(client, "recall", query=DEEP_QUERY, limit=3)
        assert ids_of(found)[0] != deep["id"]

        await ok(client, "forget", id=deep["id"])
        assert chunk_rows(home, deep["id"]) == []


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


@LOADS_THE_MODEL
async def test_memories_written_without_embeddings_are_embedded_at_recall(
    tmp_path: Path, store: str
) -> None:
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
        deep = await ok(client, "remember", content=FILLER + NEEDLE + FILLER[:300])
    async with open_client(home, env=ON) as client:
        found = await ok(client, "recall", query="why do logins expire", limit=2)
        assert found["ranking"] == "semantic" and ids_of(found)[0] == target["id"]
        # The lazily embedded long memory got all its windows.
        found = await ok(client, "recall", query=DEEP_QUERY, limit=2)
        assert deep["id"] in ids_of(found)
    assert len(chunk_rows(home, deep["id"])) >= 2
    assert rows(home, "SELECT count(*) FROM vectors WHERE kind = 'memory'")[0][0] == 5
    if store == "postgresql":  # the semantic seeds' pgvector copies, every window
        assert rows(home, "SELECT count(*) FROM vectors WHERE embedding IS NULL") == [(0,)]
        assert rows(home, "SELECT count(*) FROM vector_chunks WHERE embedding IS NULL") == [(0,)]


# Where the model loads (at initialize in a shared server, on the first embedding in an
# embedded one): tests/test_model_warm.py.
