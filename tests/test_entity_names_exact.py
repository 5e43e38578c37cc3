"""Issue 31 item 11: entity names are exact, case-sensitive identities, as in the reference.

In ``@modelcontextprotocol/server-memory`` and mcp-memory ("Names are unique and
case-sensitive") ``alice`` after ``Alice`` is a second entity; memtrio folded case
and spaces, so the second ``create_entities`` was skipped, observations and
relations of ``alice`` went to ``Alice``, and importing a reference
``memory.jsonl`` holding both merged them. Now the name is the identity on both
stores (SQLite schema version 7, PostgreSQL version 2, migrated without losing a
row); ``search_nodes`` still forgives case as the reference's does, and
memtrio's own memory tools find an entity by a name that differs in case only
when exactly one does (else they refuse, listing the candidates).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
import stores
import trio
from mcp import Client, StdioServerParameters
from mcp_client import call, fails, ok, open_client, run_cli
from memtrio.actors.store.pg import schema as pg_schema
from memtrio.actors.store.pg.conn import PgConnection
from memtrio.actors.store.sqlite import schema

# Names on PostgreSQL: the smoke path and the migration here; the store's name rules (exact,
# canonical lookups, import) are driven on both backends by tests/test_storage_contract*.py.
pytestmark = [stores.both_stores]
SQLITE_ONLY = pytest.mark.stores("sqlite")

ALICE = {"name": "Alice", "entityType": "person", "observations": ["likes tea"]}
alice = {"name": "alice", "entityType": "cat", "observations": ["purrs"]}


def names(result: dict[str, Any]) -> list[str]:
    return [e["name"] if isinstance(e, dict) else e for e in result["entities"]]


async def test_alice_after_Alice_is_a_second_entity_with_its_own_rows(home: Path) -> None:
    async with open_client(home) as client:
        assert names(await ok(client, "create_entities", entities=[ALICE])) == ["Alice"]
        assert names(await ok(client, "create_entities", entities=[alice])) == ["alice"]
        again = await ok(client, "create_entities", entities=[{**ALICE, "observations": ["x"]}])
        assert again["entities"] == []  # the exact name is already there
        added = await ok(
            client, "add_observations", observations=[{"entityName": "alice", "contents": ["naps"]}]
        )
        assert added["results"] == [{"entityName": "alice", "addedObservations": ["naps"]}]
        rel = {"from": "Alice", "to": "alice", "relationType": "owns"}
        assert (await ok(client, "create_relations", relations=[rel]))["relations"] == [rel]

        opened = await ok(client, "open_nodes", names=["alice", "ALICE"])
        assert opened["entities"] == [
            {"name": "alice", "entityType": "cat", "observations": ["purrs", "naps"]}
        ]
        assert opened["missing"] == ["ALICE"] and opened["relations"] == [rel]
        assert (await ok(client, "get_entity", name="Alice"))["observations"] == ["likes tea"]
        # Search forgives case, as the reference's does: both are found.
        assert names(await ok(client, "search_nodes", query="ALICE")) == ["Alice", "alice"]
        missing = await fails(client, "get_entity", name="ALICE")
        assert "'Alice'" in missing and "'alice'" in missing and "case-sensitive" in missing

        await ok(client, "delete_entities", entityNames=["alice"])
        left = await ok(client, "read_graph")
        assert left["entities"] == [ALICE] and left["relations"] == []
    assert stores.rows(home, "SELECT name, canonical_name FROM entities") == [("Alice", "alice")]


@SQLITE_ONLY
async def test_memory_tools_find_an_entity_by_its_only_case_variant_or_list_them(
    home: Path,
) -> None:
    async with open_client(home) as client:
        await ok(client, "create_entities", entities=[{**ALICE, "name": "Bob"}])
        stored = await ok(client, "remember", content="bob fixed the build", entities=["bob"])
        assert [(e["name"], e["created"]) for e in stored["entities"]] == [("Bob", False)]
        related = await ok(client, "relate", source="BOB", relation="knows", target="Carol")
        assert related["source"]["name"] == "Bob" and related["target"]["name"] == "Carol"

        await ok(client, "create_entities", entities=[ALICE, alice])
        refused = await fails(client, "remember", content="who?", entities=["ALICE"])
        assert "'Alice'" in refused and "'alice'" in refused and "exactly" in refused
        assert "'Alice'" in await fails(client, "graph", entity="ALICE")
        exact = await ok(client, "relate", source="alice", relation="chases", target="Bob")
        assert exact["source"]["name"] == "alice"
        paths = await ok(client, "graph", entity="alice")
        assert "Bob" in json.dumps(paths) and "Carol" in json.dumps(paths)
    rows = stores.rows(home, "SELECT name FROM entities ORDER BY id")
    assert rows == [("Bob",), ("Carol",), ("Alice",), ("alice",)]


def js_line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


@SQLITE_ONLY
def test_importing_a_reference_file_with_Alice_and_alice_keeps_both(
    home: Path, tmp_path: Path
) -> None:
    source = tmp_path / "memory.jsonl"
    lines = [
        {"type": "entity", **ALICE},
        {"type": "entity", **alice},
        {"type": "relation", "from": "alice", "to": "Alice", "relationType": "owned_by"},
    ]
    source.write_text("\n".join(js_line(r) for r in lines))
    imported = run_cli("import", str(source), "--json", home=home)
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout)["entities"] == 2
    out = tmp_path / "out.jsonl"
    assert run_cli("export", "--format", "jsonl", str(out), home=home).returncode == 0
    assert out.read_bytes() == source.read_bytes()

    # memtrio's own format keeps them apart too (it refers to entities by name).
    full = tmp_path / "full.jsonl"
    assert run_cli("export", str(full), home=home).returncode == 0
    other = tmp_path / "other"
    other.mkdir(mode=0o700)
    assert run_cli("import", str(full), home=other).returncode == 0
    again = tmp_path / "again.jsonl"
    assert run_cli("export", "--format", "jsonl", str(again), home=other).returncode == 0
    assert again.read_bytes() == source.read_bytes()


@SQLITE_ONLY
def test_an_export_of_format_1_is_still_read(home: Path, tmp_path: Path) -> None:
    """Format 1 (before schema version 7) refers to entities by canonical name."""
    records = [
        {"type": "header", "format": "memtrio-export", "version": 1, "schema_version": 6},
        {"type": "entity", "id": 1, "name": "Alice  Smith", "canonical_name": "alice smith",
         "kind": "person", "created_at": 1.0, "updated_at": 1.0, "scopes": []},
        {"type": "entity", "id": 2, "name": "Acme", "canonical_name": "acme",
         "kind": "company", "created_at": 1.0, "updated_at": 1.0, "scopes": []},
        {"type": "relation", "id": 1, "source": "alice smith", "relation_type": "works_at",
         "target": "acme", "metadata": "{}", "created_at": 1.0, "scopes": []},
        {"type": "memory", "id": 1, "content": "Alice Smith joined Acme", "memory_type": "note",
         "importance": 0.0, "created_at": 1.0, "updated_at": 1.0, "scopes": ["global"],
         "entities": ["acme", "alice smith"], "relations": [["alice smith", "works_at", "acme"]]},
    ]  # fmt: skip
    old = tmp_path / "old.jsonl"
    old.write_text("".join(json.dumps(r) + "\n" for r in records))
    done = run_cli("import", str(old), home=home)
    assert done.returncode == 0, done.stderr
    linked = stores.rows(
        home,
        "SELECT e.name FROM memory_entities me JOIN entities e ON e.id = me.entity_id ORDER BY e.name",
    )
    assert linked == [("Acme",), ("Alice  Smith",)]
    edges = stores.rows(
        home,
        "SELECT s.name, t.name FROM relations r JOIN entities s ON s.id = r.source_id "
        "JOIN entities t ON t.id = r.target_id",
    )
    assert edges == [("Alice  Smith", "Acme")]


# -- a store written before: every row kept, names exact from then on ----------------------

OLD_ROWS = [
    "INSERT INTO scopes (id, name) VALUES (1, 'global')",
    "INSERT INTO entities (id, name, canonical_name, kind, created_at, updated_at) "
    "VALUES (1, 'Alice', 'alice', 'person', 1, 1), (2, 'Acme  Corp', 'acme corp', 'company', 1, 1),"
    " (3, 'Gone', 'gone', 'entity', 1, 1)",
    "INSERT INTO entity_scopes (entity_id, scope_id) VALUES (1, 1), (2, 1)",
    "INSERT INTO relations (id, source_id, target_id, relation_type, metadata, created_at) "
    "VALUES (1, 1, 2, 'works_at', '{}', 1)",
    "INSERT INTO relation_scopes (relation_id, scope_id) VALUES (1, 1)",
    "INSERT INTO memories (id, content, memory_type, importance, created_at, updated_at) "
    "VALUES (1, 'likes tea', 'observation', 0, 1, 1), (2, 'Alice works at Acme', 'note', 0, 1, 1)",
    "INSERT INTO memory_scopes (memory_id, scope_id) VALUES (1, 1), (2, 1)",
    "INSERT INTO memory_entities (memory_id, entity_id) VALUES (1, 1), (2, 1), (2, 2)",
    "INSERT INTO memory_relations (memory_id, relation_id) VALUES (2, 1)",
    "DELETE FROM entities WHERE id = 3",  # the ids' high-water mark is 3
]
TABLES = (
    "scopes", "entities", "entity_scopes", "relations", "relation_scopes", "memories",
    "memory_scopes", "memory_entities", "memory_relations",
)  # fmt: skip


def every_row(home: Path) -> dict[str, list[tuple[Any, ...]]]:
    return {t: sorted(stores.rows(home, f"SELECT * FROM {t}"), key=repr) for t in TABLES}


def old_sqlite_store(home: Path) -> None:
    """The home's store at schema version 6 (the released migrations, never edited)."""
    conn = sqlite3.connect(home / "memtrio.sqlite", isolation_level=None)
    for script in schema.MIGRATIONS[:6]:
        for statement in schema._statements(script):
            conn.execute(statement)
    conn.execute("PRAGMA user_version = 6")
    for statement in OLD_ROWS:
        conn.execute(statement)
    conn.close()


