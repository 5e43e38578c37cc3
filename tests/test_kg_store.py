"""The graph over the memory store: embeddings in the same write, scope rules, one commit per call."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import msgspec
import pytest
from mcp_client import fails, ok, open_client
from memtrio.actors.kg import args as A
from memtrio.actors.kg import merge, read_tools, reads, write_tools, writes
from memtrio.actors.kg.search import search_nodes
from memtrio.actors.kg.view import Scoped, View
from memtrio.actors.kg.writer import Writer
from memtrio.actors.store.sqlite import schema
from memtrio.actors.store.sqlite.tx import tx as sqlite_tx
from memtrio.actors.store.writer import STORE, Change
from memtrio.protocol.errors import DomainError
from test_memory_embeddings import FakeEmbedder, app_with, chunks, vectors
from test_store_writer import Ctx


async def test_observations_and_new_entities_are_embedded_in_the_same_write(
    home: Path,
) -> None:
    embedder = FakeEmbedder()
    async with app_with(home, embedder=embedder) as app:
        ctx = Ctx(app)
        seen: list[Change] = []
        app.service(STORE).add_listener(seen.extend)
        args = msgspec.convert(
            {
                "entities": [
                    {"name": "Tea", "entityType": "drink", "observations": ["green", "hot"]}
                ]
            },
            A.CreateEntitiesArgs,
        )
        await write_tools.create_entities(ctx, args)
        assert embedder.calls == [["green", "hot", "Tea (drink)"]]
        stored = vectors(home)
        assert {k[0] for k in stored} == {"memory", "entity"} and len(stored) == 3
        memory_changes = [c for c in seen if c.kind == "memory"]
        assert len(memory_changes) == 2 and all(c.vector is not None for c in memory_changes)

        # A long observation is stored as all its windows (the fake's are 40 characters).
        long_obs = msgspec.convert(
            {"observations": [{"entityName": "Tea", "contents": ["steeped " * 8]}]},
            A.AddObservationsArgs,
        )
        await write_tools.add_observations(ctx, long_obs)
        assert list(chunks(home).values()) == [1]  # chunk 0 in vectors, chunk 1 here

        # An observation is embedded as `remember` embeds a memory: without a role label.
        said = msgspec.convert(
            {"observations": [{"entityName": "Tea", "contents": ["user: I like it cold"]}]},
            A.AddObservationsArgs,
        )
        await write_tools.add_observations(ctx, said)
        assert embedder.calls[-1] == ["I like it cold"]

        embedder.fail = True
        more = msgspec.convert(
            {"observations": [{"entityName": "Tea", "contents": ["iced"]}]}, A.AddObservationsArgs
        )
        with pytest.raises(DomainError, match="nothing was stored"):
            await write_tools.add_observations(ctx, more)
        got = await read_tools.get_entity(ctx, A.NameArgs(name="Tea"))
        assert got.observations == ["green", "hot", "steeped " * 8, "user: I like it cold"]


def _conn(tmp_path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(tmp_path / "kg.sqlite", isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    schema.migrate(conn)
    return conn


def _write(conn: sqlite3.Connection, view: View, fn: object) -> object:
    conn.execute("BEGIN IMMEDIATE")
    w = Writer(sqlite_tx(conn), view, None)
    result = fn(w)  # type: ignore[operator]
    conn.execute("COMMIT")
    return result


def _read(conn: sqlite3.Connection, view: View, fn: object) -> object:
    tx = sqlite_tx(conn)
    return fn(tx, Scoped(tx, view))  # type: ignore[operator]


def test_each_repository_sees_and_changes_only_its_part_of_a_shared_entity(
    tmp_path: Path,
) -> None:
    conn = _conn(tmp_path)
    a = View(["repo:/a", "global"], ["repo:/a", "global"], "repo:/a")
    b = View(["repo:/b", "global"], ["repo:/b", "global"], "repo:/b")
    ent = writes.EntityIn
    _write(
        conn,
        a,
        lambda w: writes.create_entities(w, [ent("X", "lib", ["from a"]), ent("Y", "lib", [])]),
    )
    _write(conn, a, lambda w: writes.create_relations(w, [("X", "uses", "Y")]))
    # Repository b does not see a's graph ...
    assert _read(conn, b, lambda c, s: reads.read_graph(c, s, 0, 10, "names", None))["total"] == 0
    with pytest.raises(DomainError, match="create_entities first"):
        _write(conn, b, lambda w: writes.add_observations(w, [("X", ["from b"])]))
    conn.execute("ROLLBACK")
    # ... creating X there links the same entity, with b's own observations.
    made = _write(conn, b, lambda w: writes.create_entities(w, [ent("X", "lib", ["from b"])]))
    assert made == [{"name": "X", "entityType": "lib", "observations": ["from b"]}]
    seen_b = _read(conn, b, lambda c, s: reads.batch_get(c, s, ["X"], 0, 10, "full"))
    assert seen_b["entities"][0]["observations"] == ["from b"]
    with pytest.raises(DomainError, match="may not modify"):
        _write(conn, b, lambda w: merge.merge_entities(w, ["X"], "Z", None))
    conn.execute("ROLLBACK")
    # Deleting X in b removes b's part only.
    _write(conn, b, lambda w: writes.delete_entities(w, ["X"]))
    assert _read(conn, b, lambda c, s: reads.read_graph(c, s, 0, 10, "names", None))["total"] == 0
    seen_a = _read(conn, a, lambda c, s: reads.open_nodes(c, s, ["X"], 0, 10, "full"))
    assert seen_a["entities"][0]["observations"] == ["from a"]
    assert seen_a["relations"] == [{"from": "X", "to": "Y", "relationType": "uses"}]
    # Merging into an entity known only to a links it to b, with b's observations.
    _write(conn, b, lambda w: writes.create_entities(w, [ent("Q", "lib", ["q from b"])]))
    merged = _write(conn, b, lambda w: merge.merge_entities(w, ["Q"], "X", None))
    assert merged["target"] == {"name": "X", "entityType": "lib", "observations": ["q from b"]}
    seen_a = _read(conn, a, lambda c, s: reads.open_nodes(c, s, ["X"], 0, 10, "full"))
    assert seen_a["entities"][0]["observations"] == ["from a"]
    _write(conn, b, lambda w: writes.delete_entities(w, ["X"]))
    # Deleting it in a, where it is wholly writable, deletes the row and its relation.
    _write(conn, a, lambda w: writes.delete_entities(w, ["X"]))
    assert conn.execute("SELECT count(*) FROM entities").fetchone()[0] == 1
    assert conn.execute("SELECT count(*) FROM relations").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 0


async def test_a_call_of_a_thousand_entities_is_one_commit(home: Path, tmp_path: Path) -> None:
    batch = lambda start: [  # noqa: E731
        {"name": f"e{i}", "entityType": "t", "observations": [f"o{i}-{j}" for j in range(5)]}
        for i in range(start, start + 1000)
    ]
    async with open_client(
        home, cwd=tmp_path, env={"MEMTRIO_FAULTS": "store.commit=raise@2"}
    ) as client:
        created = await ok(client, "create_entities", entities=batch(0))
        assert len(created["entities"]) == 1000
        assert "injected fault" in await fails(client, "create_entities", entities=batch(1000))
        stats = await ok(client, "graph_stats")
        assert (stats["entities"], stats["observations"]) == (1000, 5000)


def test_a_version_1_store_gets_its_entities_indexed_for_search_nodes(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "old.sqlite", isolation_level=None)
    for statement in schema._statements(schema.MIGRATIONS[0]):
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 1")
    conn.execute(
        "INSERT INTO entities (name, canonical_name, kind, created_at, updated_at) "
        "VALUES ('Old Service', 'old service', 'service', 0, 0)"
    )
    assert schema.migrate(conn) == schema.LATEST
    view = View(["global"], ["global"], "global")
    found = _read(conn, view, lambda t, s: search_nodes(t, s, "serv", 0, 10, "names", None))
    assert found["entities"] == ["Old Service"]
    conn.execute("UPDATE entities SET name = 'Renamed Thing' WHERE id = 1")
    found = _read(conn, view, lambda t, s: search_nodes(t, s, "renamed", 0, 10, "names", None))
    assert found["entities"] == ["Renamed Thing"]


def test_search_words_match_inside_names_and_types(tmp_path: Path) -> None:
    conn = _conn(tmp_path)
    view = View(["global"], ["global"], "global")
    ent = writes.EntityIn
    _write(
        conn,
        view,
        lambda w: writes.create_entities(
            w,
            [
                ent("DatabaseService", "microservice", ["owns the schema"]),
                ent("parseConfig", "function", []),
            ],
        ),
    )

    def search(query: str) -> list[str]:
        return _read(conn, view, lambda t, s: search_nodes(t, s, query, 0, 10, "names", None))[
            "entities"
        ]

    assert search("Service") == ["DatabaseService"]
    assert search("config") == ["parseConfig"]
    assert search("base serv schema") == ["DatabaseService"]
    assert search("se") == []  # two letters: word prefixes only
    assert search("chema") == []  # inside observations: word prefixes only
    conn.execute("UPDATE entities SET name = 'LoadConfig' WHERE name = 'parseConfig'")
    assert search("parse") == [] and search("adconf") == ["LoadConfig"]


@pytest.mark.parametrize("nul", [False, True], ids=["one-statement", "nul-text-row-by-row"])
def test_create_entities_writes_its_rows_in_one_batch_as_row_by_row_would(
    tmp_path: Path, nul: bool
) -> None:
    """The batch gives the ids AUTOINCREMENT would (after a deleted row too), links each
    observation to its entity and scope, and indexes it for search; text holding a NUL
    (which SQLite's JSON would cut) is written row by row, whole."""
    conn = _conn(tmp_path)
    view = View(["global"], ["global"], "global")
    ent = writes.EntityIn
    _write(conn, view, lambda w: writes.create_entities(w, [ent("Gone", "t", ["old words"])]))
    _write(conn, view, lambda w: writes.delete_entities(w, ["Gone"]))
    odd = "nul\x00inside" if nul else "plain text"
    _write(
        conn,
        view,
        lambda w: writes.create_entities(
            w,
            [
                ent("Alpha", "service", ["teapot brewing", odd]),
                ent("Beta", None, ["teapot cooling", "teapot cooling"]),
                ent("Alpha", "other", ["ignored: named twice"]),
            ],
        ),
    )
    rows = conn.execute(
        "SELECT m.id, m.content, e.id, e.name, e.kind FROM memories m "
        "JOIN memory_entities me ON me.memory_id = m.id JOIN entities e ON e.id = me.entity_id "
        "JOIN memory_scopes ms ON ms.memory_id = m.id JOIN entity_scopes es ON es.entity_id = e.id "
        "ORDER BY m.id"
    ).fetchall()
    assert rows == [
        (2, "teapot brewing", 2, "Alpha", "service"),
        (3, odd, 2, "Alpha", "service"),
        (4, "teapot cooling", 3, "Beta", "entity"),
        (5, "teapot cooling", 3, "Beta", "entity"),
    ]
    found = _read(conn, view, lambda t, s: search_nodes(t, s, "teapot", 0, 10, "names", None))
    assert found["entities"] == ["Beta", "Alpha"]  # type: ignore[index]
    assert _read(conn, view, lambda t, s: search_nodes(t, s, "inside", 0, 10, "names", None))[  # type: ignore[index]
        "entities"
    ] == (["Alpha"] if nul else [])
    created = _write(conn, view, lambda w: writes.create_entities(w, [ent("Gamma", "t", ["x"])]))
    assert created == [{"name": "Gamma", "entityType": "t", "observations": ["x"]}]
    assert conn.execute("SELECT max(id) FROM entities").fetchone()[0] == 4
