"""The knowledge-graph tools end to end through the official MCP client (one server session).

The graph used throughout (a cycle A -> B -> C -> A plus D hanging off it, E alone)::

    A -knows-> B -knows-> C -knows-> A
    A -funds-> D     C -manages-> D     E
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError
from mcp_client import call, fails, ok, open_client

KG_READ = {
    "read_graph", "search_nodes", "open_nodes", "batch_get_entities", "get_entity", "entity_exists",
    "graph_stats", "search_relations", "describe_entity", "degree", "find_path", "find_all_paths",
    "extract_subgraph", "get_neighbors", "list_entity_types", "list_relation_types", "export_graph",
}  # fmt: skip
KG_WRITE = {
    "create_entities", "create_relations", "add_observations", "delete_entities", "delete_observations",
    "delete_relations", "upsert_entities", "merge_entities", "compact",
}  # fmt: skip


def rel(src: str, rtype: str, tgt: str) -> dict[str, str]:
    return {"from": src, "to": tgt, "relationType": rtype}


def names(result: dict) -> list[str]:
    return [e if isinstance(e, str) else e["name"] for e in result["entities"]]


async def test_every_graph_tool_end_to_end(home: Path) -> None:
    async with open_client(home) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert KG_READ | KG_WRITE <= set(listed)
        assert all(listed[n].annotations.read_only_hint for n in KG_READ)
        assert not any(listed[n].annotations.read_only_hint for n in KG_WRITE)
        assert listed["delete_entities"].annotations.destructive_hint

        # -- create_entities: created ones come back, existing ones are skipped
        created = await ok(
            client,
            "create_entities",
            entities=[
                {"name": "A", "entityType": "person", "observations": ["likes green tea", "a manager"]},
                {"name": "B", "entityType": "person", "observations": ["plays chess"]},
                {"name": "C", "entityType": "person", "observations": ["plays chess", "writes Rust"]},
                {"name": "D", "entityType": "project", "observations": ["database migration"]},
                {"name": "E", "entityType": "project", "observations": ["dup", "dup"]},
            ],
        )  # fmt: skip
        assert names(created) == ["A", "B", "C", "D", "E"]
        assert created["entities"][0] == {
            "name": "A",
            "entityType": "person",
            "observations": ["likes green tea", "a manager"],
        }
        again = await ok(
            client,
            "create_entities",
            entities=[{"name": "a", "entityType": "x", "observations": ["ignored"]}],
        )
        assert again == {"entities": []}

        # -- create_relations: missing endpoints refuse the whole batch
        message = await fails(
            client,
            "create_relations",
            relations=[rel("A", "knows", "B"), rel("A", "knows", "Nobody")],
        )
        assert "Nobody" in message and "create_entities" in message
        assert (await ok(client, "search_relations"))["total"] == 0
        made = await ok(
            client,
            "create_relations",
            relations=[
                rel("A", "knows", "B"), rel("B", "knows", "C"), rel("C", "knows", "A"),
                rel("A", "funds", "D"), rel("C", "manages", "D"), rel("A", "knows", "B"),
            ],
        )  # fmt: skip
        assert len(made["relations"]) == 5
        assert made["relations"][0] == rel("A", "knows", "B")
        assert (await ok(client, "create_relations", relations=[rel("A", "knows", "B")])) == {
            "relations": []
        }

        # -- add_observations: duplicates skipped, unknown entity refused
        added = await ok(
            client,
            "add_observations",
            observations=[{"entityName": "B", "contents": ["plays chess", "speaks Finnish"]}],
        )
        assert added == {"results": [{"entityName": "B", "addedObservations": ["speaks Finnish"]}]}
        message = await fails(
            client, "add_observations", observations=[{"entityName": "Zed", "contents": ["x"]}]
        )
        assert "Zed" in message

        # -- search_nodes: FTS words and prefixes over names, types, observations
        found = await ok(client, "search_nodes", query="chess")
        assert names(found) == ["B", "C"]
        assert rel("A", "knows", "B") in found["relations"]  # relations touching a result
        assert names(await ok(client, "search_nodes", query="manag")) == ["A"]  # prefix
        assert names(await ok(client, "search_nodes", query="project")) == ["D", "E"]  # type
        assert names(await ok(client, "search_nodes", query="chess Rust")) == ["C"]  # every word
        assert names(await ok(client, "search_nodes", query="ess")) == []  # not a substring scan
        paged = await ok(client, "search_nodes", query="chess", limit=1, mode="names")
        assert paged == {"entities": ["B"], "total": 2, "nextOffset": 1}
        paged = await ok(client, "search_nodes", query="chess", limit=1, offset=1, mode="summary")
        assert paged["entities"] == [{"name": "C", "entityType": "person", "observationCount": 2}]
        assert paged["nextOffset"] is None
        assert names(await ok(client, "search_nodes", query="chess", entityType="nope")) == []
        assert "no words" in await fails(client, "search_nodes", query="  ")

        # -- open_nodes / batch_get_entities / get_entity / entity_exists
        opened = await ok(client, "open_nodes", names=["D", "ghost"])
        assert names(opened) == ["D"] and opened["missing"] == ["ghost"]
        assert opened["relations"] == [rel("A", "funds", "D"), rel("C", "manages", "D")]
        batch = await ok(client, "batch_get_entities", names=["b", "E", "ghost"])
        assert (
            names(batch) == ["B", "E"]
            and batch["missing"] == ["ghost"]
            and "relations" not in batch
        )
        second = await ok(
            client, "batch_get_entities", names=["b", "E"], offset=1, limit=1, mode="names"
        )
        assert second == {"entities": ["E"], "missing": [], "total": 2, "nextOffset": None}
        assert (await ok(client, "get_entity", name="e"))["observations"] == ["dup", "dup"]
        assert "ghost" in await fails(client, "get_entity", name="ghost")
        exists = await ok(client, "entity_exists", names=["A", "ghost"])
        assert exists == {"exists": {"A": True, "ghost": False}, "missing": ["ghost"]}

        # -- read_graph pages: every entity once, every relation once (with its source)
        seen: list[str] = []
        rels: list[dict] = []
        offset: int | None = 0
        while offset is not None:
            page = await ok(client, "read_graph", offset=offset, limit=2)
            seen += names(page)
            rels += page["relations"]
            offset = page["nextOffset"]
        assert seen == ["A", "B", "C", "D", "E"] and len(rels) == 5
        assert (await ok(client, "read_graph", mode="names")) == {
            "entities": ["A", "B", "C", "D", "E"],
            "total": 5,
            "nextOffset": None,
        }
        assert names(await ok(client, "read_graph", entityType="project")) == ["D", "E"]

        # -- stats, relation search, describe, degree, types
        stats = await ok(client, "graph_stats")
        assert (stats["entities"], stats["relations"], stats["observations"]) == (5, 5, 9)
        assert (stats["entityTypes"], stats["relationTypes"]) == (2, 3)
        assert (await ok(client, "search_relations", **{"from": "A"}))["total"] == 2
        assert (await ok(client, "search_relations", to="D"))["relations"] == [
            rel("A", "funds", "D"),
            rel("C", "manages", "D"),
        ]
        knows = await ok(client, "search_relations", relationType="knows", limit=2)
        assert knows["total"] == 3 and knows["nextOffset"] == 2
        assert (await ok(client, "search_relations", **{"from": "ghost"}))["total"] == 0
        described = await ok(client, "describe_entity", name="A")
        assert described["degree"] == {"in": 1, "out": 2, "total": 3}
        assert described["outgoing"] == [
            {"relationType": "knows", "to": "B"},
            {"relationType": "funds", "to": "D"},
        ]
        assert described["incoming"] == [{"from": "C", "relationType": "knows"}]
        assert (await ok(client, "degree", name="D")) == {
            "name": "D",
            "in": 2,
            "out": 0,
            "total": 2,
        }
        types = await ok(client, "list_entity_types")
        assert types["types"] == [
            {"entityType": "person", "count": 3},
            {"entityType": "project", "count": 2},
        ]
        rtypes = await ok(client, "list_relation_types", limit=1)
        assert rtypes["types"] == [{"relationType": "knows", "count": 3}]
        assert rtypes["nextOffset"] == 1 and rtypes["total"] == 3

        # -- paths through the cycle
        path = await ok(client, "find_path", **{"from": "B", "to": "D"})
        assert path["found"] and path["length"] == 2 and path["entities"][0] == "B"
        assert path["entities"][-1] == "D"
        assert not (await ok(client, "find_path", **{"from": "D", "to": "A", "directed": True}))[
            "found"
        ]
        assert not (await ok(client, "find_path", **{"from": "A", "to": "E"}))["found"]
        every = await ok(client, "find_all_paths", **{"from": "A", "to": "D"})
        assert [p["entities"] for p in every["paths"]] == [
            ["A", "D"],
            ["A", "C", "D"],
            ["A", "B", "C", "D"],
        ]
        assert not every["truncated"]
        assert every["paths"][1]["relations"] == [rel("C", "knows", "A"), rel("C", "manages", "D")]
        directed = await ok(client, "find_all_paths", **{"from": "A", "to": "D", "directed": True})
        assert [p["entities"] for p in directed["paths"]] == [["A", "D"], ["A", "B", "C", "D"]]
        one = await ok(client, "find_all_paths", **{"from": "A", "to": "D", "limit": 1})
        assert len(one["paths"]) == 1 and one["truncated"]
        around = await ok(client, "find_all_paths", **{"from": "A", "to": "A"})
        assert [p["entities"] for p in around["paths"]] == []  # a simple path never revisits A

        # -- neighbourhoods
        sub = await ok(client, "extract_subgraph", names=["A"], depth=1)
        assert names(sub) == ["A", "B", "C", "D"] and len(sub["relations"]) == 5
        assert names(await ok(client, "extract_subgraph", names=["A"], depth=0)) == ["A"]
        near = await ok(client, "get_neighbors", name="A", direction="outgoing")
        assert near["neighbors"] == [
            {"name": "B", "entityType": "person", "distance": 1},
            {"name": "D", "entityType": "project", "distance": 1},
        ]
        assert (await ok(client, "get_neighbors", name="A", direction="incoming", mode="names"))[
            "neighbors"
        ] == ["C"]
        two = await ok(
            client, "get_neighbors", name="B", depth=2, direction="outgoing", mode="names"
        )
        assert two["neighbors"] == ["C", "A", "D"]
        only = await ok(client, "get_neighbors", name="A", relationType="funds", mode="names")
        assert only["neighbors"] == ["D"]

        # -- limits: clear errors, nothing changed
        before = await ok(client, "graph_stats")
        assert "1,024 bytes" in await fails(
            client, "create_entities", entities=[{"name": "é" * 600, "entityType": "x"}]
        )
        assert "65,536 bytes" in await fails(
            client,
            "add_observations",
            observations=[{"entityName": "A", "contents": ["ok", "x" * 65537]}],
        )
        many = [{"name": f"n{i}", "entityType": "t"} for i in range(1001)]
        assert "1000" in await fails(client, "create_entities", entities=many)
        assert "1000" in await fails(client, "search_nodes", query="chess", limit=1001)
        assert "16" in await fails(client, "get_neighbors", name="A", depth=17)
        assert "10" in await fails(
            client, "find_all_paths", **{"from": "A", "to": "D", "maxDepth": 11}
        )
        assert "100" in await fails(
            client, "find_all_paths", **{"from": "A", "to": "D", "limit": 101}
        )
        assert "16" in await fails(client, "find_path", **{"from": "A", "to": "D", "maxDepth": 17})
        assert "relationType" in await fails(
            client, "create_relations", relations=[rel("A", " ", "B")]
        )
        assert await ok(client, "graph_stats") == before

        # -- observations are memories that recall finds
        recalled = await ok(client, "recall", query="Finnish")
        assert [m["content"] for m in recalled["memories"]] == ["speaks Finnish"]
        assert recalled["memories"][0]["memory_type"] == "observation"

        # -- upsert_entities
        upserted = await ok(
            client,
            "upsert_entities",
            entities=[
                {"name": "D", "entityType": "program", "observations": ["database migration", "phase two"]},
                {"name": "F", "observations": ["new"]},
            ],
        )  # fmt: skip
        assert upserted["entities"] == [
            {"name": "D", "entityType": "program", "created": False, "addedObservations": ["phase two"]},
            {"name": "F", "entityType": "entity", "created": True, "addedObservations": ["new"]},
        ]  # fmt: skip

        # -- merge_entities: B folds into C
        assert "target" in await fails(client, "merge_entities", sources=["B", "C"], target="C")
        assert "ghost" in await fails(client, "merge_entities", sources=["ghost"], target="C")
        merged = await ok(client, "merge_entities", sources=["B"], target="C")
        assert merged["merged"] == ["B"]
        assert merged["target"]["observations"] == ["plays chess", "writes Rust", "speaks Finnish"]
        assert merged["duplicateObservationsDropped"] == 1 and merged["observationsMoved"] == 1
        assert (
            merged["relationsMoved"] == 1 and merged["relationsDropped"] == 1
        )  # B->C became a loop
        assert not (await ok(client, "entity_exists", names=["B"]))["exists"]["B"]
        assert (await ok(client, "search_relations", **{"from": "A", "relationType": "knows"}))[
            "relations"
        ] == [rel("A", "knows", "C")]
        assert (await ok(client, "degree", name="C"))["total"] == 3  # A->C, C->A, C->D
        # merging into a new target creates it, with the source's type
        await ok(client, "merge_entities", sources=["F"], target="G")
        assert (await ok(client, "get_entity", name="G")) == {
            "name": "G",
            "entityType": "entity",
            "observations": ["new"],
        }

        # -- deletes: observations, relations, entities (cascading)
        assert (
            await ok(
                client,
                "delete_observations",
                deletions=[{"entityName": "A", "observations": ["a manager", "not there"]}],
            )
        )["deleted"] == 1
        assert names(await ok(client, "search_nodes", query="manager")) == []
        gone = await ok(client, "delete_relations", relations=[rel("C", "knows", "A")])
        assert gone == {"success": True, "message": "Relations deleted successfully", "deleted": 1}
        await ok(client, "delete_entities", entityNames=["D", "ghost"])
        assert (await ok(client, "search_relations"))["relations"] == [rel("A", "knows", "C")]
        assert (await ok(client, "recall", query="migration"))["memories"] == []
        assert (await ok(client, "graph_stats"))["entities"] == 4  # A, C, E, G

        # -- compact removes repeated observations
        compacted = await ok(client, "compact")
        assert compacted["duplicateObservationsRemoved"] == 1
        assert (await ok(client, "get_entity", name="E"))["observations"] == ["dup"]

        # -- export_graph: the reference format, paged by lines
        exported = await ok(client, "export_graph")
        lines = exported["jsonl"].split("\n")
        assert exported["total"] == len(lines) == 5 and exported["nextOffset"] is None
        assert json.loads(lines[0]) == {
            "type": "entity",
            "name": "A",
            "entityType": "person",
            "observations": ["likes green tea"],
        }
        assert lines[-1] == '{"type":"relation","from":"A","to":"C","relationType":"knows"}'
        first = await ok(client, "export_graph", limit=3)
        rest = await ok(client, "export_graph", offset=first["nextOffset"])
        assert first["jsonl"] + "\n" + rest["jsonl"] == exported["jsonl"]


async def test_tool_groups_choose_what_is_advertised(home: Path) -> None:
    async with open_client(home, args=("--tools", "memory")) as client:
        listed = {t.name for t in (await client.list_tools()).tools}
        assert "remember" in listed and not listed & (KG_READ | KG_WRITE)
        with pytest.raises(MCPError, match="Unknown tool"):
            await call(client, "search_nodes", query="x")
    async with open_client(home, args=("--tools", "graph-read")) as client:
        listed = {t.name for t in (await client.list_tools()).tools}
        assert KG_READ <= listed and not listed & KG_WRITE and "remember" not in listed
