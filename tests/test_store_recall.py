"""Lexical recall: BM25 with tie-breakers, filters before ranking, FTS syntax safety, cost bounds."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memtrio.actors.store import connections
from memtrio.actors.store.domain import lexical
from memtrio.actors.store.domain.lexical import lexical_plan, search_memories
from memtrio.actors.store.domain.memories import NewMemory, insert_memory, writable_memory
from memtrio.actors.store.domain.scopes import ScopePolicy
from memtrio.actors.store.interfaces.fulltext import TextQuery
from memtrio.actors.store.sqlite import db
from memtrio.actors.store.sqlite.fulltext import SqliteFullText, match_expression
from memtrio.actors.store.sqlite.tx import tx as sqlite_tx
from memtrio.protocol.errors import DomainError

REPO = "repo:/r/.git"
OTHER = "repo:/other/.git"
SELECTION = [REPO, "global"]


@pytest.fixture
def conns(tmp_path: Path) -> tuple[sqlite3.Connection, sqlite3.Connection]:
    path = tmp_path / "m.sqlite"
    writer = db.open_write_connection(path, busy_timeout_ms=1000, durability="normal")
    reader = db.connect(path, busy_timeout_ms=1000, read_only=True)
    yield writer, reader
    writer.close()
    reader.close()


def add(conn: sqlite3.Connection, content: str, scopes: list[str], ts: float, **kw: object) -> int:
    conn.execute("BEGIN IMMEDIATE")
    result, _ = insert_memory(sqlite_tx(conn), NewMemory(content, scopes=scopes, **kw), ts)  # type: ignore[arg-type]
    conn.execute("COMMIT")
    return result["id"]


def search(
    conn: sqlite3.Connection,
    query: str,
    selection: list[str] = SELECTION,
    memory_type: str | None = None,
    limit: int = 10,
) -> list[int]:
    return [
        i
        for i, _ in connections.run_read(
            conn, lambda c: search_memories(sqlite_tx(c), query, selection, memory_type, limit)
        )
    ]


def test_repository_matches_come_first_then_bm25_then_importance_then_recency(
    conns: tuple[sqlite3.Connection, sqlite3.Connection],
) -> None:
    w, r = conns
    strong_global = add(w, "cache cache cache invalidation", ["global"], 1)
    weak_repo = add(w, "the cache is warmed at startup and then left alone for hours", [REPO], 2)
    old = add(w, "lock ordering", [REPO], 3, importance=0.0)
    new = add(w, "lock ordering", [REPO], 4, importance=0.0)
    important = add(w, "lock ordering", [REPO], 5, importance=0.9)
    assert search(r, "cache") == [weak_repo, strong_global]
    assert search(r, "cache", ["global"]) == [strong_global]
    assert search(r, "lock ordering") == [important, new, old]


def test_filters_apply_before_ranking(conns: tuple[sqlite3.Connection, sqlite3.Connection]) -> None:
    w, r = conns
    # Many better matches in an unselected repository and of another type must not crowd out the one we want.
    for i in range(300):
        add(w, "deploy deploy deploy", [OTHER], i)
        add(w, "deploy deploy deploy", [REPO], 1000 + i, memory_type="observation")
    wanted = add(
        w,
        "we deploy on fridays, sadly, with a long checklist of manual steps",
        [REPO],
        5000,
        memory_type="Pitfall",
    )
    assert search(r, "deploy", memory_type="pitfall", limit=5) == [wanted]
    ids = search(r, "deploy", [OTHER], limit=3)
    assert len(ids) == 3 and all(i % 2 == 1 for i in ids)  # odd ids are the OTHER ones
    assert OTHER not in {s for i in search(r, "deploy", limit=50) for s in _scopes(r, i)}


def _scopes(conn: sqlite3.Connection, memory_id: int) -> list[str]:
    return connections.run_read(conn, lambda c: sqlite_tx(c).scopes.of_memory(memory_id))


def test_fts_syntax_never_errors_and_diacritics_fold(
    conns: tuple[sqlite3.Connection, sqlite3.Connection],
) -> None:
    w, r = conns
    cafe = add(w, "Meet at the café near snake_case street", [REPO], 1)
    for query in [
        '"',
        "café*",
        "-cafe",
        "a:b",
        "(",
        ")",
        "AND",
        "OR NOT",
        "NEAR(x y)",
        "^",
        "{x}",
        "'",
        "",
        "   ",
        "*",
    ]:
        search(r, query)
    assert search(r, "CAFE") == [cafe]
    assert search(r, "snake_case") == [cafe]
    assert search(r, "the and of") == [cafe]  # only stop words: they are searched as they are


def test_very_common_words_are_pruned_when_a_selective_word_exists(
    conns: tuple[sqlite3.Connection, sqlite3.Connection], monkeypatch: pytest.MonkeyPatch
) -> None:
    w, r = conns
    for i in range(50):
        add(w, f"common filler text number {i}", [REPO], i)
    rare = add(w, "common filler zanzibar", [REPO], 100)
    plan = connections.run_read(r, lambda c: lexical_plan(SqliteFullText(c), "zanzibar common"))
    assert plan == (TextQuery(["zanzibar"], ["zanzibar", "common"]), 0)
    assert search(r, "zanzibar common") == [rare]
    # Only common words and more postings than the budget: the newest window is ranked.
    monkeypatch.setattr(lexical, "MAX_POSTINGS", 20)
    match, low = connections.run_read(r, lambda c: lexical_plan(SqliteFullText(c), "common filler"))
    assert match_expression(match) == '"common" OR "filler" OR NEAR("common" "filler", 4)'
    assert low > 0
    newest = search(r, "common filler", limit=50)
    assert newest and all(i >= low for i in newest)
    # A connection without the vocab table ranks everything (no pruning).
    assert lexical_plan(SqliteFullText(w), "zanzibar common") == (
        TextQuery(["zanzibar", "common"], ["zanzibar", "common"]),
        0,
    )


def test_ranker_seeds_of_a_big_store_are_scored_in_the_newest_window_by_idf(
    conns: tuple[sqlite3.Connection, sqlite3.Connection], monkeypatch: pytest.MonkeyPatch
) -> None:
    from memtrio.actors.ranker import rank as rank_mod
    from memtrio.actors.store.sqlite.tx import tx as sqlite_tx

    w, r = conns
    for i in range(60):
        add(w, f"filler text number {i}", [REPO], i)
    both = add(w, "filler text side by side", [REPO], 100)
    apart = add(w, "text and then much later some filler", [REPO], 101)
    one = add(w, "only the text here", [REPO], 102)
    # 120+ postings against a budget of 20: only the newest memories are ranked.
    budget = lexical.PlanBudget(lexical.FUNCTION_WORDS, 20, prune_from=0)
    monkeypatch.setattr(rank_mod, "FTS_BUDGET", budget)
    _, low = connections.run_read(
        r, lambda c: lexical.plan(SqliteFullText(c), "filler text", budget)
    )
    assert 0 < low <= both
    ranked = connections.run_read(r, lambda c: rank_mod.fts_candidates(sqlite_tx(c), "filler text"))
    ids = [i for i, _ in ranked]
    assert ids[0] == both and ids[-1] == one and all(i >= low for i in ids)
    scores = dict(ranked)
    # Both words, side by side (the NEAR pair too) > both words apart > one word.
    assert scores[both] > scores[apart] > scores[one] > 0


def test_write_selection_refuses_foreign_memories(
    conns: tuple[sqlite3.Connection, sqlite3.Connection],
) -> None:
    w, _ = conns
    policy = ScopePolicy(REPO)
    shared = add(w, "shared", ["global", OTHER], 1)
    legacy = add(w, "legacy unscoped", [], 2)
    w.execute("BEGIN")
    with pytest.raises(DomainError, match="read-only"):
        writable_memory(sqlite_tx(w), shared, policy, policy.select(None))
    assert writable_memory(sqlite_tx(w), legacy, policy, policy.select(None))["id"] == legacy
    w.execute("ROLLBACK")


@pytest.fixture
def one_memory(
    conns: tuple[sqlite3.Connection, sqlite3.Connection],
) -> tuple[sqlite3.Connection, int]:
    """A reader on a store holding one memory, and that memory's id."""
    w, r = conns
    return r, add(w, "alpha beta gamma", [REPO], 1)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(query=st.text(max_size=60))
