"""Code anchors across schema versions and backends: a store of the schema before anchors
keeps every row when it opens (and migrates), on SQLite and on PostgreSQL; ``memtrio
migrate`` copies anchors from one backend to the other. The old stores are built without
memtrio, in each backend's own schema (the contract of the anchors themselves is
tests/test_storage_contract_anchors.py)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import stores
from memtrio.actors.memory import migrate
from memtrio.actors.store.direct import Direct
from memtrio.actors.store.pg import schema as pg_schema
from memtrio.actors.store.pg.conn import PgConnection
from memtrio.actors.store.sqlite import schema
from test_storage_contract_anchors import A, anchor, memory, put, scope

# -- migration of a store of the previous schema ---------------------------------------------

OLD_ROWS = [
    "INSERT INTO scopes (id, name) VALUES (1, 'repo:/home/a')",
    "INSERT INTO memories (id, content, memory_type, importance, created_at, updated_at) "
    "VALUES (1, 'kept', 'note', 0.5, 1, 1), (2, 'also kept', 'decision', 0.1, 2, 2)",
    "INSERT INTO memory_scopes (memory_id, scope_id) VALUES (1, 1), (2, 1)",
    "INSERT INTO entities (id, name, canonical_name, kind, created_at, updated_at) "
    "VALUES (1, 'Alice', 'alice', 'person', 1, 1)",
    "INSERT INTO memory_entities (memory_id, entity_id) VALUES (2, 1)",
]
OLD_TABLES = ("scopes", "memories", "memory_scopes", "entities", "memory_entities")


def _old_sqlite(path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    for script in schema.MIGRATIONS[: schema.LATEST - 1]:
        for statement in schema._statements(script):
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {schema.LATEST - 1}")
    for statement in OLD_ROWS:
        conn.execute(statement)
    conn.close()


def _old_pg(url: str) -> None:
    conn = PgConnection.open(url)
    try:
        with conn.raw.transaction():
            for script in pg_schema.MIGRATIONS[: pg_schema.LATEST - 1]:
                conn.raw.execute(script.encode())
            conn.raw.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', %s)",
                (str(pg_schema.LATEST - 1),),
            )
            for statement in OLD_ROWS:
                conn.raw.execute(statement.encode())
    finally:
        conn.close()


def _raw_rows(path: Path, url: str | None) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the tables of ``OLD_TABLES``, read without memtrio."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    if url is None:
        conn = sqlite3.connect(path)
        try:
            for t in OLD_TABLES:
                out[t] = sorted(conn.execute(f"SELECT * FROM {t}").fetchall(), key=repr)
        finally:
            conn.close()
        return out
    pg = PgConnection.open(url)
    try:
        for t in OLD_TABLES:
            rows = pg.native(f"SELECT * FROM {t}").fetchall()
            out[t] = sorted((tuple(r) for r in rows), key=repr)
        pg.raw.rollback()
    finally:
        pg.close()
    return out


@pytest.mark.parametrize("backend", stores.STORES)
def test_a_store_of_the_previous_schema_keeps_every_row_and_takes_anchors(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    path, url = tmp_path / "memtrio.sqlite", None
    if backend == "postgresql":
        if os.environ.get("MEMTRIO_TEST_STORES") == "sqlite":
            pytest.skip("MEMTRIO_TEST_STORES=sqlite")
        url = request.getfixturevalue("pg_server").database()
        _old_pg(url)
    else:
        _old_sqlite(path)
    before = _raw_rows(path, url)
    assert len(before["memories"]) == 2
    store = Direct(path, url)  # opening migrates
    try:
        health = store.write(lambda tx: tx.health.report())
        assert health["schema_version"] == health["latest_schema_version"]
        assert health["latest_schema_version"] == (pg_schema.LATEST if url else schema.LATEST)
        assert _raw_rows(path, url) == before
        assert store.read(lambda tx: tx.anchors.count()) == 0
        store.write(lambda tx: tx.anchors.set(2, [anchor()]))
        assert store.read(lambda tx: tx.anchors.at(["pkg/retry.py"], [], [1])) == [2]
        assert store.read(lambda tx: tx.anchors.of([1, 2])) == {2: [anchor()]}
    finally:
        store.close()
    assert _raw_rows(path, url) == before  # anchors change no other row


def test_memtrio_migrate_copies_anchors_between_the_backends(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if os.environ.get("MEMTRIO_TEST_STORES") == "sqlite":
        pytest.skip("MEMTRIO_TEST_STORES=sqlite")
    url = request.getfixturevalue("pg_server").database()
    source = Direct(tmp_path / "memtrio.sqlite", None)
    target = Direct(tmp_path / "unused.sqlite", url)
    try:
        a = scope(source, A)
        mid = memory(source, [a])
        given = [anchor(), anchor("d/é.md", "", commit="", written_at=0.1 + 0.2)]
        put(source, mid, given)
        migrate.copy(source, target)
        assert migrate.digest(source) == migrate.digest(target)
        assert target.read(lambda tx: tx.anchors.of([mid])) == {mid: given}
        pg_scope = target.read(lambda tx: tx.scopes.ids([A]))[A]
        assert target.read(lambda tx: tx.anchors.at(["d/é.md"], [], [pg_scope])) == [mid]
    finally:
        source.close()
        target.close()
