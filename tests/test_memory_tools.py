"""The nine memory tools end to end: the official MCP client against memtrio over each transport."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
from gitrepo import git
from mcp_client import call, every_transport, fails, ok, only_on, open_client
from stores import both_stores, rows, snapshot

# On PostgreSQL (stdio) only where the path differs from what tests/test_storage_contract*.py
# drive on both backends: the family's smoke path, a transaction across processes, a commit
# that fails. The other tests run on SQLite over every transport.
pytestmark = [every_transport]

MEMORY_TOOLS = {
    "remember",
    "recall",
    "stats",
    "list_scopes",
    "relate",
    "graph",
    "inspect",
    "update",
    "forget",
}


@pytest.fixture
def repos(tmp_path: Path) -> dict[str, Path]:
    base = tmp_path.resolve()
    main = base / "main"
    main.mkdir()
    git(main, "init", "-q", "-b", "main")
    (main / "README").write_text("x")
    git(main, "add", ".")
    git(main, "commit", "-q", "-m", "init")
    git(main, "worktree", "add", "-q", "-b", "wt", str(base / "wt"))
    git(base, "clone", "-q", str(main), str(base / "clone"))
    return {"main": main, "wt": base / "wt", "clone": base / "clone"}


@both_stores  # the memory tools' smoke path
async def test_every_memory_tool_end_to_end(
    home: Path, repos: dict[str, Path], transport: str
) -> None:
    scope = f"repo:{repos['main'] / '.git'}"
    async with open_client(home, cwd=repos["main"]) as client:
        if transport == "http":  # the repository comes from the client's roots, after initialize
            assert "comes from your client's MCP roots" in (client.instructions or "")
        else:
            assert f"`{scope}`" in (client.instructions or "")
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert MEMORY_TOOLS <= set(listed)
        assert listed["recall"].input_schema["properties"]["limit"]["maximum"] == 100
        assert listed["forget"].annotations.destructive_hint is True
        assert listed["stats"].annotations.read_only_hint is True

        fresh = await ok(
            client, "list_scopes"
        )  # read-only: lists current + global, creates nothing
        assert [s["name"] for s in fresh["scopes"]] == ["global", scope]
        assert (await ok(client, "stats"))["scopes"] == 0

        first = await ok(
            client,
            "remember",
            content="We chose trio over asyncio for structured concurrency.",
            memory_type="Decision",
            importance=0.8,
            entities=["trio", {"name": "asyncio", "kind": "library"}],
            relations=[{"source": "memtrio", "relation": "uses", "target": "trio"}],
        )
        assert first["id"] == 1 and first["scopes"] == [scope] and first["warnings"] == []
        assert {e["name"] for e in first["entities"]} == {"trio", "asyncio", "memtrio"}
        second = await ok(
            client,
            "remember",
            content="Run the test-suite with pytest -q before pushing.",
            scopes=["global"],
        )
        assert second["id"] == 2 and second["scopes"] == ["global"]
        third = await ok(
            client,
            "remember",
            content="trio nurseries replace asyncio gather",
            memory_type="pitfall",
        )

        found = await ok(client, "recall", query="trio concurrency", use_embeddings=False)
        assert found["ranking"] == "lexical" and found["warnings"] == []
        assert [m["id"] for m in found["memories"]] == [1, third["id"]]
        assert found["memories"][0]["access_count"] == 1
        typed = await ok(client, "recall", query="trio", memory_type="DECISION")
        assert [m["id"] for m in typed["memories"]] == [1]
        for query in [
            '"unbalanced',
            "zebra*",
            "-zebra",
            "col:umn",
            "(zebra",
            "zebra AND",
            "NEAR(",
            "OR",
            "***",
            "",
            "^x",
        ]:
            is_error, payload = await call(client, "recall", query=query)
            assert not is_error, (query, payload)
        none = await ok(client, "recall", query="kubernetes")
        assert none["memories"] == []

        stats = await ok(client, "stats")
        assert {k: stats[k] for k in ("memories", "scopes", "entities", "edges")} == {
            "memories": 3,
            "scopes": 2,
            "entities": 3,
            "edges": 1,
        }
        scopes = await ok(client, "list_scopes")
        assert scopes["current_scope"] == scope
        assert [(s["name"], s["is_current"], s["writable"]) for s in scopes["scopes"]] == [
            ("global", False, True),
            (scope, True, True),
        ]

        rel = await ok(
            client,
            "relate",
            source="trio",
            relation="replaces",
            target="asyncio",
            metadata={"since": "2024"},
        )
        assert rel["created"] is True and rel["warnings"] == []
        again = await ok(client, "relate", source="Trio", relation="replaces", target="asyncio")
        assert again["id"] == rel["id"] and again["created"] is False
        await ok(
            client, "relate", source="asyncio", relation="inspired", target="memtrio"
        )  # a cycle
        graph = await ok(client, "graph", entity="memtrio", direction="outgoing", max_depth=3)
        assert [
            [(e["source"], e["relation"], e["target"]) for e in p["edges"]] for p in graph["paths"]
        ] == [
            [("memtrio", "uses", "trio")],
            [("memtrio", "uses", "trio"), ("trio", "replaces", "asyncio")],
        ]
        both = await ok(client, "graph", entity="trio", max_depth=3, limit=100)
        assert both["truncated"] is False and len(both["paths"]) == 4  # cycles end the paths
        one = await ok(client, "graph", entity="trio", limit=1)
        assert len(one["paths"]) == 1 and one["truncated"] is True
        incoming = await ok(client, "graph", entity="trio", direction="incoming", max_depth=1)
        assert [p["end"] for p in incoming["paths"]] == ["memtrio"]

        shown = await ok(client, "inspect", id=1)
        assert shown["content"].startswith("We chose trio") and shown["scopes"] == [scope]
        assert shown["access_count"] == 3  # two recalls + this inspect
        assert {e["name"] for e in shown["entities"]} == {"trio", "asyncio", "memtrio"}
        assert shown["relations"] == [
            {"id": 1, "source": "memtrio", "relation": "uses", "target": "trio"}
        ]

        updated = await ok(client, "update", id=1, importance=0.3)
        assert updated["changed"] == ["importance"]
        assert (
            updated["content"].startswith("We chose trio") and updated["memory_type"] == "Decision"
        )
        updated = await ok(
            client, "update", id=1, content="We chose trio; asyncio is not used anywhere."
        )
        assert updated["importance"] == 0.3 and updated["scopes"] == [scope]
        assert (await ok(client, "inspect", id=1))["entities"] == shown["entities"]
        assert [m["id"] for m in (await ok(client, "recall", query="anywhere"))["memories"]] == [1]

        gone = await ok(client, "forget", id=third["id"])
        assert gone["forgotten"] is True
        assert "not found" in await fails(client, "inspect", id=third["id"])
        assert (await ok(client, "stats"))["memories"] == 2

    log = rows(home, "SELECT kind, query, ids FROM recall_log ORDER BY id")
    assert ("recall", "kubernetes", "[]") in log  # calls that return nothing are logged too
    assert sum(1 for k, *_ in log if k == "inspect") == 2  # the refused inspect is not an access
    assert ("recall", "trio concurrency", f"[1, {third['id']}]") in log


async def test_refusals_are_errors_that_say_why_and_change_nothing(
    home: Path, repos: dict[str, Path]
) -> None:
    current = f"repo:{repos['main'] / '.git'}"
    foreign = f"repo:{repos['clone'] / '.git'}"
    async with open_client(home, cwd=repos["main"]) as client:
        await ok(client, "remember", content="keep me", entities=["x"])
        await ok(client, "relate", source="x", relation="r", target="y")
        before = snapshot(home)
        cases: list[tuple[str, dict[str, Any], list[str]]] = [
            ("remember", {"content": "no", "scopes": [foreign]}, [foreign, current, "global"]),
            (
                "remember",
                {"content": "no", "scopes": ["global", f"repo:{repos['clone']}"]},
                [foreign],
            ),
            (
                "remember",
                {"content": "no", "scopes": ["project"]},
                ["`global` or `repo:/absolute/path`"],
            ),
            ("remember", {"content": "no", "scopes": ["repo:relative"]}, ["absolute"]),
            ("remember", {"content": "   "}, ["content"]),
            ("remember", {"content": "no", "importance": 1.5}, ["importance"]),
            ("remember", {"content": "no", "bogus": 1}, ["bogus"]),
            (
                "relate",
                {"source": "a", "relation": "b", "target": "c", "scopes": [foreign]},
                [foreign],
            ),
            ("update", {"id": 1, "content": "no", "scopes": [foreign]}, [foreign]),
            ("update", {"id": 99, "content": "no"}, ["memory 99 not found"]),
            ("update", {"id": 1}, ["nothing to update"]),
            ("forget", {"id": 1, "scopes": [foreign]}, [foreign]),
            ("forget", {"id": 99}, ["memory 99 not found"]),
            ("forget", {"id": 0}, ["id"]),
            ("inspect", {"id": 99}, ["memory 99 not found"]),
            ("inspect", {"id": 1, "scopes": ["nope"]}, ["invalid scope"]),
            ("recall", {"query": "keep", "limit": 0}, ["limit"]),
            ("recall", {"query": "keep", "limit": 101}, ["limit"]),
            ("recall", {"query": "keep", "scopes": ["repo:"]}, ["absolute"]),
            ("graph", {"entity": "x", "max_depth": 4}, ["max_depth"]),
            ("graph", {"entity": "x", "limit": 0}, ["limit"]),
            ("graph", {"entity": "x", "direction": "sideways"}, ["direction"]),
            ("graph", {"entity": "nobody"}, ["not found"]),
        ]
        for tool, arguments, needles in cases:
            message = await fails(client, tool, **arguments)
            for needle in needles:
                assert needle in message, (tool, arguments, message)
        assert snapshot(home) == before


async def test_worktrees_share_a_scope_and_clones_do_not(
    home: Path, repos: dict[str, Path]
) -> None:
    main_scope = f"repo:{repos['main'] / '.git'}"
    clone_scope = f"repo:{repos['clone'] / '.git'}"
    async with open_client(home, cwd=repos["wt"]) as client:
        mem = await ok(client, "remember", content="worktree note about caching")
        assert mem["scopes"] == [main_scope]
        shared = await ok(
            client,
            "remember",
            content="caching shared with global",
            scopes=["global", f"repo:{repos['main']}"],
        )
        assert shared["scopes"] == ["global", main_scope]
    async with open_client(home, cwd=repos["main"]) as client:
        assert [m["id"] for m in (await ok(client, "recall", query="caching note"))["memories"]][
            0
        ] == mem["id"]
        await ok(client, "inspect", id=mem["id"])
    async with open_client(home, cwd=repos["clone"]) as client:
        scopes = await ok(client, "list_scopes")
        assert scopes["current_scope"] == clone_scope
        listed = {s["name"]: s for s in scopes["scopes"]}
        assert listed[main_scope]["writable"] is False and listed[clone_scope]["is_current"] is True
        # Unselected repositories never appear; global ones do.
        assert [m["id"] for m in (await ok(client, "recall", query="caching"))["memories"]] == [
            shared["id"]
        ]
        assert "not found" in await fails(client, "inspect", id=mem["id"])
        # Selecting the other repository explicitly reads it (plus global), without the current one.
        explicit = await ok(client, "recall", query="caching", scopes=[main_scope])
        assert {m["id"] for m in explicit["memories"]} == {mem["id"], shared["id"]}
        assert (await ok(client, "inspect", id=mem["id"], scopes=[f"repo:{repos['wt']}"]))[
            "id"
        ] == mem["id"]
        # A memory shared with another repository is read-only here, even though it is also global.
        message = await fails(client, "update", id=shared["id"], content="changed")
        assert main_scope in message and "read-only" in message
        assert main_scope in await fails(client, "forget", id=shared["id"])
        assert clone_scope in await fails(client, "remember", content="x", scopes=[main_scope])


@both_stores  # transactions across processes
async def test_two_servers_writing_at_once_lose_nothing(home: Path, tmp_path: Path) -> None:
    per_task, tasks = 25, 3
    outside = tmp_path / "outside"
    outside.mkdir()

    async def server(name: str) -> None:
        async with open_client(home, cwd=outside) as client:

            async def writer(task: int) -> None:
                for i in range(per_task):
                    await ok(
                        client,
                        "remember",
                        content=f"{name} task {task} note {i}",
                        entities=[f"{name}-{task}"],
                    )

            async with trio.open_nursery() as nursery:
                for task in range(tasks):
                    nursery.start_soon(writer, task)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(server, "alpha")
        nursery.start_soon(server, "beta")
    contents = {r[0] for r in rows(home, "SELECT content FROM memories")}
    links = rows(home, "SELECT count(*) FROM memory_entities")[0][0]
    expected = {
        f"{n} task {t} note {i}"
        for n in ("alpha", "beta")
        for t in range(tasks)
        for i in range(per_task)
    }
    assert contents == expected
    assert links == len(expected)


@both_stores  # a transaction that fails at commit
async def test_a_fault_at_commit_is_an_error_result_and_stores_nothing(
    home: Path, tmp_path: Path
) -> None:
    async with open_client(
        home, cwd=tmp_path, env={"MEMTRIO_FAULTS": "store.commit=raise@2"}
    ) as client:
        await ok(client, "remember", content="first", entities=["a"])
        message = await fails(
            client,
            "remember",
            content="second",
            entities=["b"],
            relations=[{"source": "b", "relation": "r", "target": "c"}],
        )
        assert "injected fault" in message
        stats = await ok(client, "stats")
        assert (stats["memories"], stats["entities"], stats["edges"]) == (1, 1, 0)
        assert (await ok(client, "remember", content="third"))["id"] == 2


@only_on(
    "stdio", "http", reason="loads the model per server; the model path is transport-independent"
)
async def test_with_the_real_embedder_vectors_are_stored_with_the_rows(
    home: Path, tmp_path: Path
) -> None:
    async with open_client(home, cwd=tmp_path, env={"MEMTRIO_EMBEDDINGS": "on"}) as client:
        first = await ok(
            client,
            "remember",
            content="The database layer uses SQLite in WAL mode.",
            relations=[{"source": "memtrio", "relation": "stores_in", "target": "SQLite"}],
        )
        assert first["warnings"] == []
        # 1,200 word pieces: overlapping windows, nothing cut; 4,000: more than the
        # 32 windows cover, so the rest is cut and reported.
        long = await ok(client, "remember", content=" ".join(["tokens"] * 600))
        assert long["warnings"] == []
        longer = await ok(client, "remember", content=" ".join(["words"] * 4000))
        assert len(longer["warnings"]) == 1 and "truncated" in longer["warnings"][0]
        rel = await ok(client, "relate", source="SQLite", relation="replaces", target="Postgres")
        assert rel["warnings"] == []
        found = await ok(client, "recall", query="which database engine do we use")
        assert found["memories"][0]["id"] == first["id"]
    kinds = rows(home, "SELECT kind, count(*), min(dim) FROM vectors GROUP BY kind ORDER BY kind")
    chunks = dict(
        rows(
            home,
            "SELECT item_id, count(*) FROM vector_chunks WHERE kind = 'memory' GROUP BY item_id",
        )
    )
    assert kinds == [("entity", 3, 384), ("memory", 3, 384), ("relation", 2, 384)]
    # "tokens" is two word pieces: 1,200 of them take 12 windows of 128 tokens (stride 96)
    # beyond chunk 0; 4,000 take more than the 32 windows, which are all stored.
    assert chunks == {long["id"]: 12, longer["id"]: 31}