def old_pg_store(url: str) -> None:
    """A PostgreSQL store at schema version 1."""
    conn = PgConnection.open(url)
    try:
        with conn.raw.transaction():
            conn.raw.execute(pg_schema.MIGRATIONS[0].encode())
            conn.raw.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '1')")
            for statement in OLD_ROWS:
                conn.raw.execute(statement.encode())
    finally:
        conn.close()


async def test_a_store_of_the_previous_schema_keeps_every_row_and_takes_alice(
    home: Path, store: str, pg_server: Any
) -> None:
    context: contextlib.AbstractContextManager[object] = contextlib.nullcontext()
    if store == "postgresql":
        url = pg_server.database()
        old_pg_store(url)
        context = stores.selected_store(url)
    else:
        old_sqlite_store(home)
    with context:
        before = every_row(home)
        doctor = run_cli("doctor", "--json", home=home)
        report = json.loads(doctor.stdout)
        assert report["schema_version"] == report["latest_schema_version"]
        assert report["latest_schema_version"] == (
            pg_schema.LATEST if store == "postgresql" else schema.LATEST
        )
        assert every_row(home) == before
        async with open_client(home) as client:
            made = await ok(client, "create_entities", entities=[alice])
            assert names(made) == ["alice"]
            assert (await ok(client, "get_entity", name="Alice"))["observations"] == ["likes tea"]
            assert names(await ok(client, "search_nodes", query="acme corp")) == ["Acme  Corp"]
        assert stores.rows(home, "SELECT id, name FROM entities ORDER BY id") == [
            (1, "Alice"), (2, "Acme  Corp"), (4, "alice"),
        ]  # fmt: skip


