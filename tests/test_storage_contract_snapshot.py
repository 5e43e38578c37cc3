"""The storage contract of `interfaces.snapshot.Snapshot` (the ranker's bulk reads), on
SQLite and on PostgreSQL (the ``direct`` fixture): every method, with the edge cases a
backend gets wrong (unicode, quotes, ``%`` and ``_`` in text, missing rows, empty lists,
id lists longer than SQLite's parameter limit, ties, a year in the text or not).

The rows are written through the other concepts' interfaces (`seed`: setup only, the
methods under test read them); rows no interface writes (text that is not UTF-8, a window
under another model's first) are tests/test_sqlite_rows.py's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import seed
from memtrio.actors.store.backend import Capability
from memtrio.actors.store.direct import Direct
from memtrio.actors.store.interfaces import StoreTx
from memtrio.actors.store.interfaces.recall_log import RecallEntry
from memtrio.actors.store.interfaces.snapshot import (
    EntityItem,
    MemoryItem,
    RelationItem,
    TextEnds,
)
from memtrio.actors.store.interfaces.vectors import Windows

MODEL, REVISION = "model-a", "r1"
DIM = 4
MANY = 40_000  # ids in one argument: more than SQLite's 32,766 parameters
NOW = 1_700_000_000.5


def _below_the_interfaces(tx: StoreTx, sql: str, *params: Any) -> None:
    """A write straight to a table a cache reads, as a hand or an older memtrio would make
    it (the change mark's triggers must see it): ``sql`` written with ``?``, run in the
    backend's own placeholder. The only SQL of this file; the setup goes through the
    interfaces (`seed`)."""
    if tx.backend == "postgresql":
        tx.conn.native(sql.replace("?", "%s"), params)
    else:
        tx.conn.execute(sql, params)


def _vec(*values: float) -> bytes:
    return np.array(values, dtype=np.float32).tobytes()


def _memory(tx: StoreTx, mid: int, content: str, memory_type: str = "observation") -> None:
    seed.memory(tx, mid, content, memory_type, created_at=NOW + mid)


def _entity(tx: StoreTx, eid: int, canonical: str) -> None:
    seed.entity(tx, eid, canonical, "entity", canonical=canonical, created_at=NOW)


def _relation(tx: StoreTx, rid: int, source: int, target: int, kind: str = "uses") -> None:
    seed.relation(tx, rid, source, kind, target, created_at=NOW)


def _vectors_of(tx: StoreTx, kind: str, item_id: int, *windows: bytes, model: str = MODEL) -> None:
    """The windows of one item (the first in ``vectors``, the others in ``vector_chunks``)."""
    dim = len(windows[0]) // 4
    tx.vectors.put(kind, item_id, Windows(model, REVISION, dim, list(windows)), replace=True)


def _graph(tx: StoreTx) -> None:
    """Memories 1-4, entities 10-13, relations 20-22, scopes 1-3, their links."""
    names = ["global", "it's a 100%_repo ✓", "Global"]  # "Global": a scope of its own
    assert [seed.scope(tx, name) for name in names] == [1, 2, 3]
    _memory(tx, 1, "Alice's 50%_off deal, 4 May 2023 ✓")
    _memory(tx, 2, 'a "quoted" note', "Decision")
    _memory(tx, 3, "ümlaut and ٢٠٢٣ (Arabic-Indic digits are no year)")
    _memory(tx, 4, "build1234x")
    for e, name in ((10, "alice"), (11, "Alice"), (12, "o'brien_%"), (13, "hub")):
        _entity(tx, e, name)
    _relation(tx, 20, 10, 11)
    _relation(tx, 21, 12, 10, "knows")
    _relation(tx, 22, 13, 13, "self")  # both ends the same entity
    for m, s in ((1, 1), (1, 2), (2, 2), (3, 3)):
        tx.imports.link_scopes("memory", m, [names[s - 1]])
    for e, s in ((10, 1), (11, 2), (12, 1), (12, 2)):
        tx.imports.link_scopes("entity", e, [names[s - 1]])
    tx.imports.link_scopes("relation", 20, [names[0]])
    for m, e in ((1, 10), (1, 11), (2, 10), (3, 13), (4, 13), (2, 13), (1, 13)):
        seed.mentions(tx, m, entities=[e])
    for m, r in ((1, 20), (2, 21), (3, 20)):
        seed.mentions(tx, m, relations=[r])


@pytest.fixture
def graph(direct: Direct) -> Direct:
    direct.write(_graph)
    return direct


def _change_mark(direct: Direct) -> int:
    value = direct.read(lambda tx: tx.snapshot.change_mark())
    assert isinstance(value, int)
    return value


# One write to each table an in-memory cache reads, on the `graph` fixture's rows
# (statements in order: each leaves the rows the next one needs).
CACHED_WRITES = [
    ("memory inserted", "INSERT INTO memories (id, content, memory_type, created_at, updated_at)"
     " VALUES (5, 'new', 'note', 1, 1)"),
    ("memory text", "UPDATE memories SET content = 'changed' WHERE id = 1"),
    ("memory type", "UPDATE memories SET memory_type = 'decision' WHERE id = 1"),
    ("memory time", "UPDATE memories SET created_at = 7 WHERE id = 1"),
    ("memory scope", "DELETE FROM memory_scopes WHERE memory_id = 3"),
    ("memory deleted", "DELETE FROM memories WHERE id = 4"),
    ("entity renamed", "UPDATE entities SET name = 'hub2', canonical_name = 'hub2' WHERE id = 13"),
    ("entity type", "UPDATE entities SET kind = 'service' WHERE id = 13"),
    ("entity scope", "INSERT INTO entity_scopes (entity_id, scope_id) VALUES (13, 1)"),
    ("mention", "DELETE FROM memory_entities WHERE memory_id = 1 AND entity_id = 13"),
    ("relation", "INSERT INTO relations (id, source_id, target_id, relation_type, created_at)"
     " VALUES (23, 10, 12, 'likes', 1)"),
    ("relation scope", "INSERT INTO relation_scopes (relation_id, scope_id) VALUES (23, 1)"),
    ("memory relation", "INSERT INTO memory_relations (memory_id, relation_id) VALUES (2, 23)"),
    ("relation deleted", "DELETE FROM relations WHERE id = 21"),
    ("scope", "INSERT INTO scopes (id, name) VALUES (8, 'repo:/x')"),
    ("vector", "INSERT INTO vectors (kind, item_id, model, revision, dim, vec)"
     " VALUES ('memory', 2, 'm', 'r', 1, ?)"),
    ("vector replaced", "UPDATE vectors SET model = 'm2' WHERE item_id = 2"),
    ("chunk", "INSERT INTO vector_chunks (kind, item_id, chunk, model, revision, dim, vec)"
     " VALUES ('memory', 2, 1, 'm2', 'r', 1, ?)"),
    ("embedding", "INSERT INTO entity_embeddings (entity_id, model, dim, vec, updated_at)"
     " VALUES (10, '', 1, ?, 1)"),
    ("embedding deleted", "DELETE FROM entity_embeddings WHERE entity_id = 10"),
    ("entity deleted", "DELETE FROM entities WHERE id = 12"),
]  # fmt: skip


def test_the_change_mark_moves_on_every_write_a_cache_reads(graph: Direct) -> None:
    for what, sql in CACHED_WRITES:
        before = _change_mark(graph)
        params = (_vec(1.0),) if "?" in sql else ()
        graph.write(lambda tx, sql=sql, params=params: _below_the_interfaces(tx, sql, *params))
        assert _change_mark(graph) > before, what


def test_a_delete_then_an_insert_moves_the_change_mark_though_the_counts_stay(
    graph: Direct,
) -> None:
    # The bug of issue #37 (3): forget a memory, then remember one. Row counts are what
    # they were; the mark says something changed, and by how many writes.
    def counts(tx: StoreTx) -> tuple[int, int, int]:
        c = tx.upkeep.counts()
        return (c.memories, c.entities, c.edges)

    before_counts, before = graph.read(counts), _change_mark(graph)
    graph.write(lambda tx: tx.memories.delete(4))
    deleted = _change_mark(graph)
    graph.write(lambda tx: _memory(tx, tx.marks.next_id("memories"), "The zebra migration"))
    assert graph.read(counts) == before_counts
    assert before < deleted < _change_mark(graph)


def test_writes_no_cache_reads_leave_the_change_mark(graph: Direct) -> None:
    # Every recall writes the recall log and counts accesses: that must not make every
    # other process reload its caches.
    before = _change_mark(graph)
    entry = RecallEntry(ts=5.0, kind="recall", query="q", scopes="[]", ids="[1]", scores="[0.5]")

    def recall(tx: StoreTx) -> None:
        tx.recall_log.count_access(1, 5.0)
        tx.recall_log.append(entry)

    graph.write(recall)
    assert _change_mark(graph) == before


def test_only_a_local_store_lets_a_reader_keep_the_whole_graph(direct: Direct) -> None:
    # SQLite: the ranker keeps the graph; PostgreSQL: it reads the seeds' neighbourhood.
    assert direct.read(lambda tx: tx.snapshot.keeps_graph()) is direct.backend.has(
        Capability.WHOLE_GRAPH_READS
    )


def test_scope_ids_by_exact_name(graph: Direct) -> None:
    assert graph.read(lambda tx: tx.snapshot.scope_ids()) == {
        "global": 1,
        "it's a 100%_repo ✓": 2,
        "Global": 3,
    }


def test_item_scopes_every_item_or_those_asked_for(graph: Direct) -> None:
    def read(tx: StoreTx) -> dict[str, Any]:
        s = tx.snapshot
        return {
            "memory": sorted(s.item_scopes("memory")),
            "entity": sorted(s.item_scopes("entity")),
            "relation": sorted(s.item_scopes("relation")),
            "some": sorted(s.item_scopes("entity", [12, 999])),
            "none": list(s.item_scopes("memory", [])),
            "many": sorted(s.item_scopes("memory", list(range(MANY, 0, -1)))),
        }

    got = graph.read(read)
    assert got["memory"] == [(1, 1), (1, 2), (2, 2), (3, 3)]
    assert got["entity"] == [(10, 1), (11, 2), (12, 1), (12, 2)]
    assert got["relation"] == [(20, 1)]
    assert got["some"] == [(12, 1), (12, 2)]
    assert got["none"] == []
    assert got["many"] == got["memory"]


def test_memories_with_and_without_their_text(graph: Direct) -> None:
    def read(tx: StoreTx) -> dict[str, Any]:
        s = tx.snapshot
        return {
            "all": sorted(s.memories(), key=lambda m: m.id),
            "text": sorted(s.memories([2, 1, 77], text=True), key=lambda m: m.id),
            "none": list(s.memories([])),
            "many": sorted(m.id for m in s.memories(list(range(1, MANY)))),
        }

    got = graph.read(read)
    assert got["all"][1] == MemoryItem(2, "Decision", NOW + 2, None)
    assert [m.id for m in got["all"]] == [1, 2, 3, 4]
    assert all(m.content is None for m in got["all"])
    assert got["text"] == [
        MemoryItem(1, "observation", NOW + 1, "Alice's 50%_off deal, 4 May 2023 ✓"),
        MemoryItem(2, "Decision", NOW + 2, 'a "quoted" note'),
    ]
    assert got["none"] == []
    assert got["many"] == [1, 2, 3, 4]


def test_memory_texts_dated_only_keeps_the_texts_with_four_ascii_digits(graph: Direct) -> None:
    every = graph.read(lambda tx: sorted(tx.snapshot.memory_texts()))
    assert [i for i, _ in every] == [1, 2, 3, 4]
    assert every[0] == (1, "Alice's 50%_off deal, 4 May 2023 ✓")
    dated = graph.read(lambda tx: sorted(i for i, _ in tx.snapshot.memory_texts(dated_only=True)))
    # The same rule on both backends (the PostgreSQL store once failed on SQLite's GLOB).
    assert dated == [1, 4]


def test_entities_by_exact_canonical_name(graph: Direct) -> None:
    got = graph.read(lambda tx: sorted(tx.snapshot.entities(), key=lambda e: e.id))
    assert got == [
        EntityItem(10, "alice"),
        EntityItem(11, "Alice"),
        EntityItem(12, "o'brien_%"),
        EntityItem(13, "hub"),
    ]
    some = graph.read(lambda tx: sorted(e.id for e in tx.snapshot.entities([13, 11, 5])))
    assert some == [11, 13]
    assert graph.read(lambda tx: list(tx.snapshot.entities([]))) == []
    many = graph.read(lambda tx: sorted(e.id for e in tx.snapshot.entities(list(range(MANY)))))
    assert many == [10, 11, 12, 13]


def test_relations_by_id_or_touching_entities_each_once(graph: Direct) -> None:
    def read(tx: StoreTx) -> dict[str, Any]:
        s = tx.snapshot
        return {
            "all": sorted(s.relations(), key=lambda r: r.id),
            "ids": sorted(r.id for r in s.relations([21, 99])),
            "touching": sorted(r.id for r in s.relations(touching=[10])),
            "self": [r.id for r in s.relations(touching=[13])],
            # ends far apart in a long list: still once each
            "far": sorted(r.id for r in s.relations(touching=[11, *range(100, 2_000), 12, 10, 13])),
            "empty": list(s.relations([])) + list(s.relations(touching=[])),
        }

    got = graph.read(read)
    assert got["all"] == [
        RelationItem(20, 10, 11),
        RelationItem(21, 12, 10),
        RelationItem(22, 13, 13),
    ]
    assert got["ids"] == [21]
    assert got["touching"] == [20, 21]
    assert got["self"] == [22]
    assert got["far"] == [20, 21, 22]
    assert got["empty"] == []


def test_links_of_memories_of_items_and_between_them(graph: Direct) -> None:
    def read(tx: StoreTx) -> dict[str, Any]:
        s = tx.snapshot
        return {
            "me": sorted(s.memory_entities()),
            "mr": sorted(s.memory_relations()),
            "of_memories": sorted(s.memory_entities(memories=[2, 4])),
            "of_entities": sorted(s.memory_entities(entities=[10])),
            "between": sorted(s.memory_entities([1, 2], [10, 12, 13])),
            "between_many": sorted(s.memory_entities(list(range(1, MANY)), list(range(MANY)))),
            "of_relations": sorted(s.memory_relations(relations=[20])),
            "mr_between": sorted(s.memory_relations([1, 2], [21])),
            "empty": [
                *s.memory_entities(memories=[]),
                *s.memory_entities([1], []),
                *s.memory_relations([], [20]),
            ],
        }

    got = graph.read(read)
    assert got["me"] == [(1, 10), (1, 11), (1, 13), (2, 10), (2, 13), (3, 13), (4, 13)]
    assert got["mr"] == [(1, 20), (2, 21), (3, 20)]
    assert got["of_memories"] == [(2, 10), (2, 13), (4, 13)]
    assert got["of_entities"] == [(1, 10), (2, 10)]
    assert got["between"] == [(1, 10), (1, 13), (2, 10), (2, 13)]
    assert got["between_many"] == got["me"]
    assert got["of_relations"] == [(1, 20), (3, 20)]
    assert got["mr_between"] == [(2, 21)]
    assert got["empty"] == []


def test_peers_give_each_item_its_first_peers_by_id(graph: Direct) -> None:
    def read(tx: StoreTx) -> dict[str, Any]:
        s = tx.snapshot
        return {
            "m-e": sorted(s.peers("memory", [1, 3, 99], "entity", 10)),
            "m-e capped": sorted(s.peers("memory", [1], "entity", 2)),
            "m-r": sorted(s.peers("memory", [1, 2], "relation", 10)),
            "e-m capped": sorted(s.peers("entity", [13, 10], "memory", 2)),
            "e-r": sorted(s.peers("entity", [10, 13], "relation", 10)),
            "e-r capped": sorted(s.peers("entity", [10], "relation", 1)),
            "r-m": sorted(s.peers("relation", [20, 21, 22], "memory", 10)),
            "empty": s.peers("memory", [], "entity", 10),
            "many": sorted(s.peers("entity", list(range(MANY)), "memory", 1)),
        }

    got = graph.read(read)
    assert got["m-e"] == [(1, 10), (1, 11), (1, 13), (3, 13)]
    assert got["m-e capped"] == [(1, 10), (1, 11)]
    assert got["m-r"] == [(1, 20), (2, 21)]
    assert got["e-m capped"] == [(10, 1), (10, 2), (13, 1), (13, 2)]  # the hub: its first two
    assert got["e-r"] == [(10, 20), (10, 21), (13, 22)]  # as source or target, each once
    assert got["e-r capped"] == [(10, 20)]
    assert got["r-m"] == [(20, 1), (20, 3), (21, 2)]
    assert got["empty"] == []
    assert got["many"] == [(10, 1), (11, 1), (13, 1)]


def _vectors(tx: StoreTx) -> None:
    _vectors_of(tx, "memory", 1, _vec(1, 0, 0, 0), _vec(0, 1, 0, 0), _vec(0, 0, 1, 0))
    _vectors_of(tx, "memory", 2, _vec(0, 0, 0, 1), model="model-b")
    _vectors_of(tx, "memory", 3, _vec(1, 2))  # another dimension
    _vectors_of(tx, "entity", 10, _vec(0.5, 0.5, 0.5, 0.5))


def test_vector_rows_are_every_window_under_a_chunk_zero_of_the_model(graph: Direct) -> None:
    graph.write(_vectors)

    def read(tx: StoreTx) -> dict[str, Any]:
        s = tx.snapshot
        return {
            "count": s.vector_count("memory", MODEL, REVISION, DIM),
            "rows": sorted(s.vector_rows("memory", MODEL, REVISION, DIM)),
            "entity": list(s.vector_rows("entity", MODEL, REVISION, DIM)),
            "other": s.vector_count("relation", MODEL, REVISION, DIM),
            "dim2": s.vector_count("memory", MODEL, REVISION, 2),
        }

    got = graph.read(read)
    assert got["count"] == 3 == len(got["rows"])
    assert got["rows"] == sorted(
        [(1, _vec(1, 0, 0, 0)), (1, _vec(0, 1, 0, 0)), (1, _vec(0, 0, 1, 0))]
    )
    assert all(isinstance(v, bytes) for _, v in got["rows"])
    assert got["entity"] == [(10, _vec(0.5, 0.5, 0.5, 0.5))]
    assert got["other"] == 0
    assert got["dim2"] == 1


def test_item_windows_in_chunk_order(graph: Direct) -> None:
    graph.write(_vectors)

    def read(tx: StoreTx) -> dict[str, Any]:
        s = tx.snapshot
        return {
            "some": s.item_windows("memory", [1, 2, 3, 4], MODEL, REVISION, DIM),
            "many": s.item_windows("memory", list(range(MANY, 0, -1)), MODEL, REVISION, DIM),
            "none": s.item_windows("memory", [], MODEL, REVISION, DIM),
        }

    got = graph.read(read)
    windows = [_vec(1, 0, 0, 0), _vec(0, 1, 0, 0), _vec(0, 0, 1, 0)]
    assert got["some"] == {1: windows}  # 2: another model's chunk 0; 3: another dim
    assert got["many"] == {1: windows}
    assert got["none"] == {}


def test_nearest_memories_by_the_stores_own_index_or_none(direct: Direct) -> None:
    rng = np.random.default_rng(3)
    query = rng.standard_normal(384).astype(np.float32)
    query /= np.linalg.norm(query)

    def write(tx: StoreTx) -> None:
        for mid in range(1, 7):
            _memory(tx, mid, f"memory {mid}")
            v = query + rng.standard_normal(384).astype(np.float32) * (mid / 4)
            v /= np.linalg.norm(v)
            _vectors_of(tx, "memory", mid, v.astype(np.float32).tobytes())

    direct.write(write)
    q = query.tolist()
    near = direct.read(lambda tx: tx.snapshot.nearest_memories(q, MODEL, REVISION, 3))
    other_dim = direct.read(lambda tx: tx.snapshot.nearest_memories(q[:8], MODEL, REVISION, 3))
    other_model = direct.read(lambda tx: tx.snapshot.nearest_memories(q, "model-b", REVISION, 3))
    assert other_dim is None
    if not direct.backend.has(Capability.STORED_VECTOR_INDEX):
        assert near is None and other_model is None
        return
    assert near is not None and [i for i, _ in near] == [1, 2, 3]
    assert near[0][1] > near[1][1] > near[2][1] and near[0][1] <= 1.0001
    assert other_model == []


def test_text_ends_count_characters_and_keep_the_last_three(direct: Direct) -> None:
    texts = {
        1: "Nate: Have you seen it?  ",
        2: "ü",
        3: "",
        4: "héllo wörld ✓✓",
        5: "50%_off 'quoted' \"x\"",
    }

    def write(tx: StoreTx) -> None:
        for mid, text in texts.items():
            _memory(tx, mid, text)

    direct.write(write)
    got = direct.read(
        lambda tx: sorted(tx.snapshot.text_ends([5, 4, 3, 2, 1, 99], 5), key=lambda t: t.id)
    )
    assert got == [
        TextEnds(1, 25, "it?", "Nate:"),
        TextEnds(2, 1, "ü", "ü"),
        TextEnds(3, 0, "", ""),
        TextEnds(4, 14, "d ✓✓"[1:], "héllo"),
        TextEnds(5, 20, '"x"', "50%_o"),
    ]
    assert direct.read(lambda tx: tx.snapshot.text_ends([], 5)) == []
    many = direct.read(lambda tx: len(tx.snapshot.text_ends(list(range(MANY)), 5)))
    assert many == 5
