"""The storage contract of memories, scopes and id marks (`interfaces.memories`,
`interfaces.scopes`, `interfaces.marks`), driven directly on SQLite and on PostgreSQL.

Entities and relations a case needs are made by `memories.insert_memory` (the memory
feature's insert, which links them); every assertion is on the interfaces' answers.
"""

from __future__ import annotations

import pytest
from memtrio.actors.store.direct import Direct
from memtrio.actors.store.domain.entities import EntitySpec, RelationSpec
from memtrio.actors.store.domain.memories import NewMemory, get_memory, insert_memory
from memtrio.actors.store.interfaces import StoreTx
from memtrio.actors.store.interfaces.memories import (
    LinkedEntity,
    LinkedRelation,
    MemoryEdit,
    StoreCounts,
)

A = "repo:/home/a"
B = "repo:/home/b"
# Names a backend gets wrong: case, quotes, LIKE's wildcards, non-ASCII, a backslash.
ODD = ["repo:/home/A", 'repo:/it\'s "q"', "repo:/100%_x", "repo:/é/ü", "repo:/back\\slash"]


def _memory(direct: Direct, scopes: list[int], content: str = "text", kind: str = "note") -> int:
    return direct.write(lambda tx: tx.memories.insert(content, kind, 0.5, 1000.0, scopes))


def _scope(direct: Direct, name: str) -> int:
    return direct.write(lambda tx: tx.scopes.ensure(name))


# -- scopes ------------------------------------------------------------------------------


def test_ensure_creates_a_scope_once_and_names_compare_exactly(direct: Direct) -> None:
    first = _scope(direct, A)
    assert _scope(direct, A) == first
    ids = [_scope(direct, n) for n in ODD]
    assert len({first, *ids}) == 1 + len(ODD)  # "repo:/home/A" is not "repo:/home/a"
    assert direct.read(lambda tx: tx.scopes.ids([A, *ODD])) == dict(
        zip([A, *ODD], [first, *ids], strict=True)
    )


def test_ids_never_create_and_ignore_missing_names(direct: Direct) -> None:
    sid = _scope(direct, A)
    assert direct.read(lambda tx: tx.scopes.ids([])) == {}
    assert direct.write(lambda tx: tx.scopes.ids([A, A, "repo:/none", "repo:/HOME/A"])) == {A: sid}
    assert direct.read(lambda tx: tx.memories.counts().scopes) == 1


def test_ids_of_more_names_than_sqlite_binds_at_once(direct: Direct) -> None:
    names = [f"repo:/r{i}" for i in range(2500)]
    made = direct.write(lambda tx: {n: tx.scopes.ensure(n) for n in names})
    assert direct.read(lambda tx: tx.scopes.ids([*names, "repo:/x"])) == made


def test_a_memory_s_scopes_are_sorted_by_code_point(direct: Direct) -> None:
    names = ["repo:/b", "global", "repo:/B", "repo:/é", "repo:/_", "repo:/a"]
    ids = [_scope(direct, n) for n in names]
    mid = _memory(direct, ids)
    assert direct.read(lambda tx: tx.scopes.of_memory(mid)) == sorted(names)
    assert direct.read(lambda tx: tx.scopes.of_memory(mid + 1000)) == []
    assert direct.read(lambda tx: tx.scopes.of_memory(_memory(direct, []))) == []


def test_memory_counts_name_every_scope(direct: Direct) -> None:
    a, b = _scope(direct, A), _scope(direct, B)
    _scope(direct, "global")
    _memory(direct, [a])
    _memory(direct, [a, b])
    _memory(direct, [])
    assert direct.read(lambda tx: tx.scopes.memory_counts()) == {A: 2, B: 1, "global": 0}


def _linked(direct: Direct) -> tuple[dict[str, int], int, int, int]:
    """Scopes A, B, global; a memory in B mentioning X and stating X -uses-> Y;
    returns (scope ids, memory id, X's id, the relation's id)."""

    def op(tx: StoreTx) -> tuple[dict[str, int], int, int, int]:
        ids = {n: tx.scopes.ensure(n) for n in (A, B, "global")}
        new = NewMemory(
            "x uses y",
            scopes=[B],
            entities=[EntitySpec("X")],
            relations=[RelationSpec(EntitySpec("X"), "uses", EntitySpec("Y"))],
        )
        result, _ = insert_memory(tx, new, ts=1000.0, writable=[B])
        return ids, result["id"], result["entities"][0]["id"], result["relations"][0]["id"]

    return direct.write(op)


def test_foreign_owners_follow_dependent_rows(direct: Direct) -> None:
    ids, mid, x, rel = _linked(direct)
    here = [ids[A], ids["global"]]
    for kind, item in (("memory", mid), ("entity", x), ("relation", rel)):
        assert direct.read(lambda tx: tx.scopes.foreign_owners(kind, item, here)) == [B]  # noqa: B023
        assert direct.read(lambda tx: tx.scopes.has_foreign_owner(kind, item, here))  # noqa: B023
        assert direct.read(lambda tx: tx.scopes.foreign_owners(kind, item, [ids[B]])) == []  # noqa: B023
        assert not direct.read(lambda tx: tx.scopes.has_foreign_owner(kind, item, [ids[B]]))  # noqa: B023
    assert direct.read(lambda tx: tx.scopes.foreign_owners("entity", 10**9, here)) == []


