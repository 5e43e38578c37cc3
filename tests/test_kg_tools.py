"""The knowledge-graph tools end to end through the official MCP client, one test per tool.

The graph used throughout (a cycle A -> B -> C -> A plus D hanging off it, E alone)::

    A -knows-> B -knows-> C -knows-> A
    A -funds-> D     C -manages-> D     E

Two servers serve the module, on each transport (a server per test would cost
more than all the calls): ``graph`` holds that graph, built once, for the read-only tools and the
writes that must change nothing; ``edits`` is a second server on which the
tools that change the graph are called in order, each result (and the reads
right after it) recorded for the test of that tool.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_client import (
    ThreadedClient,
    call,
    every_transport,
    open_client,
    stdio_only,
    threaded_client,
)
from stores import both_stores

# On PostgreSQL (stdio) one read and one write of the family (its smoke path, one server each);
# every graph read and write is driven on both backends by tests/test_storage_contract*.py.
pytestmark = [every_transport]

KG_READ = {
    "read_graph", "search_nodes", "open_nodes", "batch_get_entities", "get_entity", "entity_exists",
    "graph_stats", "search_relations", "describe_entity", "degree", "find_path", "find_all_paths",
    "extract_subgraph", "get_neighbors", "list_entity_types", "list_relation_types", "export_graph",
}  # fmt: skip
KG_WRITE = {
    "create_entities", "create_relations", "add_observations", "delete_entities", "delete_observations",
    "delete_relations", "upsert_entities", "merge_entities", "compact",
}  # fmt: skip

ENTITIES = [
    {"name": "A", "entityType": "person", "observations": ["likes green tea", "a manager"]},
    {"name": "B", "entityType": "person", "observations": ["plays chess"]},
    {"name": "C", "entityType": "person", "observations": ["plays chess", "writes Rust"]},
    {"name": "D", "entityType": "project", "observations": ["database migration"]},
    {"name": "E", "entityType": "project", "observations": ["dup", "dup"]},
]  # fmt: skip


def rel(src: str, rtype: str, tgt: str) -> dict[str, str]:
    return {"from": src, "to": tgt, "relationType": rtype}


RELATIONS = [
    rel("A", "knows", "B"), rel("B", "knows", "C"), rel("C", "knows", "A"),
    rel("A", "funds", "D"), rel("C", "manages", "D"), rel("A", "knows", "B"),
]  # fmt: skip
B_OBSERVATIONS = [{"entityName": "B", "contents": ["plays chess", "speaks Finnish"]}]


def names(result: dict) -> list[str]:
    return [e if isinstance(e, str) else e["name"] for e in result["entities"]]


@pytest.fixture(scope="module")
def shared(
    tmp_path_factory: pytest.TempPathFactory, transport: str
) -> Iterator[tuple[ThreadedClient, dict[str, Any]]]:
    """The server holding the graph, and what the calls that built it returned."""
    with threaded_client(tmp_path_factory.mktemp("kg-graph"), transport=transport) as g:
        built = {"create_entities": g.ok("create_entities", entities=ENTITIES)}
        built["create_relations refused"] = g.fails(
            "create_relations", relations=[rel("A", "knows", "B"), rel("A", "knows", "Nobody")]
        )
        built["relations after the refusal"] = g.ok("search_relations")["total"]
        built["create_relations"] = g.ok("create_relations", relations=RELATIONS)
        built["add_observations"] = g.ok("add_observations", observations=B_OBSERVATIONS)
        yield g, built


@pytest.fixture(scope="module")
def graph(shared: tuple[ThreadedClient, dict[str, Any]]) -> ThreadedClient:
    return shared[0]


@pytest.fixture(scope="module")
def built(shared: tuple[ThreadedClient, dict[str, Any]]) -> dict[str, Any]:
    return shared[1]


@pytest.fixture(scope="module")
def edits(tmp_path_factory: pytest.TempPathFactory, transport: str) -> dict[str, Any]:
    """The tools that change the graph, called in order on a server of their own.

    upsert, merge, the deletes, compact, export: each result, and what reads
    showed right after it, recorded under the tool's name.
    """
    seen: dict[str, Any] = {}
    with threaded_client(tmp_path_factory.mktemp("kg-edits"), transport=transport) as g:
        g.ok("create_entities", entities=ENTITIES)
        g.ok("create_relations", relations=RELATIONS)
        g.ok("add_observations", observations=B_OBSERVATIONS)
        seen["upsert_entities"] = g.ok(
            "upsert_entities",
            entities=[
                {"name": "D", "entityType": "program", "observations": ["database migration", "phase two"]},
                {"name": "F", "observations": ["new"]},
            ],
        )  # fmt: skip
        seen["merge_entities"] = {
            "into a source": g.fails("merge_entities", sources=["B", "C"], target="C"),
            "unknown source": g.fails("merge_entities", sources=["ghost"], target="C"),
            "B into C": g.ok("merge_entities", sources=["B"], target="C"),
            "B exists": g.ok("entity_exists", names=["B"])["exists"]["B"],
            "A knows": g.ok("search_relations", **{"from": "A", "relationType": "knows"}),
            "C degree": g.ok("degree", name="C")["total"],
            "F into G": g.ok("merge_entities", sources=["F"], target="G"),
            "G": g.ok("get_entity", name="G"),
        }
        seen["delete_observations"] = {
            "result": g.ok(
                "delete_observations",
                deletions=[{"entityName": "A", "observations": ["a manager", "not there"]}],
            ),
            "search manager": g.ok("search_nodes", query="manager"),
        }
        seen["delete_relations"] = g.ok("delete_relations", relations=[rel("C", "knows", "A")])
        seen["delete_entities"] = {
            "result": g.ok("delete_entities", entityNames=["D", "ghost"]),
            "relations": g.ok("search_relations")["relations"],
            "recall migration": g.ok("recall", query="migration")["memories"],
            "entities": g.ok("graph_stats")["entities"],
        }
        seen["compact"] = {
            "result": g.ok("compact"),
            "E": g.ok("get_entity", name="E")["observations"],
        }
        exported = g.ok("export_graph")
        first = g.ok("export_graph", limit=3)
        seen["export_graph"] = {
            "all": exported,
            "first": first,
            "rest": g.ok("export_graph", offset=first["nextOffset"]),
        }
    return seen


# -- the tools as listed


def test_graph_tools_are_listed_read_only_or_not(graph: ThreadedClient) -> None:
    listed = {t.name: t for t in graph.run(Client.list_tools).tools}
    assert KG_READ | KG_WRITE <= set(listed)
    assert all(listed[n].annotations.read_only_hint for n in KG_READ)
    assert not any(listed[n].annotations.read_only_hint for n in KG_WRITE)
    assert listed["delete_entities"].annotations.destructive_hint


# -- writes that build the graph


def test_create_entities_returns_the_created_and_skips_existing(
    graph: ThreadedClient, built: dict[str, Any]
) -> None:
    created = built["create_entities"]
    assert names(created) == ["A", "B", "C", "D", "E"]
    assert created["entities"][0] == {
        "name": "A",
        "entityType": "person",
        "observations": ["likes green tea", "a manager"],
    }
    again = graph.ok(
        "create_entities", entities=[{"name": "A", "entityType": "x", "observations": ["ignored"]}]
    )
    assert again == {"entities": []}


def test_create_relations_refuses_a_batch_with_a_missing_endpoint(
    graph: ThreadedClient, built: dict[str, Any]
) -> None:
    message = built["create_relations refused"]
    assert "Nobody" in message and "create_entities" in message
    assert built["relations after the refusal"] == 0
    made = built["create_relations"]
    assert len(made["relations"]) == 5
    assert made["relations"][0] == rel("A", "knows", "B")
    assert graph.ok("create_relations", relations=[rel("A", "knows", "B")]) == {"relations": []}


def test_add_observations_skips_duplicates_and_refuses_an_unknown_entity(
    graph: ThreadedClient, built: dict[str, Any]
) -> None:
    assert built["add_observations"] == {
        "results": [{"entityName": "B", "addedObservations": ["speaks Finnish"]}]
    }
    message = graph.fails(
        "add_observations", observations=[{"entityName": "Zed", "contents": ["x"]}]
    )
    assert "Zed" in message


# -- reads (the shared graph)


def test_search_nodes_matches_words_and_prefixes_of_names_types_observations(
    graph: ThreadedClient,
) -> None:
    found = graph.ok("search_nodes", query="chess")
    assert names(found) == ["B", "C"]
    assert rel("A", "knows", "B") in found["relations"]  # relations touching a result
    assert names(graph.ok("search_nodes", query="manag")) == ["A"]  # prefix
    assert names(graph.ok("search_nodes", query="project")) == ["D", "E"]  # type
    assert names(graph.ok("search_nodes", query="chess Rust")) == ["C"]  # every word
    assert names(graph.ok("search_nodes", query="ess")) == []  # not a substring scan
    paged = graph.ok("search_nodes", query="chess", limit=1, mode="names")
    assert paged == {"entities": ["B"], "total": 2, "nextOffset": 1}
    paged = graph.ok("search_nodes", query="chess", limit=1, offset=1, mode="summary")
    assert paged["entities"] == [{"name": "C", "entityType": "person", "observationCount": 2}]
    assert paged["nextOffset"] is None
    assert names(graph.ok("search_nodes", query="chess", entityType="nope")) == []
    assert "no words" in graph.fails("search_nodes", query="  ")


def test_search_nodes_with_a_nul_in_entity_type_finds_nothing(graph: ThreadedClient) -> None:
    """A NUL character in a filter or a query word is plain text that no stored type or
    indexed word holds: an empty answer (or the other words' matches), never an error, on
    either store (the full-text interface's PostgreSQL statements bind it natively)."""
    assert names(graph.ok("search_nodes", query="chess", entityType="per\x00son")) == []
    assert names(graph.ok("search_nodes", query="chess\x00 rust")) == ["C"]


def test_open_nodes(graph: ThreadedClient) -> None:
    opened = graph.ok("open_nodes", names=["D", "ghost"])
    assert names(opened) == ["D"] and opened["missing"] == ["ghost"]
    assert opened["relations"] == [rel("A", "funds", "D"), rel("C", "manages", "D")]


def test_batch_get_entities(graph: ThreadedClient) -> None:
    batch = graph.ok("batch_get_entities", names=["B", "E", "ghost", "b"])
    assert names(batch) == ["B", "E"] and batch["missing"] == ["ghost", "b"]
    assert "relations" not in batch
    second = graph.ok("batch_get_entities", names=["B", "E"], offset=1, limit=1, mode="names")
    assert second == {"entities": ["E"], "missing": [], "total": 2, "nextOffset": None}


def test_get_entity(graph: ThreadedClient) -> None:
    assert graph.ok("get_entity", name="E")["observations"] == ["dup", "dup"]
    assert "ghost" in graph.fails("get_entity", name="ghost")


def test_entity_exists(graph: ThreadedClient) -> None:
    exists = graph.ok("entity_exists", names=["A", "ghost"])
    assert exists == {"exists": {"A": True, "ghost": False}, "missing": ["ghost"]}


@both_stores  # the graph tools' smoke path: reads
def test_read_graph_pages_every_entity_and_relation_once(graph: ThreadedClient) -> None:
    seen: list[str] = []
    rels: list[dict] = []
    offset: int | None = 0
    while offset is not None:
        page = graph.ok("read_graph", offset=offset, limit=2)
        seen += names(page)
        rels += page["relations"]
        offset = page["nextOffset"]
    assert seen == ["A", "B", "C", "D", "E"] and len(rels) == 5
    assert graph.ok("read_graph", mode="names") == {
        "entities": ["A", "B", "C", "D", "E"],
        "total": 5,
        "nextOffset": None,
    }
    assert names(graph.ok("read_graph", entityType="project")) == ["D", "E"]


def test_graph_stats(graph: ThreadedClient) -> None:
    stats = graph.ok("graph_stats")
    assert (stats["entities"], stats["relations"], stats["observations"]) == (5, 5, 9)
    assert (stats["entityTypes"], stats["relationTypes"]) == (2, 3)


def test_search_relations(graph: ThreadedClient) -> None:
    assert graph.ok("search_relations", **{"from": "A"})["total"] == 2
    assert graph.ok("search_relations", to="D")["relations"] == [
        rel("A", "funds", "D"),
        rel("C", "manages", "D"),
    ]
    knows = graph.ok("search_relations", relationType="knows", limit=2)
    assert knows["total"] == 3 and knows["nextOffset"] == 2
    assert graph.ok("search_relations", **{"from": "ghost"})["total"] == 0


def test_describe_entity(graph: ThreadedClient) -> None:
    described = graph.ok("describe_entity", name="A")
    assert described["degree"] == {"in": 1, "out": 2, "total": 3}
    assert described["outgoing"] == [
        {"relationType": "knows", "to": "B"},
        {"relationType": "funds", "to": "D"},
    ]
    assert described["incoming"] == [{"from": "C", "relationType": "knows"}]


def test_degree(graph: ThreadedClient) -> None:
    assert graph.ok("degree", name="D") == {"name": "D", "in": 2, "out": 0, "total": 2}


def test_list_entity_types(graph: ThreadedClient) -> None:
    assert graph.ok("list_entity_types")["types"] == [
        {"entityType": "person", "count": 3},
        {"entityType": "project", "count": 2},
    ]


def test_list_relation_types(graph: ThreadedClient) -> None:
    rtypes = graph.ok("list_relation_types", limit=1)
    assert rtypes["types"] == [{"relationType": "knows", "count": 3}]
    assert rtypes["nextOffset"] == 1 and rtypes["total"] == 3


def test_find_path_through_the_cycle(graph: ThreadedClient) -> None:
    path = graph.ok("find_path", **{"from": "B", "to": "D"})
    assert path["found"] and path["length"] == 2 and path["entities"][0] == "B"
    assert path["entities"][-1] == "D"
    assert not graph.ok("find_path", **{"from": "D", "to": "A", "directed": True})["found"]
    assert not graph.ok("find_path", **{"from": "A", "to": "E"})["found"]


def test_find_all_paths_through_the_cycle(graph: ThreadedClient) -> None:
    every = graph.ok("find_all_paths", **{"from": "A", "to": "D"})
    assert [p["entities"] for p in every["paths"]] == [
        ["A", "D"],
        ["A", "C", "D"],
        ["A", "B", "C", "D"],
    ]
    assert not every["truncated"]
    assert every["paths"][1]["relations"] == [rel("C", "knows", "A"), rel("C", "manages", "D")]
    directed = graph.ok("find_all_paths", **{"from": "A", "to": "D", "directed": True})
    assert [p["entities"] for p in directed["paths"]] == [["A", "D"], ["A", "B", "C", "D"]]
    one = graph.ok("find_all_paths", **{"from": "A", "to": "D", "limit": 1})
    assert len(one["paths"]) == 1 and one["truncated"]
    around = graph.ok("find_all_paths", **{"from": "A", "to": "A"})
    assert [p["entities"] for p in around["paths"]] == []  # a simple path never revisits A


def test_extract_subgraph(graph: ThreadedClient) -> None:
    sub = graph.ok("extract_subgraph", names=["A"], depth=1)
    assert names(sub) == ["A", "B", "C", "D"] and len(sub["relations"]) == 5
    assert names(graph.ok("extract_subgraph", names=["A"], depth=0)) == ["A"]


def test_get_neighbors(graph: ThreadedClient) -> None:
    near = graph.ok("get_neighbors", name="A", direction="outgoing")
    assert near["neighbors"] == [
        {"name": "B", "entityType": "person", "distance": 1},
        {"name": "D", "entityType": "project", "distance": 1},
    ]
    incoming = graph.ok("get_neighbors", name="A", direction="incoming", mode="names")
    assert incoming["neighbors"] == ["C"]
    two = graph.ok("get_neighbors", name="B", depth=2, direction="outgoing", mode="names")
    assert two["neighbors"] == ["C", "A", "D"]
    only = graph.ok("get_neighbors", name="A", relationType="funds", mode="names")
    assert only["neighbors"] == ["D"]


def test_limits_are_clear_errors_that_change_nothing(graph: ThreadedClient) -> None:
    before = graph.ok("graph_stats")
    assert "1,024 bytes" in graph.fails(
        "create_entities", entities=[{"name": "é" * 600, "entityType": "x"}]
    )
    assert "65,536 bytes" in graph.fails(
        "add_observations", observations=[{"entityName": "A", "contents": ["ok", "x" * 65537]}]
    )
    many = [{"name": f"n{i}", "entityType": "t"} for i in range(1001)]
    assert "1000" in graph.fails("create_entities", entities=many)
    assert "1000" in graph.fails("search_nodes", query="chess", limit=1001)
    assert "16" in graph.fails("get_neighbors", name="A", depth=17)
    assert "10" in graph.fails("find_all_paths", **{"from": "A", "to": "D", "maxDepth": 11})
    assert "100" in graph.fails("find_all_paths", **{"from": "A", "to": "D", "limit": 101})
    assert "16" in graph.fails("find_path", **{"from": "A", "to": "D", "maxDepth": 17})
    assert "relationType" in graph.fails("create_relations", relations=[rel("A", " ", "B")])
    assert graph.ok("graph_stats") == before


def test_observations_are_memories_that_recall_finds(graph: ThreadedClient) -> None:
    recalled = graph.ok("recall", query="Finnish")
    assert [m["content"] for m in recalled["memories"]] == ["speaks Finnish"]
    assert recalled["memories"][0]["memory_type"] == "observation"


# -- writes that change the graph (recorded in order by the ``edits`` fixture)


def test_upsert_entities_updates_and_creates(edits: dict[str, Any]) -> None:
    assert edits["upsert_entities"]["entities"] == [
        {"name": "D", "entityType": "program", "created": False, "addedObservations": ["phase two"]},
        {"name": "F", "entityType": "entity", "created": True, "addedObservations": ["new"]},
    ]  # fmt: skip


@both_stores  # the graph tools' smoke path: writes
def test_merge_entities_moves_observations_and_relations(edits: dict[str, Any]) -> None:
    seen = edits["merge_entities"]
    assert "target" in seen["into a source"]
    assert "ghost" in seen["unknown source"]
    merged = seen["B into C"]
    assert merged["merged"] == ["B"]
    assert merged["target"]["observations"] == ["plays chess", "writes Rust", "speaks Finnish"]
    assert merged["duplicateObservationsDropped"] == 1 and merged["observationsMoved"] == 1
    assert merged["relationsMoved"] == 1 and merged["relationsDropped"] == 1  # B->C became a loop
    assert not seen["B exists"]
    assert seen["A knows"]["relations"] == [rel("A", "knows", "C")]
    assert seen["C degree"] == 3  # A->C, C->A, C->D
    # merging into a new target creates it, with the source's type
    assert seen["G"] == {"name": "G", "entityType": "entity", "observations": ["new"]}


def test_delete_observations(edits: dict[str, Any]) -> None:
    seen = edits["delete_observations"]
    assert seen["result"]["deleted"] == 1
    assert names(seen["search manager"]) == []


def test_delete_relations(edits: dict[str, Any]) -> None:
    assert edits["delete_relations"] == {
        "success": True,
        "message": "Relations deleted successfully",
        "deleted": 1,
    }


def test_delete_entities_cascades_to_relations_and_observations(edits: dict[str, Any]) -> None:
    seen = edits["delete_entities"]
    assert seen["relations"] == [rel("A", "knows", "C")]
    assert seen["recall migration"] == []
    assert seen["entities"] == 4  # A, C, E, G


def test_compact_removes_repeated_observations(edits: dict[str, Any]) -> None:
    seen = edits["compact"]
    assert seen["result"]["duplicateObservationsRemoved"] == 1
    assert seen["E"] == ["dup"]


def test_export_graph_pages_the_reference_format_by_lines(edits: dict[str, Any]) -> None:
    seen = edits["export_graph"]
    exported = seen["all"]
    lines = exported["jsonl"].split("\n")
    assert exported["total"] == len(lines) == 5 and exported["nextOffset"] is None
    assert json.loads(lines[0]) == {
        "type": "entity",
        "name": "A",
        "entityType": "person",
        "observations": ["likes green tea"],
    }
    assert lines[-1] == '{"type":"relation","from":"A","to":"C","relationType":"knows"}'
    assert seen["first"]["jsonl"] + "\n" + seen["rest"]["jsonl"] == exported["jsonl"]


@stdio_only(
    "--tools is a memtrio mcp option; an attached or served session gets the server's tools"
)
async def test_tool_groups_choose_what_is_advertised(home: Path) -> None:
    async with open_client(home, args=("--tools", "memory")) as client:
        listed = {t.name for t in (await client.list_tools()).tools}
        assert "remember" in listed and not listed & (KG_READ | KG_WRITE)
        with pytest.raises(MCPError, match="Unknown tool"):
            await call(client, "search_nodes", query="x")
    async with open_client(home, args=("--tools", "graph-read")) as client:
        listed = {t.name for t in (await client.list_tools()).tools}
        assert KG_READ <= listed and not listed & KG_WRITE and "remember" not in listed
