"""The storage contract of `interfaces.vectors.Vectors`, on SQLite and on PostgreSQL.

Every method is driven directly (`direct.Direct`, the ``direct`` fixture), with the edge
cases a backend gets wrong: more ids than SQLite binds in one statement, empty id lists,
missing rows, kept vs replaced window sets, the order of a scan, exact entity types, text
with quotes, ``%`` and ``_``, and the scope filter.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest
import seed
from memtrio.actors.store.direct import Direct
from memtrio.actors.store.interfaces import StoreTx
from memtrio.actors.store.interfaces.vectors import (
    EntityEmbedding,
    EntityRef,
    EntityText,
    MemoryText,
    RelationText,
    Windows,
)

MANY = 1_203  # over SQLite's bound parameter chunk (500) twice, and not a multiple of it


def f32(*values: float) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def entities(tx: StoreTx, *rows: tuple[int, str, str]) -> None:
    """Rows of another concept (setup, through the import interface: `seed`)."""
    for i, name, kind in rows:
        seed.entity(tx, i, name, kind)


def memories(tx: StoreTx, *rows: tuple[int, str]) -> None:
    for i, content in rows:
        seed.memory(tx, i, content)


def relations(tx: StoreTx, *rows: tuple[int, int, str, int]) -> None:
    for i, source, kind, target in rows:
        seed.relation(tx, i, source, kind, target)


def scoped(tx: StoreTx) -> None:
    """Scopes 1 (repo) and 2 (other); entity 1 in repo, 2 in other, 3 in none; relation
    1 (1->3) in repo, 2 (2->3) in other, 3 (3->1) in none."""
    assert (seed.scope(tx, "repo"), seed.scope(tx, "other")) == (1, 2)
    seed.entity(tx, 1, "Mine", "tool", scopes=["repo"])
    seed.entity(tx, 2, "Theirs", "tool", scopes=["other"])
    seed.entity(tx, 3, "Free", "Tool")
    seed.relation(tx, 1, 1, "uses", 3, scopes=["repo"])
    seed.relation(tx, 2, 2, "uses", 3, scopes=["other"])
    seed.relation(tx, 3, 3, "uses", 1)


# -- the local model's windows -------------------------------------------------------------


def test_put_stores_every_window_in_order_and_windows_of_reads_them_back(direct: Direct) -> None:
    three = Windows("m", "r1", 2, [f32(1, 0), f32(0, 1), f32(0.5, 0.5)])
    assert direct.write(lambda tx: tx.vectors.put("memory", 7, three, replace=True))
    got = direct.read(lambda tx: tx.vectors.windows_of("memory", [7, 8], "m", "r1", 2))
    assert got == {7: [f32(1, 0), f32(0, 1), f32(0.5, 0.5)]}


def test_windows_of_needs_the_same_model_revision_and_dimension(direct: Direct) -> None:
    direct.write(
        lambda tx: tx.vectors.put("entity", 1, Windows("m", "r", 1, [f32(1)]), replace=True)
    )
    read = lambda m, r, d: direct.read(lambda tx: tx.vectors.windows_of("entity", [1], m, r, d))  # noqa: E731
    assert read("m", "r", 1) == {1: [f32(1)]}
    assert read("M", "r", 1) == {} and read("m", "r2", 1) == {} and read("m", "r", 2) == {}
    assert direct.read(lambda tx: tx.vectors.windows_of("memory", [1], "m", "r", 1)) == {}
    assert direct.read(lambda tx: tx.vectors.windows_of("entity", [], "m", "r", 1)) == {}


def test_a_replaced_set_loses_its_old_extra_windows(direct: Direct) -> None:
    direct.write(
        lambda tx: tx.vectors.put(
            "relation", 3, Windows("m", "r", 1, [f32(1), f32(2), f32(3)]), replace=True
        )
    )
    direct.write(
        lambda tx: tx.vectors.put("relation", 3, Windows("m", "r", 1, [f32(9)]), replace=True)
    )
    assert direct.read(lambda tx: tx.vectors.windows_of("relation", [3], "m", "r", 1)) == {
        3: [f32(9)]
    }


def test_put_without_replace_keeps_a_set_of_the_same_model_and_replaces_another(
    direct: Direct,
) -> None:
    old = Windows("m", "r", 1, [f32(1), f32(2)])
    assert direct.write(lambda tx: tx.vectors.put("memory", 1, old, replace=False))
    same = Windows("m", "r", 1, [f32(5)])
    assert not direct.write(lambda tx: tx.vectors.put("memory", 1, same, replace=False))
    assert direct.read(lambda tx: tx.vectors.windows_of("memory", [1], "m", "r", 1)) == {
        1: [f32(1), f32(2)]
    }
    newer = Windows("m", "r2", 1, [f32(7)])
    assert direct.write(lambda tx: tx.vectors.put("memory", 1, newer, replace=False))
    assert direct.read(lambda tx: tx.vectors.windows_of("memory", [1], "m", "r2", 1)) == {
        1: [f32(7)]
    }
    assert direct.read(lambda tx: tx.vectors.windows_of("memory", [1], "m", "r", 1)) == {}


def test_drop_deletes_the_whole_set_and_a_missing_one_is_no_error(direct: Direct) -> None:
    direct.write(
        lambda tx: tx.vectors.put("entity", 2, Windows("m", "r", 1, [f32(1), f32(2)]), replace=True)
    )
    direct.write(lambda tx: tx.vectors.drop("entity", 2))
    direct.write(lambda tx: tx.vectors.drop("entity", 99))
    assert direct.read(lambda tx: tx.vectors.windows_of("entity", [2], "m", "r", 1)) == {}
    assert direct.read(lambda tx: tx.vectors.chunks_after(None, 10)) == []


def test_windows_of_reads_more_ids_than_one_statement_binds(direct: Direct) -> None:
    def fill(tx: StoreTx) -> None:
        for i in range(1, MANY + 1):
            tx.vectors.put(
                "memory",
                i,
                Windows("m", "r", 1, [f32(i), f32(-i)] if i % 2 else [f32(i)]),
                replace=True,
            )

    direct.write(fill)
    got = direct.read(
        lambda tx: tx.vectors.windows_of("memory", list(range(MANY + 5)), "m", "r", 1)
    )
    assert len(got) == MANY
    assert got[MANY] == [f32(MANY), f32(-MANY)] and got[2] == [f32(2)]


def test_lacking_and_count_lacking_find_the_items_without_a_current_vector(direct: Direct) -> None:
    def fill(tx: StoreTx) -> None:
        memories(tx, *[(i, f"memory {i}") for i in range(1, 8)])
        tx.vectors.put("memory", 2, Windows("m", "r", 1, [f32(1)]), replace=True)
        tx.vectors.put("memory", 4, Windows("m", "old", 1, [f32(1)]), replace=True)
        tx.vectors.put("entity", 5, Windows("m", "r", 1, [f32(1)]), replace=True)

    direct.write(fill)
    assert direct.read(lambda tx: tx.vectors.lacking("memory", "m", "r", 0, 100)) == [
        1,
        3,
        4,
        5,
        6,
        7,
    ]
    assert direct.read(lambda tx: tx.vectors.lacking("memory", "m", "r", 3, 2)) == [4, 5]
    assert direct.read(lambda tx: tx.vectors.lacking("memory", "m", "r", 7, 2)) == []
    assert direct.read(lambda tx: tx.vectors.count_lacking("memory", "m", "r")) == 6
    assert direct.read(lambda tx: tx.vectors.count_lacking("entity", "m", "r")) == 0
    assert direct.read(lambda tx: tx.vectors.count_lacking("relation", "m", "r")) == 0
    with pytest.raises(ValueError, match="kind"):
        direct.read(lambda tx: tx.vectors.lacking("memories; --", "m", "r", 0, 1))


def test_existing_and_the_texts_of_items_that_still_exist(direct: Direct) -> None:
    odd = 'it\'s 100% a_b "quoted" ünïcode 🙂'

    def fill(tx: StoreTx) -> None:
        memories(tx, (2, odd), (1, "plain"))
        entities(tx, (1, "Ada", "person"), (2, "50%_off", "entity"))
        relations(tx, (1, 1, "works_with", 2))

    direct.write(fill)
    assert direct.read(lambda tx: tx.vectors.existing("memory", [1, 2, 3])) == {1, 2}
    assert direct.read(lambda tx: tx.vectors.existing("relation", [])) == set()
    assert direct.read(lambda tx: tx.vectors.existing("entity", list(range(MANY)))) == {1, 2}
    assert direct.read(lambda tx: tx.vectors.memory_texts([2, 1, 9])) == [
        MemoryText(1, "plain"),
        MemoryText(2, odd),
    ]
    assert direct.read(lambda tx: tx.vectors.entity_texts([2, 1])) == [
        EntityText(1, "Ada", "person"),
        EntityText(2, "50%_off", "entity"),
    ]
    assert direct.read(lambda tx: tx.vectors.relation_texts([1, 5])) == [
        RelationText(1, "Ada", "works_with", "50%_off")
    ]
    assert direct.read(lambda tx: tx.vectors.memory_texts([])) == []


def test_windows_after_and_chunks_after_scan_the_tables_in_key_order(direct: Direct) -> None:
    def fill(tx: StoreTx) -> None:
        tx.vectors.put("relation", 1, Windows("m", "r", 1, [f32(1)]), replace=True)
        tx.vectors.put("entity", 2, Windows("m", "r", 1, [f32(1), f32(2), f32(3)]), replace=True)
        tx.vectors.put("entity", 1, Windows("m", "r", 1, [f32(1), f32(2)]), replace=True)

    direct.write(fill)
    first = direct.read(lambda tx: tx.vectors.windows_after(None, 2))
    assert [(w.kind, w.item_id, w.chunk) for w in first] == [("entity", 1, 0), ("entity", 2, 0)]
    rest = direct.read(lambda tx: tx.vectors.windows_after(("entity", 2), 10))
    assert [(w.kind, w.item_id, w.dim, w.vec) for w in rest] == [("relation", 1, 1, f32(1))]
    chunks = direct.read(lambda tx: tx.vectors.chunks_after(None, 10))
    assert [(w.kind, w.item_id, w.chunk, w.vec) for w in chunks] == [
        ("entity", 1, 1, f32(2)),
        ("entity", 2, 1, f32(2)),
        ("entity", 2, 2, f32(3)),
    ]
    assert direct.read(lambda tx: tx.vectors.chunks_after(("entity", 2, 1), 10))[0].chunk == 2


# -- the clients' entity embeddings ----------------------------------------------------------


def test_put_embedding_says_whether_the_entity_had_none_and_replaces(direct: Direct) -> None:
    direct.write(lambda tx: entities(tx, (1, "Ada", "person")))
    assert direct.write(lambda tx: tx.embeddings.put_embedding(1, "", 2, f32(1, 2), 1.0))
    assert not direct.write(lambda tx: tx.embeddings.put_embedding(1, "m'%_", 2, f32(3, 4), 2.0))
    assert direct.read(lambda tx: tx.embeddings.embeddings_of([1, 2])) == {
        1: EntityEmbedding(1, "m'%_", 2, f32(3, 4))
    }
    assert direct.write(lambda tx: tx.embeddings.delete_embedding(1))
    assert not direct.write(lambda tx: tx.embeddings.delete_embedding(1))
    assert direct.read(lambda tx: tx.embeddings.embeddings_of([1])) == {}
    assert direct.read(lambda tx: tx.embeddings.embeddings_of([])) == {}


def test_embeddings_of_many_ids_and_the_scan_by_dimension(direct: Direct) -> None:
    def fill(tx: StoreTx) -> None:
        for i in range(1, MANY + 1):
            tx.embeddings.put_embedding(
                i, "", 1 if i % 3 else 2, f32(i) if i % 3 else f32(i, i), 0.0
            )

    direct.write(fill)
    assert len(direct.read(lambda tx: tx.embeddings.embeddings_of(list(range(MANY + 10))))) == MANY
    ones = direct.read(lambda tx: tx.embeddings.embeddings_after(-1, 1, 5))
    assert [e.entity_id for e in ones] == [1, 2, 4, 5, 7]
    later = direct.read(lambda tx: tx.embeddings.embeddings_after(5, None, 3))
    assert [(e.entity_id, e.dim) for e in later] == [(6, 2), (7, 1), (8, 1)]
    assert direct.read(lambda tx: tx.embeddings.embeddings_after(MANY, None, 3)) == []
    twos = MANY // 3
    assert direct.read(lambda tx: tx.embeddings.embedding_counts(1)) == (MANY - twos, twos)
    assert direct.read(lambda tx: tx.embeddings.embedding_counts(7)) == (0, MANY)


# -- the entities the vector tools read -------------------------------------------------------


def test_visible_entities_follow_the_scopes_and_the_exact_type(direct: Direct) -> None:
    direct.write(scoped)
    everything = direct.read(lambda tx: tx.embeddings.visible_entities([1, 2, 3, 4], None, None))
    assert everything == {
        1: EntityRef(1, "Mine", "tool", "mine"),
        2: EntityRef(2, "Theirs", "tool", "theirs"),
        3: EntityRef(3, "Free", "Tool", "free"),
    }
    repo = direct.read(lambda tx: tx.embeddings.visible_entities([1, 2, 3], [1], None))
    assert sorted(repo) == [1, 3]
    assert sorted(direct.read(lambda tx: tx.embeddings.visible_entities([1, 2, 3], [], None))) == [
        3
    ]
    typed = direct.read(lambda tx: tx.embeddings.visible_entities([1, 2, 3], None, "tool"))
    assert sorted(typed) == [1, 2]  # types compare exactly: "Tool" is another type
    assert direct.read(lambda tx: tx.embeddings.visible_entities([], None, None)) == {}


def test_embedded_entities_and_count_embedded_see_only_visible_ones_of_the_dimension(
    direct: Direct,
) -> None:
    def fill(tx: StoreTx) -> None:
        scoped(tx)
        tx.embeddings.put_embedding(1, "", 2, f32(1, 0), 0.0)
        tx.embeddings.put_embedding(2, "", 2, f32(0, 1), 0.0)
        tx.embeddings.put_embedding(3, "", 3, f32(0, 1, 0), 0.0)

    direct.write(fill)
    assert direct.read(lambda tx: tx.embeddings.embedded_entities(2, None, None)) == {1, 2}
    assert direct.read(lambda tx: tx.embeddings.embedded_entities(2, [1], None)) == {1}
    assert direct.read(lambda tx: tx.embeddings.embedded_entities(3, [1], "Tool")) == {3}
    assert direct.read(lambda tx: tx.embeddings.embedded_entities(3, [1], "tool")) == set()
    assert direct.read(lambda tx: tx.embeddings.count_embedded(2, None)) == 2
    assert direct.read(lambda tx: tx.embeddings.count_embedded(2, [2])) == 1
    assert direct.read(lambda tx: tx.embeddings.count_embedded(2, [])) == 0


def test_relation_ends_of_the_visible_relations(direct: Direct) -> None:
    direct.write(scoped)
    assert sorted(direct.read(lambda tx: tx.embeddings.relation_ends(None))) == [
        (1, 3),
        (2, 3),
        (3, 1),
    ]
    assert sorted(direct.read(lambda tx: tx.embeddings.relation_ends([1]))) == [(1, 3), (3, 1)]
    assert direct.read(lambda tx: tx.embeddings.relation_ends([])) == [(3, 1)]


def test_deleting_an_item_deletes_its_vectors_and_embedding(direct: Direct) -> None:
    def fill(tx: StoreTx) -> None:
        entities(tx, (1, "Ada", "person"))
        tx.vectors.put("entity", 1, Windows("m", "r", 1, [f32(1), f32(2)]), replace=True)
        tx.embeddings.put_embedding(1, "", 1, f32(1), 0.0)

    direct.write(fill)
    direct.write(lambda tx: tx.graph_writes.delete_entity(1))
    assert direct.read(lambda tx: tx.vectors.windows_of("entity", [1], "m", "r", 1)) == {}
    assert direct.read(lambda tx: tx.vectors.chunks_after(None, 5)) == []
    assert direct.read(lambda tx: tx.embeddings.embeddings_of([1])) == {}


# -- the boundary ------------------------------------------------------------------------------

FEATURE_DIRS = ("actors/vectors", "actors/embedder")
FORBIDDEN = re.compile(
    r"import sqlite3|\bpsycopg\b|\.execute(many)?\(|\bread_conn\b|\bwrite_conn\b"
    r"|\bis_postgres\b|\burl is None\b"
)


def test_the_vector_features_write_no_sql_and_ask_no_backend() -> None:
    """The vector tools and the embedder reach stored vectors through `tx.vectors` only."""
    root = Path(__file__).resolve().parent.parent
    found = [
        f"{path.relative_to(root)}:{n}: {line.strip()}"
        for folder in FEATURE_DIRS
        for path in sorted((root / folder).glob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), start=1)
        if FORBIDDEN.search(line)
    ]
    assert found == []
