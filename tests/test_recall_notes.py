"""Recall on the stores coding agents write, end to end through ``memtrio mcp``: a burst of
short project notes, and a knowledge graph of services imported from the reference
server's ``memory.jsonl``. Neither is a conversation, so the note written next to a
match must not be lifted by it (the learned re-ranker used to: docs/recall.md).
"""

from __future__ import annotations

import json
from pathlib import Path

from mcp_client import ok, open_client, run_cli
from memtrio.actors.ranker import rerank

ON = {"MEMTRIO_EMBEDDINGS": "on"}

# Thirty notes an agent writes about a project in one burst (the README tour's kind).
PROJECT_NOTES = [
    "The CLI entry point is memtrio.supervisors.cli:main.",
    "Tests run with pytest and xdist on two workers.",
    "Releases are tagged vX.Y.Z and built by the CI pipeline.",
    "We use trio, never asyncio, in this project.",
    "RetrievalConfig holds the damping factor for Personalized PageRank.",
    "Prefer msgspec Structs over dataclasses for wire types.",
    "The store is SQLite by default; PostgreSQL is optional.",
    "Embeddings come from an int8 ONNX MiniLM model shipped as a package.",
    "Logs go to stderr; stdout belongs to the MCP protocol.",
    "ruff format with a line length of 100 keeps the code tidy.",
    "mypy runs in strict mode on every module.",
    "The code index uses tree-sitter grammars from PyPI wheels.",
    "Supervisors restart crashed actors one_for_one within an intensity limit.",
    "Config lives in memtrio.toml under the home directory.",
    "The dashboard is served by the ui actor on a local port.",
    "Never commit secrets; tokens live in the home directory with mode 0600.",
    "FTS5 with the Porter stemmer answers lexical recall.",
    "Each tool's inputSchema is generated from its msgspec struct.",
    "Benchmarks live in tools/ and their output in docs/bench-runs/.",
    "The vector index switches from exact search to HNSW above 10,000 vectors.",
    "Scopes separate memories of different repositories.",
    "Import and export use a JSONL format with a header line.",
    "The serve command can detach and keep one server for several clients.",
    "Memory types include decision, convention, observation and todo.",
    "The chaos harness kills actors at random to test restarts.",
    "HTTP transport follows the Streamable HTTP spec with session ids.",
    "A memory anchored to code goes stale when its lines change.",
    "Importance is a float from 0 to 1 that breaks ties in listings.",
    "Dates in memories are normalised for temporal questions.",
    "The knowledge graph tools mirror the reference server-memory.",
]
TRIO = 3  # its index in PROJECT_NOTES


async def test_the_tour_query_finds_the_trio_note_first_among_a_burst_of_notes(
    tmp_path: Path,
) -> None:
    """'which async library do we use' is answered by the trio note, first by words and by
    meaning; the notes written around it are about other things and come after the
    notes that match by their own words or meaning. The re-ranker used to lend every
    note its neighbours' match (the issue's tour put the RetrievalConfig note first)."""
    home = tmp_path / "home"
    home.mkdir()
    async with open_client(home, env=ON) as client:
        ids = [(await ok(client, "remember", content=t))["id"] for t in PROJECT_NOTES]
        found = await ok(
            client, "recall", query="which async library do we use", limit=5, explain=True
        )
        got = [m["id"] for m in found["memories"]]
        assert got[0] == ids[TRIO], [m["content"][:50] for m in found["memories"]]
        # the note written after it says nothing about async libraries: it used to come
        # second, lent the trio note's match
        assert ids[TRIO + 1] not in got[:3], [m["content"][:50] for m in found["memories"]]
        reasons = [r for m in found["memories"] for r in m["explain"]]
        assert not any(r.startswith("neighbour:") for r in reasons), reasons


LANGUAGES = ("Go", "Python", "Rust", "Java", "TypeScript")


def services_graph() -> list[dict[str, object]]:
    """41 services in the reference server-memory's memory.jsonl records, each with its
    language, port and owner as observations (8 written in Go)."""
    records: list[dict[str, object]] = []
    for i in range(41):
        records.append(
            {
                "type": "entity",
                "name": f"svc-{i:02d}",
                "entityType": "service",
                "observations": [
                    f"runs on port {8000 + i}",
                    f"written in {LANGUAGES[i % len(LANGUAGES)]}",
                    f"owned by team {'ABCDEFG'[i % 7]}",
                ],
            }
        )
    for i in range(1, 41):
        records.append(
            {
                "type": "relation",
                "from": f"svc-{i:02d}",
                "to": f"svc-{(i - 1) // 2:02d}",
                "relationType": "calls",
            }
        )
    return records


async def test_which_service_is_written_in_go_returns_the_go_observations_first(
    tmp_path: Path,
) -> None:
    """A knowledge graph imported at once is a burst of observations: each service's
    'written in Go' sits next to its 'runs on port' and 'owned by' ones, which used to
    take the first places for being its neighbours."""
    home = tmp_path / "home"
    home.mkdir()
    source = tmp_path / "memory.jsonl"
    source.write_text("\n".join(json.dumps(r) for r in services_graph()) + "\n")
    imported = run_cli("import", str(source), "--json", home=home, env=ON)
    assert imported.returncode == 0, imported.stderr
    async with open_client(home, env=ON) as client:
        found = await ok(client, "recall", query="which service is written in Go", limit=5)
        got = [m["content"] for m in found["memories"]]
        assert got[:3] == ["written in Go"] * 3, got


def test_a_conversation_is_turns_of_speakers_taking_turns() -> None:
    """Neighbours count only between turns of a conversation: a memory that starts with a
    speaker label next to one of another speaker."""
    assert rerank.speaker("Melanie: We went camping.") == "melanie"
    assert rerank.speaker('(8 May, 2023) Melanie said, "We went camping."') == "melanie"
    assert rerank.speaker('[2023-05-09] Caroline said, "hiking"') == "caroline"
    assert rerank.speaker("user: how do I bake bread?") == "user"
    assert rerank.speaker("Mary Ann Smith: hello") == "mary ann smith"
    assert rerank.speaker("We use trio, never asyncio, in this project.") is None
    assert rerank.speaker("written in Go") is None
    shape = {
        1: rerank.Shape(20, False, "melanie", "melanie"),
        2: rerank.Shape(20, False, "caroline", "caroline"),
        3: rerank.Shape(20, False, "melanie", "melanie"),
        4: rerank.Shape(20, False, None, None),
        5: rerank.Shape(20, False, None, None),
    }
    near = {1: [(2, 1), (3, 2)], 2: [(1, 1), (3, 1)], 4: [(5, 1)], 5: [(4, 1)]}
    assert rerank.conversation_turns(shape, near, [1, 2, 4, 5]) == {1, 2}
    # one speaker alone (a log of one person's notes) is no conversation
    alone = {m: rerank.Shape(20, False, "melanie", "melanie") for m in (1, 2)}
    assert rerank.conversation_turns(alone, {1: [(2, 1)], 2: [(1, 1)]}, [1, 2]) == set()
