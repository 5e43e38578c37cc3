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
import math
import struct
from pathlib import Path

import pytest
import stores
import trio
from mcp_client import call, fails, ok, open_client, run_cli

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
        text = await fails(
            client, "vector_upsert_embedding", entityName="bad", embedding=[1e39, 0, 0]
        )
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


def pack(*values: float) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def poison(home: Path, rows: dict[int, object]) -> None:
    """Write ``entity_embeddings`` rows straight into the store, as an older memtrio or a
    hand might have: entity id -> the stored ``vec`` (of dimension `DIMS`)."""
    with stores.connect(home) as conn:
        for entity_id, vec in rows.items():
            conn.execute("DELETE FROM entity_embeddings WHERE entity_id = ?", (entity_id,))
            conn.execute(
                "INSERT INTO entity_embeddings (entity_id, model, dim, vec, updated_at) "
                "VALUES (?, 'old', ?, ?, 0)",
                (entity_id, DIMS, vec),
            )
        (conn.commit if hasattr(conn, "commit") else conn.raw.commit)()


def entity_ids(home: Path) -> dict[str, int]:
    return {name: int(i) for name, i in stores.rows(home, "SELECT name, id FROM entities")}


async def test_stored_rows_that_cannot_be_loaded_are_skipped_reported_and_the_server_serves(
    home: Path, store: str
) -> None:
    bad: dict[str, object] = {
        "nan": pack(math.nan, 0, 0),
        "inf": pack(0, math.inf, 0),
        "short": pack(1, 0),
        "huge": pack(1e30, 1e30, 0),  # finite, but its scores overflow float32
    }
    if store == "sqlite":
        bad["text"] = "not a vector"  # SQLite keeps whatever type it is given
    async with open_client(home, args=FLAGS) as client:
        await _entities(client, "good", *bad)
        await ok(client, "vector_upsert_embedding", entityName="good", embedding=[1, 0, 0])
    ids = entity_ids(home)
    poison(home, {ids[name]: vec for name, vec in bad.items()})
    async with open_client(home, args=FLAGS) as client:  # before: "child 'vectors' could not start"
        stats = await ok(client, "vector_store_stats")
        assert (stats["skipped"], stats["indexSize"]) == (len(bad), 1), stats
        assert {r["entityName"] for r in stats["skippedRows"]} == set(bad)
        assert all(r["reason"] for r in stats["skippedRows"])
        found = await ok(client, "vector_search_entities", embedding=[1, 0.2, 0], topK=5)
        assert names(found) == ["good"]
        text = await fails(client, "vector_get_embedding", entityName="nan")
        assert "'nan' cannot be used" in text and "vector_upsert_embedding" in text
        assert "cannot be used" in await fails(
            client, "vector_search_by_entity", entityName="short"
        )
        assert "cannot be used" in await fails(
            client, "vector_recommend", positive=["good", "huge"]
        )
        # A good vector written over a bad row takes it out of the report.
        await ok(client, "vector_upsert_embedding", entityName="nan", embedding=[0, 1, 0])
        stats = await ok(client, "vector_store_stats")
        assert (stats["skipped"], stats["indexSize"]) == (len(bad) - 1, 2), stats
        assert names(await ok(client, "vector_search_entities", embedding=[0, 1, 0], topK=1)) == [
            "nan"
        ]
    done = await trio.to_thread.run_sync(lambda: run_cli("doctor", "--json", home=home))
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)["vectors"]
    assert report["unusable"] == len(bad) - 1, report
    assert {r["entity_id"] for r in report["rows"]} == {ids[n] for n in bad if n != "nan"}
    assert "vector_upsert_embedding" in report["remedy"]


async def test_poisoned_memory_vector_is_skipped_by_recall_and_embedded_again(
    home: Path, store: str
) -> None:
    on = {"MEMTRIO_EMBEDDINGS": "on"}
    async with open_client(home, env=on) as client:
        kept = await ok(
            client, "remember", content="Release builds are signed with the hardware key."
        )
        hit = await ok(client, "remember", content="Auth tokens are refreshed every 15 minutes.")
    dim = stores.rows(home, "SELECT dim FROM vectors WHERE item_id = ?", (hit["id"],))[0][0]
    with stores.connect(home) as conn:
        conn.execute(
            "UPDATE vectors SET vec = ? WHERE kind = 'memory' AND item_id = ?",
            (pack(math.nan, *[0.0] * (dim - 1)), hit["id"]),
        )
        (conn.commit if hasattr(conn, "commit") else conn.raw.commit)()
    async with open_client(home, env=on) as client:  # before: the ranker failed on the NaN row
        found = await ok(client, "recall", query="how often do auth tokens refresh", limit=2)
        assert hit["id"] in [m["id"] for m in found["memories"]]
        assert kept["id"] in [m["id"] for m in found["memories"]]
    # Recall embedded the memory again: its stored vector is a real one now.
    (blob,) = stores.rows(home, "SELECT vec FROM vectors WHERE item_id = ?", (hit["id"],))[0]
    assert all(math.isfinite(v) for v in struct.unpack(f"<{dim}f", bytes(blob)))


async def test_memory_row_of_the_wrong_types_does_not_crash_the_ranker_until_the_server_exits(
    home: Path, store: str
) -> None:
    if store != "sqlite":
        pytest.skip("PostgreSQL's columns are typed: no BLOB can be stored as a memory_type")
    on = {"MEMTRIO_EMBEDDINGS": "on"}
    async with open_client(home, env=on) as client:
        await ok(client, "remember", content="Auth tokens are refreshed every 15 minutes.")
        other = await ok(
            client, "remember", content="Release builds are signed with the hardware key."
        )
    with stores.connect(home) as conn:  # as an older memtrio or a hand might have left them
        conn.execute(
            "UPDATE memories SET memory_type = x'ff', created_at = 'yesterday' WHERE id != ?",
            (other["id"],),
        )
        conn.commit()
    async with open_client(home, env=on) as client:
        # Before: each recall's cache load crashed the ranker (bytes.casefold, float('yesterday'))
        # until the root supervisor gave up and the server exited 1.
        for _ in range(12):
            found = await call(client, "recall", query="release builds signed", limit=1)
            assert found is not None
        status = await ok(client, "server_status")
        assert status