def test_no_query_text_ever_breaks_fts(
    one_memory: tuple[sqlite3.Connection, int], query: str
) -> None:
    r, stored = one_memory
    assert set(search(r, query)) <= {stored}
    assert set(search(r, query + ' AND "x" NOT (y*) NEAR:z')) <= {stored}
    assert search(r, "gamma " + query) == [stored]  # a stored word still finds it


def test_a_weak_repository_match_still_comes_before_many_strong_global_ones(
    conns: tuple[sqlite3.Connection, sqlite3.Connection],
) -> None:
    w, r = conns
    strong = [add(w, "flaky flaky test", ["global"], i) for i in range(120)]
    weak = add(w, "one flaky thing among many other words in a rather long sentence", [REPO], 500)
    result = search(r, "flaky", limit=3)
    assert result[0] == weak and set(result[1:]) <= set(strong)
    assert search(r, "flaky", memory_type="OBSERVATION", limit=1) == [weak]


def test_words_match_by_stem(conns: tuple[sqlite3.Connection, sqlite3.Connection]) -> None:
    w, r = conns
    charity = add(w, "I volunteered at two charities last month", [REPO], 1)
    camp = add(w, "We camped by the lake near Moab", [REPO], 2)
    kitchen = add(w, "The kitchen tap drips again", [REPO], 3)
    assert search(r, "charity volunteering") == [charity]
    assert search(r, "camping trips") == [camp]
    # Stems, not prefixes: "kits" does not find "kitchen".
    assert kitchen not in search(r, "model kits")


