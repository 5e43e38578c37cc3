"""Semantic recall follows the writes of another process (issue #37, item 3).

A server (``A``, the one whose recall is checked) keeps a cache of the store: the
ranker's vectors, attributes and graph, the vector tools' index. Another process writes
the same store: the CLI (``memtrio remember``, ``forget``, ``import``, ``reembed``,
``migrate``) or a second server (``B``: ``update``, the knowledge-graph tools, the vector
tools). Each test makes ``A`` load its cache first, lets the other process write, often
lets ``A`` write something of its own in between (a forget, a remember: what made the
first bug), and checks that ``A``'s recall sees exactly what a fresh server sees.

Before the fix the cache noticed another process's writes only when row counts or highest
ids changed, and only if ``A`` had not written since: every case here missed the write.

The matrix of every kind of write by every order of ``A``'s own write (13 cases, each two
servers and a few CLI runs) runs in full with ``-m slow``. The default run keeps three
cases that together cover each way a change reaches ``A`` unnoticed before the fix: the
CLI's forget-then-remember (row counts unchanged) with ``A``'s write after it and a fresh
server's ranking to agree with; a second server's knowledge-graph writes (entities, a
relation, a deletion) after ``A``'s own write; and an update alone (no row added or
removed, only a new text).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp import Client
from mcp_client import ok, open_client, run_cli
from stores import both_stores

ON = {"MEMTRIO_EMBEDDINGS": "on"}
OFF = {"MEMTRIO_EMBEDDINGS": "off"}

FIRST = "Database backups are copied to an offsite bucket every Sunday."
SECOND = "The frontend build uses Vite with strict TypeScript settings."
ZEBRA = "The zebra migration runs nightly at 2am"
ZEBRA_QUERY = "zebra migration nightly"
# Shares no word with PAYROLL: found by meaning only.
PAYROLL = "Salaries are paid on the last working day of each month."
PAYROLL_QUERY = "when do employees get their wages"
UNRELATED = [
    "The office coffee machine is descaled on the first Monday of each month.",
    "Docker images are tagged with the short git commit hash.",
    "The quarterly planning meeting moved to the large conference room.",
]


def ids_of(payload: dict[str, Any]) -> list[int]:
    return [m["id"] for m in payload["memories"]]


async def cli(home: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """``memtrio ARGS`` on ``home``'s store, as another process; its stdout."""
    done = await trio.to_thread.run_sync(
        lambda: run_cli(*args, home=home, env=env or ON, timeout=180)
    )
    assert done.returncode == 0, f"memtrio {' '.join(args)}: {done.stderr}"
    return done.stdout


async def remember_cli(home: Path, text: str, env: dict[str, str] | None = None) -> int:
    out = json.loads(await cli(home, "remember", text, "--json", env=env))
    return int(out["id"])


async def recall(client: Client, query: str, limit: int = 5) -> list[int]:
    found = await ok(client, "recall", query=query, limit=limit)
    assert found["ranking"] == "semantic", found
    return ids_of(found)


@asynccontextmanager
async def server(home: Path, env: dict[str, str] | None = None) -> AsyncIterator[Client]:
    async with open_client(home, env=env or ON, timeout=120) as client:
        yield client


async def fresh_recall(home: Path, queries: list[str], limit: int = 5) -> list[list[int]]:
    """What a server started now recalls: the truth a long-running cache must agree with."""
    async with server(home) as fresh:
        return [await recall(fresh, q, limit) for q in queries]


@both_stores
async def test_a_memory_written_by_the_cli_after_a_forget_is_recalled(tmp_path: Path) -> None:
    # The report of issue #37 (3), step by step: the owner's own forget used to hide
    # the CLI's remember from its cache for good (after its next write too, and 5 s).
    home = tmp_path / "home"
    home.mkdir()
    async with server(home) as a:
        first = (await ok(a, "remember", content=FIRST))["id"]
        second = (await ok(a, "remember", content=SECOND))["id"]
        await recall(a, ZEBRA_QUERY)  # the cache is loaded
        await ok(a, "forget", id=second)
        zebra = await remember_cli(home, ZEBRA)
        assert sorted(await recall(a, ZEBRA_QUERY)) == sorted([first, zebra])
        assert (await recall(a, ZEBRA_QUERY, limit=1)) == [zebra]
        await ok(a, "remember", content=UNRELATED[0])  # the server's own next write
        assert zebra in await recall(a, ZEBRA_QUERY)