def test_release_moves_a_row_to_its_foreign_scopes_only(direct: Direct) -> None:
    ids, mid, x, rel = _linked(direct)
    direct.write(
        lambda tx: insert_memory(
            tx, NewMemory("in a", scopes=[A], entities=[EntitySpec("X")]), ts=1.0, writable=[A]
        )
    )
    # X is owned by A (a memory of A mentions it) and by B; A releases it.
    direct.write(lambda tx: tx.scopes.release("entity", x, [ids[A]]))
    assert direct.read(lambda tx: tx.scopes.foreign_owners("entity", x, [ids[A]])) == [B]
    # Released again: the row keeps B, nothing fails.
    direct.write(lambda tx: tx.scopes.release("entity", x, [ids[A]]))
    direct.write(lambda tx: tx.scopes.release("relation", rel, [ids[A]]))
    assert direct.read(lambda tx: tx.scopes.foreign_owners("relation", rel, [ids[A]])) == [B]
    assert direct.read(lambda tx: tx.memories.get(mid)) is not None


# -- memories ----------------------------------------------------------------------------


def test_insert_and_get_keep_every_character(direct: Direct) -> None:
    text = 'it\'s "quoted" 100% _under_ \\ é 🙂 \x7f line\nnext'
    sid = _scope(direct, A)
    mid = direct.write(lambda tx: tx.memories.insert(text, "Decision", 0.25, 1234.5, [sid, sid]))
    row = direct.read(lambda tx: tx.memories.get(mid))
    assert row is not None
    assert (row.id, row.content, row.memory_type, row.importance) == (mid, text, "Decision", 0.25)
    assert (row.created_at, row.updated_at, row.last_accessed_at, row.access_count) == (
        1234.5,
        1234.5,
        None,
        0,
    )
    assert direct.read(lambda tx: tx.scopes.of_memory(mid)) == [A]
    assert direct.read(lambda tx: tx.memories.get(mid + 1)) is None


def test_ids_are_never_reused_after_the_highest_is_deleted(direct: Direct) -> None:
    assert direct.read(lambda tx: tx.marks.high_mark("memories")) == 0
    assert direct.read(lambda tx: tx.marks.next_id("memories")) == 1
    first, second = _memory(direct, []), _memory(direct, [])
    assert direct.read(lambda tx: tx.marks.high_mark("memories")) == second
    assert direct.write(lambda tx: tx.memories.delete(second))
    assert not direct.write(lambda tx: tx.memories.delete(second))
    assert direct.read(lambda tx: tx.marks.next_id("memories")) == second + 1
    third = _memory(direct, [])
    assert third == second + 1 and first < second
    for table in ("entities", "relations"):
        assert direct.read(lambda tx: tx.marks.high_mark(table)) == 0  # noqa: B023


def test_marks_follow_entities_and_relations(direct: Direct) -> None:
    _ids, _mid, x, rel = _linked(direct)
    assert direct.read(lambda tx: tx.marks.high_mark("entities")) == x + 1  # X, then Y
    assert direct.read(lambda tx: tx.marks.next_id("relations")) == rel + 1


def test_marks_refuse_a_table_without_one(direct: Direct) -> None:
    with pytest.raises(ValueError, match="no id high-water mark"):
        direct.read(lambda tx: tx.marks.high_mark("scopes; DROP TABLE memories"))  # type: ignore[arg-type]  # the refusal is the case


def test_links_give_the_stored_name_and_repeat_harmlessly(direct: Direct) -> None:
    _ids, mid, x, rel = _linked(direct)
    assert direct.write(lambda tx: tx.memories.link_entity(mid, x)) == "X"
    direct.write(lambda tx: tx.memories.link_relation(mid, rel))
    entities = direct.read(lambda tx: tx.memories.entities_of(mid))
    assert entities == [LinkedEntity(x, "X", "entity"), LinkedEntity(x + 1, "Y", "entity")]
    assert direct.read(lambda tx: tx.memories.relations_of(mid)) == [
        LinkedRelation(rel, "X", "uses", "Y")
    ]
    assert direct.read(lambda tx: tx.memories.entities_of(mid + 99)) == []
    assert direct.read(lambda tx: tx.memories.relations_of(mid + 99)) == []


def test_entities_of_are_in_code_point_order(direct: Direct) -> None:
    names = ["beta", "Alpha", "Émile", "éa", "_x", "Zed"]

    def op(tx: StoreTx) -> int:
        result, _ = insert_memory(
            tx, NewMemory("m", entities=[EntitySpec(n) for n in names]), ts=1.0, writable=[]
        )
        return int(result["id"])

    mid = direct.write(op)
    assert [e.name for e in direct.read(lambda tx: tx.memories.entities_of(mid))] == sorted(names)