def test_query_words_close_together_rank_first(
    conns: tuple[sqlite3.Connection, sqlite3.Connection],
) -> None:
    """Proximity: "model kits" prefers the memory where the two words are a phrase."""
    w, r = conns
    # The scattered one is shorter, so plain BM25 (no proximity) would rank it first.
    scattered = add(w, "model trains and a first aid kit", [REPO], 1)
    phrase = add(w, "finished two model kits of tanks this week at last", [REPO], 2)
    plain = connections.run_read(
        r,
        lambda c: [
            row[0]
            for row in c.execute(
                "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ? ORDER BY rank",
                ('"model" OR "kits"',),
            )
        ],
    )
    assert plain == [scattered, phrase]
    assert search(r, "model kits") == [phrase, scattered]
    planned = lexical_plan(SqliteFullText(w), "the model kits")
    assert planned is not None
    assert match_expression(planned[0]) == '"model" OR "kits" OR NEAR("model" "kits", 4)'


def test_schema_5_rebuilds_the_index_with_stems(tmp_path: Path) -> None:
    """A version-4 store (unstemmed index) is migrated: old memories match by stem."""
    from memtrio.actors.store.sqlite import schema

    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    for version, script in enumerate(schema.MIGRATIONS[:4]):
        for statement in schema._statements(script):
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {version + 1}")
    conn.execute(
        "INSERT INTO memories (content, memory_type, importance, created_at, updated_at)"
        " VALUES ('two charities and a camping trip', 'fact', 0.5, 1, 1)"
    )
    match = "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?"
    assert conn.execute(match, ('"charity"',)).fetchall() == []
    assert schema.migrate(conn) == schema.LATEST
    assert conn.execute(match, ('"charity"',)).fetchall() == [(1,)]
    assert conn.execute(match, ('"camp"',)).fetchall() == [(1,)]
    conn.execute("INSERT INTO memories_fts (memories_fts, rank) VALUES ('integrity-check', 1)")
    conn.close()
