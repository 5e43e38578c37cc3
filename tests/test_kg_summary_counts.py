"""``summary`` pages count each entity's observations in SQL, without reading their texts.

On randomized graphs (hidden scopes, unscoped memories, memories of other
types, on SQLite and PostgreSQL) a ``summary`` page of ``search_nodes`` must
show, entity for entity, as many observations as the ``full`` page lists, with
the same relations and total (issue #18: a page of hub entities read 45,000
observation texts to count them).
"""

from __future__ import annotations

import os
import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
import stores
from memtrio.actors.kg import search
from memtrio.actors.kg.view import Scoped, View
from memtrio.actors.store import backends
from memtrio.actors.store.interfaces import StoreTx

WORDS = ["alpha", "alpine", "beta", "gamma", "gamut", "delta", "omega", "omen", "ticket", "tick"]
TYPES = ["observation", "Observation", "OBSERVATION", "note", "decision", "fact"]
SCOPES = ["global", "repo:a", "repo:b"]


def random_graph(conn: sqlite3.Connection, seed: int) -> None:
    """Entities, scoped and unscoped memories of several types, and their links."""
    rng = random.Random(seed)

    def insert(sql: str, *params: object) -> int:
        return stores.sql(conn, sql + " RETURNING id", *params).fetchone()[0]

    scope = {name: insert("INSERT INTO scopes (name) VALUES (?)", name) for name in SCOPES}
    entities = []
    for e in range(rng.randint(5, 40)):
        name = f"{rng.choice(WORDS)}-{rng.choice(WORDS)}-{e}"
        entities.append(
            insert(
                "INSERT INTO entities (name, canonical_name, kind, created_at, updated_at) VALUES (?, ?, ?, 0, 0)",
                name,
                name,
                rng.choice(WORDS),
            )
        )
        if rng.random() < 0.8:
            stores.sql(
                conn,
                "INSERT INTO entity_scopes (entity_id, scope_id) VALUES (?, ?)",
                entities[-1],
                scope[rng.choice(SCOPES)],
            )
    for _ in range(rng.randint(20, 300)):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6)))
        m = insert(
            "INSERT INTO memories (content, memory_type, created_at, updated_at) VALUES (?, ?, 0, 0)",
            text,
            rng.choice(TYPES),
        )
        for s in rng.sample(SCOPES, rng.choice([0, 1, 1, 1, 2])):  # none: visible everywhere
            stores.sql(
                conn, "INSERT INTO memory_scopes (memory_id, scope_id) VALUES (?, ?)", m, scope[s]
            )
        for e in rng.sample(entities, rng.randint(0, 3)):
            stores.sql(
                conn, "INSERT INTO memory_entities (memory_id, entity_id) VALUES (?, ?)", m, e
            )


@pytest.fixture(params=["sqlite", "postgresql"])
def graph_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[sqlite3.Connection, StoreTx]]:
    """A fresh store's write connection, and its transaction, on each backend (``MEMTRIO_TEST_STORES`` narrows them)."""
    chosen = os.environ.get("MEMTRIO_TEST_STORES")
    if chosen and request.param not in chosen.split(","):
        pytest.skip(f"MEMTRIO_TEST_STORES={chosen}")
    url = None
    if request.param == "postgresql":
        url = request.getfixturevalue("pg_server").migrated_database()
    else:
        stores.new_sqlite_store(
            tmp_path / "memtrio.sqlite", request.getfixturevalue("sqlite_template")
        )
    backend = backends.load(url, tmp_path / "memtrio.sqlite")
    conn = backend.open_writer(busy_timeout_ms=5000, durability="sync")
    try:
        yield conn, backend.tx_maker()(conn)
    finally:
        conn.close()
        if url is not None:
            request.getfixturevalue("pg_server").drop(url)


@pytest.mark.parametrize("seed", range(4))
def test_summary_counts_equal_the_full_pages_observations(
    graph_store: tuple[sqlite3.Connection, StoreTx], seed: int
) -> None:
    """``summary`` counts observations in SQL; ``full`` lists them: the two must agree."""
    conn, tx = graph_store
    random_graph(conn, seed)
    for view in (View(["global"], ["global"], "global"), View(SCOPES, ["repo:a"], "repo:a")):
        t = tx
        sc = Scoped(t, view)
        for query in ("al", "om ti", "gamma"):
            full = search.search_nodes(t, sc, query, 0, 50, "full", None)
            summary = search.search_nodes(t, sc, query, 0, 50, "summary", None)
            expected = [
                {
                    "name": e["name"],
                    "entityType": e["entityType"],
                    "observationCount": len(e["observations"]),
                }
                for e in full["entities"]
            ]
            assert summary["entities"] == expected
            assert summary["relations"] == full["relations"]
            assert summary["total"] == full["total"]