def test_update_sets_only_what_it_is_given(direct: Direct) -> None:
    mid = _memory(direct, [])
    direct.write(lambda tx: tx.memories.update(mid, MemoryEdit(importance=0.0), 2000.0))
    row = direct.read(lambda tx: tx.memories.get(mid))
    assert row is not None
    assert (row.content, row.memory_type, row.importance, row.updated_at) == (
        "text",
        "note",
        0.0,
        2000.0,
    )
    direct.write(lambda tx: tx.memories.update(mid, MemoryEdit("new %s", "Fact", None), 3000.0))
    row = direct.read(lambda tx: tx.memories.get(mid))
    assert row is not None
    assert (row.content, row.memory_type, row.importance, row.created_at) == (
        "new %s",
        "Fact",
        0.0,
        1000.0,
    )
    direct.write(lambda tx: tx.memories.update(mid + 5, MemoryEdit("x"), 1.0))  # nothing there
    assert direct.read(lambda tx: tx.memories.get(mid + 5)) is None


def test_page_shows_selected_and_unscoped_memories_newest_first(direct: Direct) -> None:
    a, b = _scope(direct, A), _scope(direct, B)
    in_a = _memory(direct, [a])
    in_b = _memory(direct, [b])
    both = _memory(direct, [a, b])
    loose = _memory(direct, [])
    page = lambda scopes, limit=10, offset=0: [  # noqa: E731
        r.id for r in direct.read(lambda tx: tx.memories.page(scopes, None, limit, offset))
    ]
    assert page([a]) == [loose, both, in_a]
    assert page([b]) == [loose, both, in_b]
    assert page([a, b]) == [loose, both, in_b, in_a]
    assert page([]) == [loose]
    assert page([a, b], 2, 1) == [both, in_b]
    assert page([a, b], 10, 10) == []


def test_page_filters_the_type_without_ascii_case_and_without_wildcards(direct: Direct) -> None:
    decision = _memory(direct, [], kind="Decision")
    odd = _memory(direct, [], kind="100%_done")
    _memory(direct, [], kind="1000xdone")
    typed = lambda t: [r.id for r in direct.read(lambda tx: tx.memories.page([], t, 10, 0))]  # noqa: E731
    assert typed("decision") == typed("DECISION") == [decision]
    assert typed("100%_DONE") == [odd]
    assert typed("%") == typed("_") == typed("decisio") == []


def test_counts_and_visible_counts(direct: Direct) -> None:
    ids, _mid, _x, _rel = _linked(direct)
    _memory(direct, [ids[A]])
    _memory(direct, [])
    everything = direct.read(lambda tx: tx.memories.counts())
    assert everything == StoreCounts(
        memories=3, scopes=3, entities=2, edges=1, vectors=0, recall_log=0, anchors=0
    )
    assert everything.as_dict()["edges"] == 1
    seen_by_a = direct.read(lambda tx: tx.memories.visible_counts([ids[A]]))
    # A sees its memory and the unscoped one; X and Y and the relation are B's.
    assert seen_by_a == StoreCounts(
        memories=2, scopes=1, entities=0, edges=0, vectors=0, recall_log=0, anchors=0
    )
    seen_by_b = direct.read(lambda tx: tx.memories.visible_counts([ids[B], ids["global"]]))
    assert seen_by_b == StoreCounts(
        memories=2, scopes=2, entities=2, edges=1, vectors=0, recall_log=0, anchors=0
    )
    assert direct.read(lambda tx: tx.memories.visible_counts([])).memories == 1


def test_a_deleted_memory_takes_its_links_with_it(direct: Direct) -> None:
    ids, mid, x, _rel = _linked(direct)
    assert direct.write(lambda tx: tx.memories.delete(mid))
    assert direct.read(lambda tx: tx.memories.get(mid)) is None
    assert direct.read(lambda tx: tx.scopes.of_memory(mid)) == []
    assert direct.read(lambda tx: tx.memories.entities_of(mid)) == []
    assert direct.read(lambda tx: tx.scopes.memory_counts())[B] == 0
    assert direct.read(lambda tx: tx.scopes.foreign_owners("entity", x, [ids[A]])) == [B]


def test_inspect_lists_a_memory_s_entities_in_code_point_order_on_every_backend(
    direct: Direct,
) -> None:
    """The entities of `inspect` and a memory's scopes sort by code point, as on SQLite, whatever
    the PostgreSQL database's collation (en_US would give ``Alpha, beta, _x, Zed``): the
    PostgreSQL statements say ``COLLATE "C"``. (The test server's databases use C, so the
    old statements passed here too.)"""
    names = ["beta", "Alpha", "Émile", "éa", "_x", "Zed"]
    scopes = ["repo:/b", "repo:/B", "repo:/_", "global"]

    def op(tx: StoreTx) -> int:
        new = NewMemory("m", scopes=scopes, entities=[EntitySpec(n) for n in names])
        result, _ = insert_memory(tx, new, ts=1.0, writable=scopes)
        return int(result["id"])

    mid = direct.write(op)
    memory = direct.read(lambda tx: get_memory(tx, mid))
    assert memory is not None
    assert [e["name"] for e in memory["entities"]] == sorted(names)
    assert memory["scopes"] == sorted(scopes)