async def _remember(home: Path, b: Client) -> tuple[list[int], list[int]]:
    return [await remember_cli(home, PAYROLL)], []


async def _forget_then_remember(home: Path, b: Client) -> tuple[list[int], list[int]]:
    # One memory less, one more: the same counts as before.
    doomed = (await ok(b, "recall", query=SECOND, limit=1))["memories"][0]["id"]
    await cli(home, "forget", str(doomed))
    return [await remember_cli(home, PAYROLL)], [doomed]


async def _update(home: Path, b: Client) -> tuple[list[int], list[int]]:
    # The same rows, a new text: no count moves.
    target = (await ok(b, "recall", query=SECOND, limit=1))["memories"][0]["id"]
    await ok(b, "update", id=target, content=PAYROLL)
    return [target], []


async def _import(home: Path, b: Client) -> tuple[list[int], list[int]]:
    other = home.parent / "other"
    other.mkdir()
    await remember_cli(other, PAYROLL)
    export = home.parent / "export.jsonl"
    await cli(other, "export", str(export))
    await cli(home, "import", str(export), env=OFF)
    found = await ok(b, "recall", query=PAYROLL, limit=1, use_embeddings=False)
    return ids_of(found), []


async def _reembed(home: Path, b: Client) -> tuple[list[int], list[int]]:
    # Written without a vector, then given one by `memtrio reembed`.
    added = await remember_cli(home, PAYROLL, env=OFF)
    await cli(home, "reembed")
    return [added], []


async def _knowledge_graph(home: Path, b: Client) -> tuple[list[int], list[int]]:
    await ok(
        b,
        "create_entities",
        entities=[{"name": "payroll-service", "entityType": "service", "observations": [PAYROLL]}],
    )
    await ok(
        b,
        "create_relations",
        relations=[{"from": "payroll-service", "to": "payroll-service", "relationType": "pays"}],
    )
    found = await ok(b, "recall", query=PAYROLL, limit=1, use_embeddings=False)
    # And an entity deleted, with its observation.
    await ok(
        b,
        "create_entities",
        entities=[{"name": "old-cron", "entityType": "job", "observations": [SECOND + " (cron)"]}],
    )
    gone = await ok(b, "recall", query=SECOND + " (cron)", limit=1, use_embeddings=False)
    await ok(b, "delete_entities", entityNames=["old-cron"])
    return ids_of(found), ids_of(gone)


WRITES: dict[str, Callable[[Path, Client], Any]] = {
    "remember": _remember,
    "forget-then-remember": _forget_then_remember,
    "update": _update,
    "import": _import,
    "reembed": _reembed,
    "knowledge-graph": _knowledge_graph,
}


# Where the server's own write goes: right before the other process's write, right after
# it, or nowhere (an update alone: the same rows, the same counts, only a new text).
CASES = [(kind, order) for kind in sorted(WRITES) for order in ("own-first", "own-after")]
# The default run's cases (the module's text says why these); the rest run with -m slow.
DEFAULT_CASES = {
    ("forget-then-remember", "own-after"),
    ("knowledge-graph", "own-first"),
    ("update", "alone"),
}


