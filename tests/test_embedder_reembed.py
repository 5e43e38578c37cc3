"""``memtrio reembed``: fills missing / foreign-model vectors, idempotent, reports failures."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from memtrio.actors.embedder.model import DEFAULT_MODEL_ID
from memtrio.actors.store.sqlite import schema
from memtrio.actors.store.sqlite.db import db_path
from memtrio.supervisors import cli, faults


def make_store(home: Path) -> None:
    conn = sqlite3.connect(str(db_path(home)), isolation_level=None)
    schema.migrate(conn)
    now = time.time()
    for text in (
        "Deploys run from the main branch only.",
        "Staging mirrors production data nightly.",
        "Use feature flags for risky changes.",
    ):
        conn.execute(
            "INSERT INTO memories (content, created_at, updated_at) VALUES (?, ?, ?)",
            (text, now, now),
        )
    for name in ("main-branch", "staging"):
        conn.execute(
            "INSERT INTO entities (name, canonical_name, created_at, updated_at) VALUES (?, ?, ?, ?)",
            (name, name, now, now),
        )
    conn.execute(
        "INSERT INTO relations (source_id, target_id, relation_type, created_at) VALUES (2, 1, 'mirrors', ?)",
        (now,),
    )
    # A vector of another model counts as missing.
    conn.execute("INSERT INTO vectors VALUES ('memory', 1, 'old-model', 'r1', 3, ?)", (b"\0" * 12,))
    conn.close()


def vectors(home: Path) -> list[tuple[str, int, str, int]]:
    conn = sqlite3.connect(str(db_path(home)))
    try:
        return conn.execute(
            "SELECT kind, item_id, model, dim FROM vectors ORDER BY kind, item_id"
        ).fetchall()
    finally:
        conn.close()


@pytest.fixture(autouse=True)
def env(monkeypatch: pytest.MonkeyPatch, home: Path) -> Any:
    monkeypatch.setenv("MEMTRIO_HOME", str(home))
    monkeypatch.setenv("MEMTRIO_EMBEDDINGS", "on")
    monkeypatch.setenv("MEMTRIO_LOG_LEVEL", "off")
    monkeypatch.delenv("MEMTRIO_FAULTS", raising=False)
    yield
    faults.configure(None)


def test_reembed_fills_every_kind_and_is_idempotent(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_store(home)
    assert cli.main(["reembed", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["reembedded"] == {"memory": 3, "entity": 2, "relation": 1} and out["failed"] == []
    rows = vectors(home)
    assert len(rows) == 6 and all(
        model == DEFAULT_MODEL_ID and dim == 384 for _, _, model, dim in rows
    )
    assert cli.main(["reembed"]) == 0
    assert "reembedded 0 memories, 0 entities, 0 relations" in capsys.readouterr().out


def test_reembed_embeds_texts_that_are_not_utf8_instead_of_failing(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """SQLite keeps any bytes in a TEXT column (written by hand, by an older tool): their
    documents are read with the invalid bytes replaced, never a failed run."""
    make_store(home)
    conn = sqlite3.connect(str(db_path(home)), isolation_level=None)
    conn.execute("UPDATE memories SET content = CAST(x'ff2064656c6179' AS TEXT) WHERE id = 2")
    conn.execute("UPDATE entities SET name = CAST(x'c328' AS TEXT) WHERE id = 1")
    conn.close()
    assert cli.main(["reembed", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["reembedded"] == {"memory": 3, "entity": 2, "relation": 1} and out["failed"] == []
    assert len(vectors(home)) == 6


def test_one_failing_record_is_reported_and_the_rest_migrates(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    make_store(home)
    # The first batch fails, then the first record retried alone fails too.
    monkeypatch.setenv("MEMTRIO_FAULTS", "embedder.embed=raise@1,embedder.embed=raise@1")
    assert cli.main(["reembed"]) == 1
    captured = capsys.readouterr()
    assert "failed: memory #1:" in captured.err
    assert "reembedded 2 memories, 2 entities, 1 relation" in captured.out
    monkeypatch.delenv("MEMTRIO_FAULTS")
    assert cli.main(["reembed"]) == 0  # the retry picks up only what is left
    assert "reembedded 1 memory, 0 entities, 0 relations" in capsys.readouterr().out


def test_reembed_refuses_when_disabled_or_the_model_cannot_load(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    make_store(home)
    monkeypatch.setenv("MEMTRIO_EMBEDDINGS", "off")
    assert cli.main(["reembed"]) == 2
    assert "embeddings are disabled" in capsys.readouterr().err
    monkeypatch.setenv("MEMTRIO_EMBEDDINGS", "on")
    monkeypatch.setenv("MEMTRIO_EMBEDDING_MODEL", str(tmp_path / "missing"))
    assert cli.main(["reembed"]) == 2
    assert "cannot load" in capsys.readouterr().err
    assert len(vectors(home)) == 1  # untouched


def test_a_v3_store_upgrades_and_reembed_stores_every_window_of_long_memories(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before schema v4 a long memory's vector covered its first window only: the
    migration drops it (short memories keep theirs) and reembed stores all windows."""
    from memtrio.actors.embedder.model import resolve_spec

    conn = sqlite3.connect(str(db_path(home)), isolation_level=None)
    for script in schema.MIGRATIONS[:3]:
        for statement in schema._statements(script):
            conn.execute(statement)
    conn.execute("PRAGMA user_version = 3")
    now = time.time()
    long_text = "Notes from the weekly sync about the release train and its many steps. " * 40
    for text in ("A short memory keeps its vector.", long_text):
        conn.execute(
            "INSERT INTO memories (content, created_at, updated_at) VALUES (?, ?, ?)",
            (text, now, now),
        )
    revision = resolve_spec("", 256).revision
    for item in (1, 2):
        conn.execute(
            "INSERT INTO vectors VALUES ('memory', ?, ?, ?, 384, ?)",
            (item, DEFAULT_MODEL_ID, revision, b"\0" * 1536),
        )
    conn.close()
    assert cli.main(["reembed", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["stale_before"]["memory"] == 1 and out["reembedded"]["memory"] == 1
    conn = sqlite3.connect(str(db_path(home)))
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.LATEST
        chunks = conn.execute(
            "SELECT item_id, count(*), min(model), min(length(vec)) FROM vector_chunks GROUP BY item_id"
        ).fetchall()
        first = conn.execute(
            "SELECT item_id, vec FROM vectors WHERE kind = 'memory' ORDER BY item_id"
        ).fetchall()
    finally:
        conn.close()
    # About 600 word pieces: several windows (chunk 0 + chunks 1, 2, ...), for the long one only.
    assert len(chunks) == 1 and chunks[0][0] == 2 and chunks[0][1] >= 2
    assert chunks[0][2:] == (DEFAULT_MODEL_ID, 1536)
    assert first[0] == (1, b"\0" * 1536) and first[1][1] != b"\0" * 1536
    assert cli.main(["reembed"]) == 0  # idempotent
    assert "reembedded 0 memories" in capsys.readouterr().out
