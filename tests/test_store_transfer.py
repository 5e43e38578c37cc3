"""Export/import into a store that already has rows, and flush scoping."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from memtrio.actors.memory import transfer
from memtrio.actors.store import connections
from memtrio.actors.store.direct import Direct
from memtrio.actors.store.domain.embeddings import Vec, put_vector
from memtrio.actors.store.domain.entities import EntitySpec, RelationSpec
from memtrio.actors.store.domain.memories import NewMemory, get_memory, insert_memory
from memtrio.actors.store.domain.scopes import ScopePolicy
from memtrio.actors.store.interfaces import StoreTx
from memtrio.actors.store.sqlite import db
from memtrio.actors.store.sqlite.tx import tx as as_tx

REPO = "repo:/r/.git"
OTHER = "repo:/o/.git"


def open_store(path: Path) -> sqlite3.Connection:
    return db.open_write_connection(path, busy_timeout_ms=1000, durability="normal")


def tx(conn: sqlite3.Connection, fn):  # type: ignore[no-untyped-def]
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = fn(conn)
        conn.execute("COMMIT")
        return result
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def remember(conn: sqlite3.Connection, content: str, scopes: list[str], **kw: object) -> int:
    return tx(
        conn,
        lambda c: insert_memory(as_tx(c), NewMemory(content, scopes=scopes, **kw))[0]["id"],
    )  # type: ignore[arg-type]


def test_import_into_a_non_empty_store_renumbers_and_relinks(tmp_path: Path) -> None:
    a = open_store(tmp_path / "a.sqlite")
    vec = Vec(b"\x00\x00\x80?", 1, "m", "r")
    remember(a, "from a one", [REPO], entities=[EntitySpec("Shared")], vector=vec)
    remember(
        a,
        "from a two",
        ["global"],
        relations=[RelationSpec(EntitySpec("x"), "uses", EntitySpec("shared"))],
    )
    records = [
        json.loads(json.dumps(r))
        for r in connections.run_read(a, lambda c: list(transfer.export_lines(as_tx(c))))
    ]

    b = open_store(tmp_path / "b.sqlite")
    remember(b, "b's own first memory", [OTHER], entities=[EntitySpec("Shared", "library")])
    added = tx(
        b,
        lambda c: transfer.import_records(
            as_tx(c), transfer.parse_lines([json.dumps(r) for r in records])
        ),
    )
    assert added["memories"] == 2 and added["entities"] == 1  # "Shared" is reused by name
    rows = dict(b.execute("SELECT content, id FROM memories"))
    assert rows["b's own first memory"] == 1 and rows["from a two"] == 2 and rows["from a one"] == 3
    b.execute("BEGIN")
    moved = get_memory(as_tx(b), 3)
    b.execute("ROLLBACK")
    assert moved is not None and moved["scopes"] == [REPO]
    assert [e["name"] for e in moved["entities"]] == ["Shared"]
    assert b.execute("SELECT item_id FROM vectors WHERE kind = 'memory'").fetchall() == [(3,)]
    again = tx(
        b,
        lambda c: transfer.import_records(
            as_tx(c), transfer.parse_lines([json.dumps(r) for r in records])
        ),
    )
    assert (
        again["memories"] == 1 and again["skipped_memories"] == 1
    )  # id 1 was renumbered, so it is new again


def test_a_malformed_import_changes_nothing(tmp_path: Path) -> None:
    conn = open_store(tmp_path / "c.sqlite")
    header = json.dumps({"type": "header", "format": transfer.FORMAT, "version": transfer.VERSION})
    lines = [
        header,
        json.dumps({"type": "scope", "id": 1, "name": "global"}),
        json.dumps({"type": "memory", "id": 1}),
    ]
    with pytest.raises(transfer.ImportRefused, match="malformed memory record"):
        tx(conn, lambda c: transfer.import_records(as_tx(c), transfer.parse_lines(lines)))
    assert conn.execute("SELECT count(*) FROM scopes").fetchone()[0] == 0
    with pytest.raises(transfer.ImportRefused, match="line 1: not JSON"):
        transfer.parse_lines(["{nope"])


def test_flush_keeps_what_this_server_may_not_write(tmp_path: Path) -> None:
    conn = open_store(tmp_path / "f.sqlite")
    mine = remember(conn, "mine", [REPO], entities=[EntitySpec("only-mine")])
    remember(conn, "global", ["global"])
    shared = remember(conn, "shared with other", ["global", OTHER], entities=[EntitySpec("kept")])
    foreign = remember(conn, "foreign", [OTHER])
    result, _ = tx(conn, lambda c: transfer.flush(as_tx(c), ScopePolicy(REPO), everything=False))
    assert result["deleted_memories"] == 2
    left = {r[0] for r in conn.execute("SELECT id FROM memories")}
    assert left == {shared, foreign} and mine not in left
    assert {r[0] for r in conn.execute("SELECT name FROM entities")} == {"kept"}
    result, changes = tx(
        conn, lambda c: transfer.flush(as_tx(c), ScopePolicy(REPO), everything=True)
    )
    assert result["deleted_memories"] == 2 and changes[0].kind == "reset"
    assert conn.execute("SELECT count(*) FROM scopes").fetchone()[0] == 0


def test_export_and_import_carry_every_window_of_a_long_memory(tmp_path: Path) -> None:
    a = open_store(tmp_path / "a.sqlite")
    windows = Vec(b"\x00\x00\x80?" + b"\x00\x00\x00@" + b"\x00\x00@@", 1, "m", "r")
    long_text = "a long memory " * 30  # over 254 characters
    remember(a, long_text, [REPO], vector=windows)
    assert a.execute("SELECT count(*) FROM vector_chunks").fetchone()[0] == 2
    records = [
        json.loads(json.dumps(r))
        for r in connections.run_read(a, lambda c: list(transfer.export_lines(as_tx(c))))
    ]
    [vector] = [r for r in records if r["type"] == "vector"]
    b = open_store(tmp_path / "b.sqlite")
    tx(
        b,
        lambda c: transfer.import_records(as_tx(c), transfer.parse_lines(map(json.dumps, records))),
    )
    assert b.execute("SELECT vec FROM vectors").fetchall() == [(windows.chunk(0),)]
    assert b.execute("SELECT chunk, vec FROM vector_chunks ORDER BY chunk").fetchall() == [
        (1, windows.chunk(1)),
        (2, windows.chunk(2)),
    ]
    # An export from schema 3 (one vector per memory, the first window of a long
    # text): that vector is left out, so reembed / recall compute every window.
    records[0]["schema_version"] = 3
    vector["vec"] = vector["vec"][:8]  # base64 of the first window only
    c = open_store(tmp_path / "c.sqlite")
    added = tx(
        c,
        lambda c: transfer.import_records(as_tx(c), transfer.parse_lines(map(json.dumps, records))),
    )
    assert added["memories"] == 1 and added["vectors"] == 0
    assert c.execute("SELECT count(*) FROM vectors").fetchone()[0] == 0


def test_import_keeps_the_vectors_of_rows_that_already_exist(tmp_path: Path) -> None:
    # A row the import reuses (here an entity known to another repository) keeps
    # its own vector: import never changes an existing row, whoever owns it.
    a = open_store(tmp_path / "a.sqlite")
    remember(a, "from a", [REPO], entities=[EntitySpec("Shared")])
    tx(a, lambda c: put_vector(as_tx(c), "entity", 1, Vec(b"\x00\x00\x80?", 1, "m", "r")))
    records = [
        json.dumps(r)
        for r in connections.run_read(a, lambda c: list(transfer.export_lines(as_tx(c))))
    ]

    b = open_store(tmp_path / "b.sqlite")
    remember(b, "b's own", [OTHER], entities=[EntitySpec("Shared")])
    mine = b"\x00\x00\x00@"  # 2.0
    tx(b, lambda c: put_vector(as_tx(c), "entity", 1, Vec(mine, 1, "m", "r")))
    tx(b, lambda c: transfer.import_records(as_tx(c), transfer.parse_lines(records)))
    assert b.execute("SELECT vec FROM vectors WHERE kind = 'entity'").fetchall() == [(mine,)]


def test_flush_where_no_writable_scope_exists_keeps_other_repositories(tmp_path: Path) -> None:
    # Neither this repository's scope nor `global` holds a row yet: a flush here must
    # delete nothing of another repository (it deleted everything: `NOT IN (NULL)`).
    conn = open_store(tmp_path / "f.sqlite")
    foreign = remember(conn, "foreign", [OTHER], entities=[EntitySpec("theirs")])
    result, _ = tx(conn, lambda c: transfer.flush(as_tx(c), ScopePolicy(REPO), everything=False))
    assert result == {"deleted_memories": 0, "deleted_entities": 0, "deleted_relations": 0}
    assert [r[0] for r in conn.execute("SELECT id FROM memories")] == [foreign]
    assert [r[0] for r in conn.execute("SELECT name FROM entities")] == ["theirs"]


EXPORT = [
    {"type": "header", "format": "memtrio-export", "version": 2, "schema_version": 7},
    {"type": "scope", "id": 1, "name": REPO},
    {"type": "entity", "id": 1, "name": "Shared", "canonical_name": "shared", "kind": "entity",
     "created_at": 1.0, "updated_at": 1.0, "scopes": [REPO]},
    {"type": "memory", "id": 1, "content": "100% it's_a \"memory\"", "memory_type": "observation",
     "importance": 0.0, "created_at": 1.0, "updated_at": 1.0, "last_accessed_at": None,
     "access_count": 0, "scopes": [REPO], "entities": ["Shared"], "relations": []},
    {"type": "vector", "kind": "memory", "key": 1, "model": "m", "revision": "r", "dim": 1,
     "vec": "AACAPw=="},
    {"type": "vector", "kind": "entity", "key": "Shared", "model": "m", "revision": "r", "dim": 1,
     "vec": "AAAAQA=="},
]  # fmt: skip


def test_import_stores_vectors_in_each_backends_own_sql(direct: Direct) -> None:
    """The import's vectors go through the storage interface (`tx.vectors`), on each backend
    (PostgreSQL runs only its own statements: tests/test_pg_native.py)."""
    lines = [json.dumps(r) for r in EXPORT]
    added = direct.write(lambda t: transfer.import_records(t, transfer.parse_lines(lines)))
    assert added["memories"] == 1 and added["vectors"] == 2

    def stored(t: StoreTx) -> tuple[dict[int, list[bytes]], dict[int, list[bytes]]]:
        [mid] = t.vectors.existing("memory", range(1, 10))
        [eid] = t.vectors.existing("entity", range(1, 10))
        return (
            t.vectors.windows_of("memory", [mid], "m", "r", 1),
            t.vectors.windows_of("entity", [eid], "m", "r", 1),
        )

    memory, entity = direct.read(stored)
    assert list(memory.values()) == [[b"\x00\x00\x80?"]]
    assert list(entity.values()) == [[b"\x00\x00\x00@"]]
