"""The storage contract of the dashboard's reads (`interfaces.browse.Browse`), on SQLite and on
PostgreSQL (the ``direct`` fixture)."""

from __future__ import annotations

from memtrio.actors.store.direct import Direct
from memtrio.actors.store.interfaces import StoreTx
from memtrio.actors.store.interfaces.browse import MemoryFilter
from memtrio.actors.store.interfaces.upkeep import EntityRow, MemoryRow, RelationRow

ODD = "50% off_under 'q' \"d\" \\ ünï 🧠"


def _memory(
    tx: StoreTx, mid: int, content: str, mtype: str, importance: float, scopes: tuple[str, ...]
) -> None:
    tx.imports.add_memory(
        MemoryRow(
            id=mid,
            content=content,
            memory_type=mtype,
            importance=importance,
            created_at=float(mid),
            updated_at=float(10 - mid),
            last_accessed_at=None,
            access_count=mid % 3,
        )  # fmt: skip
    )
    tx.imports.link_scopes("memory", mid, list(scopes))


def _entity(tx: StoreTx, eid: int, name: str, scopes: tuple[str, ...] = ()) -> None:
    tx.imports.add_entity(
        EntityRow(
            id=eid,
            name=name,
            canonical_name=name.lower(),
            kind="thing",
            created_at=1.0,
            updated_at=1.0,
        )  # fmt: skip
    )
    tx.imports.link_scopes("entity", eid, list(scopes))


def _relation(tx: StoreTx, rid: int, src: int, dst: int, scopes: tuple[str, ...] = ()) -> None:
    tx.imports.add_relation(
        RelationRow(
            id=rid, source="", relation_type="uses", target="", metadata="{}", created_at=1.0
        ),
        src,
        dst,
    )
    tx.imports.link_scopes("relation", rid, list(scopes))


def _fill(tx: StoreTx) -> None:
    _memory(tx, 1, "one", "Note", 0.5, ("repo:a",))
    _memory(tx, 2, ODD, "note", 0.9, ("global", "repo:a"))
    _memory(tx, 3, "three", "NOTE", 0.1, ("repo:b",))
    _memory(tx, 4, "four", "decision", 0.5, ())  # unscoped: seen everywhere
    _memory(tx, 5, "five", "Décision", 0.7, ("global",))
    _entity(tx, 1, "beta", ("global",))
    _entity(tx, 2, "Alpha", ("global",))
    _entity(tx, 3, "Zed", ("repo:b",))
    _entity(tx, 4, ODD, ("repo:a",))
    _relation(tx, 1, 1, 2, ("global",))
    _relation(tx, 2, 1, 4, ("repo:a",))
    _relation(tx, 3, 3, 1, ("repo:b",))
    _relation(tx, 4, 2, 4, ("repo:a",))
    tx.imports.link_memory(2, [1, 2, 4], [1])


SEL = ["repo:a", "global"]


def _ids(direct: Direct, chosen: MemoryFilter, sort: str = "id", desc: bool = True) -> list[int]:
    page = direct.read(lambda tx: tx.browse.page(chosen, sort, desc, 0, 100))  # type: ignore[arg-type]
    return [m.id for m in page.memories]


def test_page_filters_by_visibility_type_dates_importance_scope_and_ids(direct: Direct) -> None:
    direct.write(_fill)
    assert _ids(direct, MemoryFilter(selection=SEL)) == [5, 4, 2, 1]
    assert _ids(direct, MemoryFilter(selection=["nowhere"])) == [4]
    assert _ids(direct, MemoryFilter(selection=[])) == [4]
    # Types compare without regard to (ASCII) case.
    assert _ids(direct, MemoryFilter(selection=SEL, memory_type="nOtE")) == [2, 1]
    assert _ids(direct, MemoryFilter(selection=SEL, memory_type="note%")) == []
    assert _ids(direct, MemoryFilter(selection=SEL, since=2.0, until=5.0)) == [4, 2]
    assert _ids(direct, MemoryFilter(selection=SEL, min_importance=0.7)) == [5, 2]
    assert _ids(direct, MemoryFilter(selection=SEL, only_scope="global")) == [5, 2]
    assert _ids(direct, MemoryFilter(selection=SEL, only_scope="GLOBAL")) == []
    assert _ids(direct, MemoryFilter(selection=SEL, ids=[1, 3, 5, 99])) == [5, 1]
    assert _ids(direct, MemoryFilter(selection=SEL, ids=[])) == []


