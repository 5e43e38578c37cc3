"""What ``recall`` and ``memtrio search`` list, as a user reads it (issue 38, item 3): the
results in score order whatever moved them (diversification, the code anchor lift, the
stale penalty), memories anchored to the code asked for before those anchored to a file
that imports it, and knowledge-graph observations that name their entity."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gitrepo import make_repo
from mcp_client import ok, open_client, run_cli
from memtrio.actors.ranker import mmr, rerank
from memtrio.actors.ranker.graph import RecallCache

ON = {"MEMTRIO_EMBEDDINGS": "on"}
RERANK_OFF = {**ON, "MEMTRIO_RETRIEVAL_RERANK": "false"}

# Short project notes written in one burst, as a coding agent writes them (the README
# tour's kind of store), with near-duplicates: what diversification moves down.
NOTES = [
    "We use trio, never asyncio, in this project",
    "The server is built on trio nurseries; asyncio is not used anywhere",
    "RetrievalConfig holds the damping factor for Personalized PageRank",
    "Personalized PageRank runs over memories, entities and relations",
    "Wire types are msgspec Structs, never dataclasses",
    "msgspec Structs are used for every message on the wire",
    "SQLite runs in WAL mode with one writer connection",
    "The writer connection of SQLite is owned by the StoreWriter actor",
    "Embeddings come from all-MiniLM-L6-v2 with int8 weights",
    "The embedding model is loaded lazily on the first embedding",
    "Code is indexed with tree-sitter in worker processes",
    "A tree-sitter parser crash kills a worker, never the server",
    "Releases are tagged from main only",
    "Run ruff check and ruff format before every commit",
    "mypy runs in strict mode on the three packages",
    "The dashboard is served by hypercorn's trio worker",
    "Tests use pytest-trio and the autojump clock for timeouts",
    "The supervisor restarts a crashed child up to ten times in ten seconds",
    "PostgreSQL stores vectors with pgvector HNSW indexes",
    "FTS5 ranks lexical matches by BM25",
    "Logs go to the log file and stderr, never to stdout",
    "stdout belongs to the MCP protocol",
    "The owner process stays up ten minutes after its last session",
    "Tokens are compared in constant time",
    "The HTTP transport answers 413 for an oversized body",
    "Recall embeds at most 64 missing items per call",
    "The code index refreshes only the files that changed",
    "Observations are memories linked to their entity",
    "Export files carry every vector window",
    "Stale memories rank lower but are never hidden",
]
QUERIES = [
    "which async library do we use",
    "what are the wire types",
    "how is SQLite written to",
    "which embedding model",
    "what happens when a parser crashes",
    "how does PageRank work here",
    "what goes to stdout",
    "how are vectors stored",
]


def scores_in_order(memories: list[dict[str, Any]]) -> bool:
    scores = [m["score"] for m in memories]
    return all(a >= b for a, b in zip(scores, scores[1:], strict=False))


@pytest.mark.parametrize("env", [ON, RERANK_OFF], ids=["rerank", "rerank-off"])
async def test_recall_lists_its_results_in_score_order(tmp_path: Path, env: dict[str, str]) -> None:
    home = tmp_path / "home"
    home.mkdir()
    async with open_client(home, env=env) as client:
        for note in NOTES:
            await ok(client, "remember", content=note)
        for query in QUERIES:
            found = await ok(client, "recall", query=query, limit=10)
            assert found["ranking"] == "semantic"
            assert len(found["memories"]) == 10, found
            shown = [(m["score"], m["content"][:40]) for m in found["memories"]]
            assert scores_in_order(found["memories"]), (query, shown)
    # The CLI's search prints them best first too (one group: the home is not a checkout).
    searched = run_cli("search", "which async library do we use", "--json", home=home, env=env)
    assert searched.returncode == 0, searched.stderr
    memories = json.loads(searched.stdout)["memories"]
    assert memories and scores_in_order(memories), memories
    printed = [
        float(line.split(" score=")[1].split()[0])
        for line in run_cli(
            "search", "which async library do we use", home=home, env=env
        ).stdout.splitlines()
        if " score=" in line
    ]
    assert len(printed) == len(memories) and printed == sorted(printed, reverse=True), printed


def thread_cache(n: int) -> RecallCache:
    """Memories 1..n in one scope, written a second apart (one thread), each with a vector:
    1 and 2 the same direction (near-duplicates), the rest each its own."""
    cache = RecallCache("m", "r", 4)
    for m in range(1, n + 1):
        cache.items["memory"].set(m, [1], 0, 1000.0 + m)
        vec = np.zeros(4, dtype=np.float32)
        vec[0 if m <= 2 else (m % 3) + 1] = 1.0
        cache.index["memory"].upsert(m, vec.reshape(1, -1))
    return cache


def test_diversification_reports_the_score_it_ranked_by() -> None:
    cache = thread_cache(8)
    allowed = cache.items["memory"].allowed(None)
    ranked = [(1, 0.5), (2, 0.4), (7, 0.3), (5, 0.05)]
    # The re-ranker's: 2 is written next to 1 and moves below 7, reporting less than 7.
    moved = rerank.diversify(cache, ranked, allowed, 4, 1.0)
    assert [m for m, _ in moved] == [1, 7, 2, 5]
    assert [s for _, s in moved] == sorted((s for _, s in moved), reverse=True)
    assert dict(moved)[1] == 0.5 and dict(moved)[7] == 0.3  # the others keep their score
    # Maximal marginal relevance: 2 is a near-duplicate of 1.
    mmr_moved = mmr.diversify(cache, ranked, 4, 0.5, 30)
    assert [m for m, _ in mmr_moved][:2] == [1, 7]
    assert [s for _, s in mmr_moved] == sorted((s for _, s in mmr_moved), reverse=True)
    assert np.isclose(dict(mmr_moved)[7], 0.3)


def test_code_lift_keeps_score_order_whatever_the_query_scores() -> None:
    from memtrio.actors.memory.code_recall import anchored_first

    # BM25 scores above 1 (the lexical ranking), the importer's memory 3 ranked first.
    ranked = [(3, 7.4), (9, 5.0), (1, 2.2), (4, 0.5)]
    merged = anchored_first(ranked, {1: 0, 3: 1, 8: 0, 6: 1}, 10)
    assert [m for m, _ in merged] == [1, 8, 3, 6, 9, 4]
    assert [s for _, s in merged] == sorted((s for _, s in merged), reverse=True)


RETRY = (
    "class RetryPolicy:\n    def backoff(self, attempt):\n        return min(30, 2 ** attempt)\n"
)
MAIN = "from app.retry import RetryPolicy\n\n\ndef main():\n    return RetryPolicy().backoff(1)\n"


@pytest.mark.parametrize("env", [ON, RERANK_OFF], ids=["rerank", "rerank-off"])
async def test_code_ranks_the_files_own_memory_above_its_importers(
    tmp_path: Path, env: dict[str, str]
) -> None:
    repo = make_repo(tmp_path / "repo", {"app/retry.py": RETRY, "app/main.py": MAIN})
    home = tmp_path / "home"
    home.mkdir()
    async with open_client(home, cwd=repo, env=env) as client:
        own = await ok(
            client, "remember", content="Backoff doubles the delay, capped at 30 seconds",
            code=[{"path": "app/retry.py"}],
        )  # fmt: skip
        importer = await ok(
            client, "remember",
            content="main retries the backoff of the retry policy when the retry delay is short",
            code=[{"path": "app/main.py"}],
        )  # fmt: skip
        # The query's words are the importer's: only the code tells them apart.
        for code in ("app/retry.py", "RetryPolicy"):
            found = await ok(client, "recall", query="retry backoff delay", code=code, explain=True)
            ids = [m["id"] for m in found["memories"]]
            assert ids[:2] == [own["id"], importer["id"]], (code, found["memories"])
            assert scores_in_order(found["memories"]), found["memories"]
            why = found["memories"][1]["explain"][0]
            assert why.startswith("code: anchored to code that imports"), why


async def test_observations_name_their_entity(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    services = {"billing-api": ("written in Go", "runs on port 8081"),
                "search-api": ("written in Rust", "runs on port 8082")}  # fmt: skip
    async with open_client(home, env=ON) as client:
        await ok(
            client, "create_entities",
            entities=[{"name": n, "entityType": "service", "observations": list(o)}
                      for n, o in services.items()],
        )  # fmt: skip
        found = await ok(client, "recall", query="which service is written in Go", limit=4)
        about = {m["content"]: [e["name"] for e in m["entities"]] for m in found["memories"]}
        assert about["written in Go"] == ["billing-api"], found
        assert about["written in Rust"] == ["search-api"], found
    printed = run_cli("search", "which service is written in Go", home=home, env=ON).stdout
    header = printed.splitlines()[printed.splitlines().index("    written in Go") - 1]
    assert header.endswith("· about billing-api"), printed
