"""Two servers on one home writing the graph at once lose nothing (the reference server does)."""

from __future__ import annotations

from pathlib import Path

import trio
from mcp_client import ok, open_client


async def test_two_servers_creating_entities_and_observations_at_once(
    home: Path, tmp_path: Path
) -> None:
    tasks, rounds = 3, 8
    outside = tmp_path / "outside"
    outside.mkdir()
    shared = "Shared"
    async with open_client(home, cwd=outside) as first:
        await ok(first, "create_entities", entities=[{"name": shared, "entityType": "hub"}])

    async def server(name: str) -> None:
        async with open_client(home, cwd=outside) as client:

            async def writer(task: int) -> None:
                for i in range(rounds):
                    entity = f"{name}-{task}-{i}"
                    await ok(
                        client,
                        "create_entities",
                        entities=[
                            {
                                "name": entity,
                                "entityType": "item",
                                "observations": [f"{entity} born"],
                            }
                        ],
                    )
                    await ok(
                        client,
                        "add_observations",
                        observations=[
                            {"entityName": entity, "contents": [f"{entity} grew"]},
                            {"entityName": shared, "contents": [f"{entity} was here"]},
                        ],
                    )
                    await ok(
                        client,
                        "create_relations",
                        relations=[{"from": entity, "to": shared, "relationType": "joins"}],
                    )

            async with trio.open_nursery() as nursery:
                for task in range(tasks):
                    nursery.start_soon(writer, task)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(server, "alpha")
        nursery.start_soon(server, "beta")

    names = [f"{n}-{t}-{i}" for n in ("alpha", "beta") for t in range(tasks) for i in range(rounds)]
    async with open_client(home, cwd=outside) as client:
        stats = await ok(client, "graph_stats")
        assert stats["entities"] == len(names) + 1
        assert stats["relations"] == len(names)
        assert stats["observations"] == 3 * len(names)
        hub = await ok(client, "get_entity", name=shared)
        assert sorted(hub["observations"]) == sorted(f"{n} was here" for n in names)
        got = await ok(client, "batch_get_entities", names=names)
        assert got["missing"] == []
        assert all(
            e["observations"] == [f"{e['name']} born", f"{e['name']} grew"] for e in got["entities"]
        )
        assert (await ok(client, "degree", name=shared))["in"] == len(names)