@pytest.mark.parametrize(
    ("kind", "order"),
    [
        pytest.param(*case, marks=() if case in DEFAULT_CASES else pytest.mark.slow)
        for case in [*CASES, ("update", "alone")]
    ],
)
async def test_recall_sees_every_kind_of_write_by_another_process(
    tmp_path: Path, kind: str, order: str
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    async with server(home) as a, server(home, OFF) as b:
        for text in [FIRST, SECOND, *UNRELATED]:
            await ok(a, "remember", content=text)
        await recall(a, PAYROLL_QUERY)  # the cache is loaded
        if order == "own-first":
            await ok(a, "forget", id=(await ok(a, "remember", content="Lint runs in CI."))["id"])
        added, removed = await WRITES[kind](home, b)
        if order == "own-after":
            await ok(a, "remember", content="Lint runs before every commit in CI.")
        seen = await recall(a, PAYROLL_QUERY, limit=10)
        assert added and set(added) <= set(seen[:2]), (added, seen)
        assert not set(removed) & set(seen)
        if order == "own-after":  # and a fresh server agrees on the whole ranking
            truth = await fresh_recall(home, [PAYROLL_QUERY, SECOND], limit=3)
            assert [await recall(a, PAYROLL_QUERY, 3), await recall(a, SECOND, 3)] == truth


async def test_recall_sees_a_store_filled_by_migrate_while_it_runs(
    tmp_path: Path, pg_server: Any
) -> None:
    # `memtrio migrate --from` copies a PostgreSQL store into the empty SQLite store a
    # server already runs on (in one transaction, outside any server).
    url = pg_server.database()
    source, home = tmp_path / "source", tmp_path / "home"
    source.mkdir()
    home.mkdir()
    await cli(source, "remember", PAYROLL, "--store", url)
    async with server(home) as a:
        assert await recall(a, PAYROLL_QUERY) == []  # the cache is loaded, empty
        done = await trio.to_thread.run_sync(
            lambda: run_cli("migrate", "--from", url, home=home, env=OFF, timeout=180)
        )
        # Copied and checked; only the recall log differs (a's recall above wrote a line).
        assert "memory: 1 " in done.stdout and " ok" in done.stdout, done.stdout
        assert [line for line in done.stdout.splitlines() if "DIFFERS" in line] in (
            [],
            [line for line in done.stdout.splitlines() if line.strip().startswith("recall_log")],
        ), done.stdout
        own = (await ok(a, "remember", content=UNRELATED[0]))["id"]
        seen = await recall(a, PAYROLL_QUERY)
        assert len(seen) == 2 and seen[0] != own, seen
        assert seen == (await fresh_recall(home, [PAYROLL_QUERY]))[0]


VECTORS = {"MEMTRIO_VECTORS": "on", "MEMTRIO_VECTORS_DIMS": "3", "MEMTRIO_VECTORS_BACKEND": "exact"}


def names(found: dict[str, Any]) -> list[str]:
    return [hit["entityName"] for hit in found["results"]]


async def test_the_vector_index_and_its_graph_follow_another_servers_writes(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {**OFF, **VECTORS}
    async with server(home, env) as a, server(home, env) as b:
        places = [{"name": n, "entityType": "place", "observations": []} for n in ("alpha", "beta")]
        await ok(a, "create_entities", entities=places)
        await ok(a, "vector_upsert_embedding", entityName="alpha", embedding=[1.0, 0.0, 0.0])
        await ok(a, "vector_upsert_embedding", entityName="beta", embedding=[0.6, 0.8, 0.0])
        up = [0.0, 0.0, 1.0]
        assert names(await ok(a, "vector_search_entities", embedding=up, topK=1)) == ["alpha"]
        hybrid = {"queryText": "place", "queryEmbedding": [1.0, 0.0, 0.0], "textWeight": 0.0}
        boosted = {**hybrid, "centralityBoost": 10.0, "topK": 2}
        assert names(await ok(a, "hybrid_search", **boosted)) == ["alpha", "beta"]

        # Another server adds an entity with a vector: a's index has it at once.
        gamma = [{"name": "gamma", "entityType": "place", "observations": []}]
        await ok(b, "create_entities", entities=gamma)
        await ok(b, "vector_upsert_embedding", entityName="gamma", embedding=up)
        assert names(await ok(a, "vector_search_entities", embedding=up, topK=1)) == ["gamma"]

        # It moves one vector and deletes another; a writes one of its own in between.
        await ok(b, "vector_upsert_embedding", entityName="beta", embedding=[0.1, 0.0, 1.0])
        await ok(a, "vector_upsert_embedding", entityName="alpha", embedding=[1.0, 0.1, 0.0])
        await ok(b, "vector_delete_embedding", entityName="gamma")
        assert names(await ok(a, "vector_search_entities", embedding=up, topK=1)) == ["beta"]

        # Relations by the other server make beta the hub the centrality boost lifts.
        await ok(b, "vector_upsert_embedding", entityName="beta", embedding=[0.6, 0.8, 0.0])
        relations = [
            {"from": "alpha", "to": "beta", "relationType": "near"},
            {"from": "gamma", "to": "beta", "relationType": "near"},
        ]
        await ok(b, "create_relations", relations=relations)
        expected = names(await ok(b, "hybrid_search", **boosted))
        assert expected == ["beta", "alpha"]
        assert names(await ok(a, "hybrid_search", **boosted)) == expected


def reloads(home: Path) -> int:
    """The ranker's reloads for another process's writes, from the trace log."""
    log = (home / "logs" / "memtrio.log").read_text(encoding="utf-8")
    return sum('"external_change"' in line and '"ranker"' in line for line in log.splitlines())


async def test_the_servers_own_writes_never_reload_its_cache(tmp_path: Path) -> None:
    # Each own write is told to the cache with its change mark: only another process's
    # write costs a reload (about 1 s at 100,000 memories).
    home = tmp_path / "home"
    home.mkdir()
    async with server(home, {**ON, "MEMTRIO_LOG_LEVEL": "info"}) as a:
        await recall(a, ZEBRA_QUERY)
        for text in [FIRST, SECOND, *UNRELATED]:
            mid = (await ok(a, "remember", content=text))["id"]
            await ok(a, "update", id=mid, content=text + " (checked)")
            await recall(a, ZEBRA_QUERY)
        await ok(a, "forget", id=mid)
        await recall(a, ZEBRA_QUERY)
        assert reloads(home) == 0
        zebra = await remember_cli(home, ZEBRA)
        assert (await recall(a, ZEBRA_QUERY, limit=1)) == [zebra]
        assert reloads(home) == 1


@pytest.mark.stores("postgresql")
async def test_a_write_whose_notification_is_late_is_seen_by_the_next_call(
    tmp_path: Path,
) -> None:
    # On PostgreSQL a server learns of another process's write from a notification, which
    # can reach it after the writer has returned: a recall (or a vector search) made in
    # between used to answer without the write (seen in CI: the CLI's remember missing
    # from the next recall). The fault point holds each notification back 0.6 s.
    home = tmp_path / "home"
    home.mkdir()
    late = {"MEMTRIO_FAULTS": "store.notice=delay:0.6"}
    async with server(home, {**ON, **VECTORS, **late}) as a, server(home, {**OFF, **VECTORS}) as b:
        first = (await ok(a, "remember", content=FIRST))["id"]
        await recall(a, ZEBRA_QUERY)  # the cache is loaded
        zebra = await remember_cli(home, ZEBRA)
        assert await recall(a, ZEBRA_QUERY, limit=1) == [zebra]
        assert sorted(await recall(a, ZEBRA_QUERY)) == sorted([first, zebra])

        alpha = [{"name": "alpha", "entityType": "place", "observations": []}]
        await ok(a, "create_entities", entities=alpha)
        await ok(a, "vector_upsert_embedding", entityName="alpha", embedding=[1.0, 0.0, 0.0])
        up = [0.0, 0.0, 1.0]
        assert names(await ok(a, "vector_search_entities", embedding=up, topK=1)) == ["alpha"]
        gamma = [{"name": "gamma", "entityType": "place", "observations": []}]
        await ok(b, "create_entities", entities=gamma)
        await ok(b, "vector_upsert_embedding", entityName="gamma", embedding=up)
        assert names(await ok(a, "vector_search_entities", embedding=up, topK=1)) == ["gamma"]
