"""A stored vector, or a value that converts badly, never stops the server (issue 29, item 1).

The review's case: ``vector_upsert_embedding`` with a component such as
``1e39`` (finite as a float64, infinite as the float32 the table stores) was
refused only after the row was committed; from then on every ``memtrio mcp
--vectors`` on that home exited at start. Now every vector is checked after
conversion to the stored type (and to the index's quantised type) before the
transaction, and every load (the tools' index, the ranker's) skips a row it
cannot use, logs it once, and reports it (``vector_store_stats``, ``memtrio
doctor``).

Each server here is a real ``memtrio mcp --vectors`` process (the official
client over stdio), on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import stores
from mcp_client import call, fails, ok, open_client

DIMS = 3
FLAGS = ["--vectors", "--embedding-dims", str(DIMS), "--vec-backend", "exact"]

pytestmark = stores.both_stores


def names(result: dict) -> list[str]:
    return [r["entityName"] for r in result["results"]]


async def _entities(client: object, *names_: str) -> None:
    await ok(
        client,  # type: ignore[arg-type]
        "create_entities",
        entities=[{"name": n, "entityType": "t", "observations": []} for n in names_],
    )


async def test_vector_beyond_float32_is_refused_before_commit_and_the_server_restarts(
    home: Path, store: str
) -> None:
    async with open_client(home, args=FLAGS) as client:
        await _entities(client, "good", "bad", "other")
        text = await fails(client, "vector_upsert_embedding", entityName="bad", embedding=[1e39, 0, 0])
        assert "`embedding`[0]" in text and "float32" in text
        assert "has no embedding" in await fails(client, "vector_get_embedding", entityName="bad")
        batch = await ok(
            client,
            "vector_batch_upsert",
            items=[
                {"entityName": "good", "embedding": [1, 0, 0]},
                {"entityName": "bad", "embedding": [0, -3.5e38, 3.5e38]},
                {"entityName": "other", "embedding": [0, 1, 0]},
            ],
        )
        assert (batch["upserted"], batch["failed"]) == (2, 1), batch
        assert [e["index"] for e in batch["errors"]] == [1]
        assert "`items[1].embedding`[1]" in batch["errors"][0]["error"]
    assert stores.rows(home, "SELECT count(*) FROM entity_embeddings") == [(2,)]
    # A restart on the same home serves, and the vectors that were stored answer.
    async with open_client(home, args=FLAGS) as client:
        found = await ok(client, "vector_search_entities", embedding=[1, 0.1, 0], topK=2)
        assert names(found) == ["good", "other"]