def test_page_sorts_with_ties_newest_id_first_and_counts_all(direct: Direct) -> None:
    direct.write(_fill)
    chosen = MemoryFilter(selection=SEL)
    assert _ids(direct, chosen, "importance", True) == [2, 5, 4, 1]
    assert _ids(direct, chosen, "importance", False) == [4, 1, 5, 2]
    assert _ids(direct, chosen, "updated", True) == [1, 2, 4, 5]
    assert _ids(direct, chosen, "accessed", True) == [5, 2, 4, 1]
    assert _ids(direct, chosen, "created", False) == [1, 2, 4, 5]
    assert _ids(direct, chosen, "no such sort", True) == [5, 4, 2, 1]
    page = direct.read(lambda tx: tx.browse.page(chosen, "id", True, 1, 2))
    assert [m.id for m in page.memories] == [4, 2] and page.total == 4


def test_page_lists_scopes_and_entities_by_code_point(direct: Direct) -> None:
    direct.write(_fill)
    page = direct.read(
        lambda tx: tx.browse.page(MemoryFilter(selection=SEL, ids=[2]), "id", True, 0, 5)
    )
    [m] = page.memories
    assert m.content == ODD and m.scopes == ["global", "repo:a"]
    # By code point, as SQLite sorts: digits, then upper case, then lower case.
    assert [e.name for e in m.entities] == [ODD, "Alpha", "beta"]
    assert [e.id for e in m.entities] == [4, 2, 1]


def test_memory_types_fold_case_and_order_by_count_then_name(direct: Direct) -> None:
    direct.write(_fill)
    types = direct.read(lambda tx: tx.browse.memory_types())
    assert [(t.name, t.memories) for t in types] == [("NOTE", 3), ("Décision", 1), ("decision", 1)]


def test_graph_overview_ranks_by_visible_degree(direct: Direct) -> None:
    direct.write(_fill)
    got = direct.read(lambda tx: tx.browse.graph_overview(SEL, 10, 10))
    assert [(n.name, n.degree) for n in got.nodes] == [("beta", 2), ("Alpha", 2), (ODD, 2)]
    assert [(r.source, r.target) for r in got.links] == [
        ("beta", "Alpha"),
        ("beta", ODD),
        ("Alpha", ODD),
    ]
    assert got.total == 3 and not got.truncated
    small = direct.read(lambda tx: tx.browse.graph_overview(SEL, 2, 1))
    assert [n.name for n in small.nodes] == ["beta", "Alpha"] and small.truncated
    assert [(r.source, r.target) for r in small.links] == [("beta", "Alpha")]
    everything = direct.read(
        lambda tx: tx.browse.graph_overview(["repo:a", "repo:b", "global"], 10, 0)
    )
    assert everything.total == 4 and everything.links == [] and everything.truncated
    assert direct.read(lambda tx: tx.browse.graph_overview(["none"], 10, 10)).total == 0


def test_explain_lookups(direct: Direct) -> None:
    direct.write(_fill)
    assert direct.read(lambda tx: tx.browse.entities_named(["alpha", "beta", "nope"])) == {
        1: "beta", 2: "Alpha",
    }  # fmt: skip
    assert direct.read(lambda tx: tx.browse.entities_named([])) == {}
    assert direct.read(lambda tx: tx.browse.entities_named(["ALPHA", "alph%"])) == {}
    assert direct.read(lambda tx: tx.browse.memory_text(2)) == ODD
    assert direct.read(lambda tx: tx.browse.memory_text(99)) is None
    assert direct.read(lambda tx: tx.browse.mentions(2)) == {1: "beta", 2: "Alpha", 4: ODD}
    assert direct.read(lambda tx: tx.browse.mentions(1)) == {}
    between = direct.read(lambda tx: tx.browse.relations_between([4], [1, 2], 3))
    assert between == [("beta", "uses", ODD), ("Alpha", "uses", ODD)]
    assert direct.read(lambda tx: tx.browse.relations_between([4], [1, 2], 1)) == [
        ("beta", "uses", ODD)
    ]
    assert direct.read(lambda tx: tx.browse.relations_between([], [1], 3)) == []
    many = list(range(1, 40000))  # above SQLite's bound parameters
    assert len(direct.read(lambda tx: tx.browse.relations_between(many, many, 10))) == 4
    page = direct.read(
        lambda tx: tx.browse.page(MemoryFilter(selection=SEL, ids=many), "id", True, 0, 10)
    )
    assert page.total == 4
