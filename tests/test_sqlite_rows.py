"""Rows no storage interface writes, and that the reads must still survive: text that is
not UTF-8 (SQLite keeps any bytes in a TEXT column, written by hand or by an older
memtrio), a ``vec`` stored as TEXT, a window under another model's first window. Only
SQLite can hold them (PostgreSQL refuses invalid UTF-8 at write and its ``vec`` is
``bytea``), so these cases run on SQLite only, their rows written in SQLite's own dialect;
the storage contract suite (tests/test_storage_contract_*.py) covers the rows the
interfaces write, on both backends.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import seed
from memtrio.actors.store.direct import Direct
from memtrio.actors.store.interfaces import StoreTx
from memtrio.actors.store.interfaces.snapshot import EntityItem, MemoryItem, TextEnds
from memtrio.actors.store.interfaces.vectors import (
    EntityEmbedding,
    EntityRef,
    EntityText,
    MemoryText,
    RelationText,
    Windows,
)

MODEL, REVISION, DIM = "model-a", "r1", 4
NOW = 1_700_000_000.5


@pytest.fixture
def direct(tmp_path: Path) -> Iterator[Direct]:
    """A fresh SQLite store opened without its actors."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    store = Direct(home / "memtrio.sqlite", None)
    yield store
    store.close()


def _sql(tx: StoreTx, sql: str, *params: Any) -> None:
    """A row no interface writes, in SQLite's dialect."""
    tx.conn.execute(sql, params)


def _vec(*values: float) -> bytes:
    return np.array(values, dtype=np.float32).tobytes()


def _memory(tx: StoreTx, mid: int, content: str) -> None:
    seed.memory(tx, mid, content, created_at=NOW + mid)


def _entity(tx: StoreTx, eid: int, canonical: str) -> None:
    seed.entity(tx, eid, canonical, "entity", canonical=canonical, created_at=NOW)


