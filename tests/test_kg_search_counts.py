"""``search_nodes`` counts observations per entity from the FTS5 match's rowids.

Regression guard for the rewrite of `search.term_hits` (issue #18, a common word
over 100,000 memories): on randomized graphs, with hidden scopes, unscoped
memories and memories of other types, every term's hits and every query's page
equal those of the former join (kept here as the reference).
"""

from __future__ import annotations

import os
import random
import sqlite3
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from memtrio.actors.kg import search
from memtrio.actors.kg.lookup import OBS_TYPE_SQL
from memtrio.actors.kg.view import Scoped, View
from memtrio.actors.store import backends, schema

WORDS = ["alpha", "alpine", "beta", "gamma", "gamut", "delta", "omega", "omen", "ticket", "tick"]
TYPES = ["observation", "Observation", "OBSERVATION", "note", "decision", "fact"]
SCOPES = ["global", "repo:a", "repo:b"]


def reference_hits(conn: sqlite3.Connection, sc: Scoped, term: str) -> Counter[int]:
    """`search.term_hits` before the rewrite: every matching memory joined with its row."""
    match = f'"{term}"*'
    hits: Counter[int] = Counter()
    in_name = {
        r[0]
        for r in conn.execute("SELECT rowid FROM entities_fts WHERE entities_fts MATCH ?", (match,))
    }
    if len(term) >= 3:
        in_name.update(
            r[0]
            for r in conn.execute(
                "SELECT rowid FROM entities_trigram WHERE entities_trigram MATCH ?", (f'"{term}"',)
            )
        )
    for eid in in_name:
        hits[eid] += search.NAME_WEIGHT
    for eid, n in conn.execute(
        f"""SELECT me.entity_id, count(*) FROM memories_fts f JOIN memories m ON m.id = f.rowid
            JOIN memory_entities me ON me.memory_id = m.id
            WHERE memories_fts MATCH ? AND {OBS_TYPE_SQL} AND {sc.memory()} GROUP BY me.entity_id""",
        (match,),
    ):
        hits[eid] += n
    return hits


def random_graph(conn: sqlite3.Connection, seed: int) -> None:
    """Entities, scoped and unscoped memories of several types, and their links."""
    rng = random.Random(seed)

    def insert(sql: str, *params: object) -> int:
        return conn.execute(sql + " RETURNING id", params).fetchone()[0]

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
            conn.execute(
                "INSERT INTO entity_scopes (entity_id, scope_id) VALUES (?, ?)",
                (entities[-1], scope[rng.choice(SCOPES)]),
            )
    for _ in range(rng.randint(20, 300)):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6)))
        m = insert(
            "INSERT INTO memories (content, memory_type, created_at, updated_at) VALUES (?, ?, 0, 0)",
            text,
            rng.choice(TYPES),
        )
        for s in rng.sample(SCOPES, rng.choice([0, 1, 1, 1, 2])):  # none: visible everywhere
            conn.execute(
                "INSERT INTO memory_scopes (memory_id, scope_id) VALUES (?, ?)", (m, scope[s])
            )
        for e in rng.sample(entities, rng.randint(0, 3)):
            conn.execute("INSERT INTO memory_entities (memory_id, entity_id) VALUES (?, ?)", (m, e))


@pytest.fixture(params=["sqlite", "postgresql"])
def graph_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[sqlite3.Connection]:
    """A fresh store's write connection on each backend (``MEMTRIO_TEST_STORES`` narrows them)."""
    chosen = os.environ.get("MEMTRIO_TEST_STORES")
    if chosen and request.param not in chosen.split(","):
        pytest.skip(f"MEMTRIO_TEST_STORES={chosen}")
    url = request.getfixturevalue("pg_server").database() if request.param == "postgresql" else None
    conn = backends.open_writer(
        tmp_path / "memtrio.sqlite", url, busy_timeout_ms=5000, durability="sync"
    )
    try:
        yield conn
    finally:
        conn.close()


def sqlite_store(path: Path, seed: int) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), isolation_level=None)
    schema.migrate(conn)
    conn.execute("BEGIN")
    random_graph(conn, seed)
    conn.execute("COMMIT")
    return conn


@pytest.mark.parametrize("seed", range(12))
def test_term_hits_equal_the_former_join_on_random_graphs(tmp_path: Path, seed: int) -> None:
    conn = sqlite_store(tmp_path / "store.sqlite", seed)
    views = [
        View(["global"], ["global"], "global"),
        View(["repo:a", "global"], ["repo:a"], "repo:a"),
    ]
    views.append(View(SCOPES, ["repo:b"], "repo:b"))  # every scope read: no filter at all
    for view in views:
        sc = Scoped(conn, view)
        assert sc.sees_all == (view.selection == SCOPES)
        for term in [*WORDS, "al", "om", "tic", "zzz"]:
            assert search.term_hits(conn, sc, term) == reference_hits(conn, sc, term), term


def test_search_nodes_pages_equal_the_former_join(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = sqlite_store(tmp_path / "store.sqlite", 99)
    sc = Scoped(conn, View(["repo:a", "global"], ["repo:a"], "repo:a"))
    queries = ["alpha", "om ti", "gam beta", "delta tick omega"]
    new = [search.search_nodes(conn, sc, q, 0, 7, "full", None) for q in queries]
    monkeypatch.setattr(search, "term_hits", reference_hits)
    old = [search.search_nodes(conn, sc, q, 0, 7, "full", None) for q in queries]
    assert new == old
    assert any(page["total"] > 7 for page in new)  # ranking and paging both exercised


@pytest.mark.parametrize("seed", range(4))
def test_summary_counts_equal_the_full_pages_observations(
    graph_store: sqlite3.Connection, seed: int
) -> None:
    """``summary`` counts observations in SQL; ``full`` lists them: the two must agree."""
    conn = graph_store
    random_graph(conn, seed)
    for view in (View(["global"], ["global"], "global"), View(SCOPES, ["repo:a"], "repo:a")):
        sc = Scoped(conn, view)
        for query in ("al", "om ti", "gamma"):
            full = search.search_nodes(conn, sc, query, 0, 50, "full", None)
            summary = search.search_nodes(conn, sc, query, 0, 50, "summary", None)
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