# -- the same calls on the reference server ---------------------------------------------

REFERENCE = "@modelcontextprotocol/server-memory/dist/index.js"
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("create_entities", {"entities": [ALICE]}),
    ("create_entities", {"entities": [alice]}),
    ("create_entities", {"entities": [{**ALICE, "entityType": "x"}]}),
    ("add_observations", {"observations": [{"entityName": "alice", "contents": ["naps"]}]}),
    ("add_observations", {"observations": [{"entityName": "ALICE", "contents": ["x"]}]}),
    ("create_relations", {"relations": [{"from": "Alice", "to": "alice", "relationType": "owns"}]}),
    ("open_nodes", {"names": ["alice"]}),
    ("open_nodes", {"names": ["ALICE"]}),
    ("search_nodes", {"query": "ALICE"}),
    ("delete_entities", {"entityNames": ["ALICE"]}),
    ("read_graph", {}),
    ("delete_entities", {"entityNames": ["alice"]}),
    ("read_graph", {}),
]


async def _answers(client: Client) -> list[tuple[bool, Any]]:
    """Each call's error flag and, for a success, its reference-shaped fields."""
    out: list[tuple[bool, Any]] = []
    for tool, arguments in CALLS:
        is_error, payload = await call(client, tool, **arguments)
        if isinstance(payload, dict):
            payload = {
                k: v for k, v in payload.items() if k in ("entities", "relations", "results")
            }
        out.append((is_error, None if is_error else payload))
    return out


def _reference_script() -> Path | None:
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        return None
    root = subprocess.run([npm, "root", "-g"], capture_output=True, text=True, timeout=30)
    script = Path(root.stdout.strip()) / REFERENCE
    return script if script.is_file() else None


async def test_the_reference_server_answers_the_same_calls_the_same_way(
    home: Path, tmp_path: Path, store: str
) -> None:
    if store != "sqlite":
        pytest.skip("the reference comparison does not depend on the store")
    script = _reference_script()
    if script is None:
        pytest.skip("@modelcontextprotocol/server-memory is not installed here")
    params = StdioServerParameters(
        command=str(shutil.which("node")),
        args=[str(script)],
        env={"PATH": os.environ["PATH"], "MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")},
        cwd=str(tmp_path),
    )
    with trio.fail_after(60):
        async with Client(params, read_timeout_seconds=60) as reference:
            theirs = await _answers(reference)
    async with open_client(home) as client:
        ours = await _answers(client)
    assert ours == theirs