def _vector(tx: StoreTx, kind: str, item_id: int, vec: bytes) -> None:
    tx.vectors.put(kind, item_id, Windows(MODEL, REVISION, len(vec) // 4, [vec]), replace=True)


def memories(tx: StoreTx, *rows: tuple[int, str]) -> None:
    for i, content in rows:
        seed.memory(tx, i, content)


def entities(tx: StoreTx, *rows: tuple[int, str, str]) -> None:
    for i, name, kind in rows:
        seed.entity(tx, i, name, kind)


def relations(tx: StoreTx, *rows: tuple[int, int, str, int]) -> None:
    for i, source, kind, target in rows:
        seed.relation(tx, i, source, kind, target)


def test_a_window_under_another_models_first_window_is_not_read(direct: Direct) -> None:
    """A later window counts only under a first window (``vectors``) of its own model: one
    left under another model's first (by a model change half done) is never read."""

    def write(tx: StoreTx) -> None:
        _memory(tx, 1, "one")
        _memory(tx, 2, "two")
        _vector(tx, "memory", 1, _vec(1, 0, 0, 0))
        tx.vectors.put(
            "memory", 2, Windows("model-b", REVISION, DIM, [_vec(0, 0, 0, 1)]), replace=True
        )
        _sql(
            tx,
            "INSERT INTO vector_chunks (kind, item_id, chunk, model, revision, dim, vec)"
            " VALUES ('memory', 2, 1, ?, ?, ?, ?)",
            MODEL,
            REVISION,
            DIM,
            _vec(1, 1, 0, 0),
        )

    direct.write(write)
    s = lambda tx: tx.snapshot  # noqa: E731
    assert direct.read(lambda tx: s(tx).vector_count("memory", MODEL, REVISION, DIM)) == 1
    rows = direct.read(lambda tx: list(s(tx).vector_rows("memory", MODEL, REVISION, DIM)))
    assert rows == [(1, _vec(1, 0, 0, 0))]
    windows = direct.read(lambda tx: s(tx).item_windows("memory", [1, 2], MODEL, REVISION, DIM))
    assert windows == {1: [_vec(1, 0, 0, 0)]}


def test_texts_that_are_not_utf8_are_read_with_replacements(direct: Direct) -> None:
    """SQLite keeps any bytes in a TEXT column: the read must not fail on them (PostgreSQL
    refuses them at write, so only the valid texts are read there)."""

    def write(tx: StoreTx) -> None:
        _memory(tx, 1, "placeholder")
        _entity(tx, 10, "placeholder")
        _sql(
            tx,
            "UPDATE memories SET content = CAST(x'ff2032303233' AS TEXT),"
            " memory_type = CAST(x'fe' AS TEXT) WHERE id = 1",
        )
        _sql(tx, "UPDATE entities SET canonical_name = CAST(x'c328' AS TEXT) WHERE id = 10")
        _sql(tx, "INSERT INTO scopes (id, name) VALUES (5, CAST(x'80' AS TEXT))")

    direct.write(write)

    def read(tx: StoreTx) -> dict[str, Any]:
        s = tx.snapshot
        return {
            "memories": list(s.memories(text=True)),
            "some": list(s.memories([1], text=True)),
            "texts": list(s.memory_texts(dated_only=True)),
            "entities": list(s.entities()),
            "scopes": s.scope_ids(),
            "ends": s.text_ends([1], 3),
        }

    got = direct.read(read)
    assert got["memories"] == got["some"] == [MemoryItem(1, "\ufffd", NOW + 1, "\ufffd 2023")]
    assert got["texts"] == [(1, "\ufffd 2023")]
    assert got["entities"] == [EntityItem(10, "\ufffd(")]
    assert got["scopes"] == {"\ufffd": 5}
    assert got["ends"] == [TextEnds(1, 6, "023", "\ufffd 2")]


def test_a_vector_stored_as_text_is_read_as_its_bytes(direct: Direct) -> None:
    """A hand-written ``vec`` of the TEXT type (not even UTF-8) is handed over as bytes,
    for the index to keep or refuse by its length, never a failed read."""
    direct.write(lambda tx: _vector(tx, "memory", 1, _vec(1, 0, 0, 0)))
    direct.write(
        lambda tx: _sql(
            tx, "UPDATE vectors SET vec = CAST(x'ff00ff00000000000000000000000000' AS TEXT)"
        )
    )
    raw = b"\xff\x00\xff\x00" + bytes(12)
    rows = direct.read(lambda tx: list(tx.snapshot.vector_rows("memory", MODEL, REVISION, DIM)))
    assert rows == [(1, raw)]
    windows = direct.read(lambda tx: tx.snapshot.item_windows("memory", [1], MODEL, REVISION, DIM))
    assert windows == {1: [raw]}


def test_texts_and_vectors_that_are_not_utf8_are_read_with_replacements(direct: Direct) -> None:
    """SQLite keeps any bytes in a TEXT column (by hand, an older memtrio): no read of the
    vectors concept may fail on them (PostgreSQL refuses them at write)."""
    bad = "CAST(x'ff80ff80' AS TEXT)"  # 4 bytes, no one of them a UTF-8 character

    def fill(tx: StoreTx) -> None:
        memories(tx, (1, "placeholder"))
        entities(tx, (10, "placeholder", "kind"), (11, "b", "entity"))
        relations(tx, (1, 10, "rel", 11))
        sql = [
            "UPDATE memories SET content = CAST(x'ff2032303233' AS TEXT) WHERE id = 1",
            "UPDATE entities SET name = CAST(x'c328' AS TEXT), kind = CAST(x'fe' AS TEXT),"
            " canonical_name = CAST(x'e282' AS TEXT) WHERE id = 10",
            "UPDATE relations SET relation_type = CAST(x'80' AS TEXT) WHERE id = 1",
            f"INSERT INTO vectors VALUES ('memory', 1, 'm', 'r', 1, {bad})",
            f"INSERT INTO vector_chunks VALUES ('memory', 1, 1, 'm', 'r', 1, {bad})",
            "INSERT INTO entity_embeddings (entity_id, model, dim, vec, updated_at)"
            f" VALUES (10, CAST(x'ff' AS TEXT), 1, {bad}, 0)",
        ]
        for statement in sql:
            _sql(tx, statement)

    direct.write(fill)

    def read(tx: StoreTx) -> dict[str, Any]:
        v = tx.vectors
        return {
            "memories": v.memory_texts([1]),
            "entities": v.entity_texts([10]),
            "relations": v.relation_texts([1]),
            "visible": v.visible_entities([10], None, None),
            "windows": v.windows_of("memory", [1], "m", "r", 1),
            "first": [(w.item_id, w.vec) for w in v.windows_after(None, 5)],
            "chunks": [(w.item_id, w.vec) for w in v.chunks_after(None, 5)],
            "embeddings": v.embeddings_of([10]),
            "scan": v.embeddings_after(0, None, 5),
        }

    got = direct.read(read)
    assert got["memories"] == [MemoryText(1, "\ufffd 2023")]
    assert got["entities"] == [EntityText(10, "\ufffd(", "\ufffd")]
    assert got["relations"] == [RelationText(1, "\ufffd(", "\ufffd", "b")]
    assert got["visible"] == {10: EntityRef(10, "\ufffd(", "\ufffd", "\ufffd")}
    # The ranker's windows are bytes whatever the column holds; the scans (doctor) say
    # what is stored: a text, here with its invalid bytes replaced.
    assert got["windows"] == {1: [b"\xff\x80\xff\x80", b"\xff\x80\xff\x80"]}
    assert got["first"] == got["chunks"] == [(1, "\ufffd" * 4)]
    stored = EntityEmbedding(10, "\ufffd", 1, "\ufffd" * 4)  # type: ignore[arg-type] # as stored
    assert got["embeddings"] == {10: stored} and got["scan"] == [stored]
