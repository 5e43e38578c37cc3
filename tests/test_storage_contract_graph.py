"""The graph storage interface (`interfaces.graph.Graph`) driven directly, on SQLite and on
PostgreSQL (the `direct` fixture): the same cases, the same answers on both backends."""

from __future__ import annotations

from memtrio.actors.store.direct import Direct
from memtrio.actors.store.domain.documents import canonical_name
from memtrio.actors.store.interfaces import StoreTx
from memtrio.actors.store.interfaces.graph import NewEntity, NewObservation, View

NAMES = ["Alice", "alice", "O'Brien", "100% _sure_", "Zoë \u2603", 'say "hi"']


def _scope(tx: StoreTx, name: str) -> int:
    # The scopes concept's (not the graph's): created through its old function.
    return tx.scopes.ensure(name)


def _entity(tx: StoreTx, name: str, kind: str = "entity", scope: int | None = None) -> int:
    eid = tx.graph_writes.create_entity(name, canonical_name(name), kind, 1.0)
    if scope is not None:
        tx.graph_writes.link("entity", eid, [scope])
    return eid


def test_names_are_exact_and_canonical_lookups_forgive_case(direct: Direct) -> None:
    ids = direct.write(lambda tx: [_entity(tx, n) for n in NAMES])

    def check(tx: StoreTx) -> None:
        g = tx.graph
        for eid, name in zip(ids, NAMES, strict=True):
            got = g.entity_named(name)
            assert got is not None and (got.id, got.name) == (eid, name)
        assert g.entity_named("ALICE") is None
        assert g.entity_named("100% _sure") is None  # no LIKE: % and _ are characters
        assert [e.name for e in g.entities_canonical(canonical_name("ALICE"), 10)] == [
            "Alice",
            "alice",
        ]
        assert len(g.entities_canonical(canonical_name("alice"), 1)) == 1
        view = View((), (), True)
        found = g.entities_by_names(["alice", "O'Brien", "nobody", "alice"], view)
        assert sorted(e.name for e in found) == ["O'Brien", "alice"]
        assert g.entities_by_names([], view) == []
        assert sorted(e.name for e in g.entities_by_ids(ids)) == sorted(NAMES)
        # Over SQLite's bound-parameter limit (32,766): the backend splits the list.
        many = list(range(1, 40_000))
        assert sorted(e.id for e in g.entities_by_ids(many)) == sorted(ids)
        assert sorted(
            e.name for e in g.entities_by_names([f"n{i}" for i in many] + NAMES, view)
        ) == sorted(NAMES)
        assert g.names_near([canonical_name("ALICE")], view, 5) == ["Alice", "alice"]
        assert g.names_near([], view, 5) == []

    direct.read(check)


def test_visibility_follows_the_scopes_read(direct: Direct) -> None:
    def setup(tx: StoreTx) -> tuple[int, int, int]:
        a, b = _scope(tx, "repo:/a"), _scope(tx, "repo:/b")
        return _entity(tx, "InA", scope=a), _entity(tx, "InB", scope=b), _entity(tx, "Nowhere")

    in_a, in_b, nowhere = direct.write(setup)

    def check(tx: StoreTx) -> None:
        g = tx.graph
        va = g.view(["repo:/a", "missing"], ["repo:/a"])
        assert (len(va.read_ids), len(va.write_ids), va.sees_all) == (1, 1, False)
        assert g.view(["repo:/a", "repo:/b"], []).sees_all
        vis = {e.name: e.visible for e in g.entities_by_names(["InA", "InB", "Nowhere"], va)}
        assert vis == {"InA": True, "InB": False, "Nowhere": True}
        assert g.count_entities(va, None) == 2
        assert [e.id for e in g.entity_page(va, None, 0, 10)] == [in_a, nowhere]
        assert [e.id for e in g.entity_page(va, None, 1, 10)] == [nowhere]
        assert g.count_entities(va, "nope") == 0
        assert [e.id for e in g.entities_after(va, in_a, 10)] == [nowhere]
        none = g.view([], [])
        assert [e.id for e in g.entity_page(none, None, 0, 10)] == [nowhere]
        assert in_b not in [e.id for e in g.entities_after(none, 0, 10)]

    direct.read(check)


def test_observations_batches_and_their_counts(direct: Direct) -> None:
    def setup(tx: StoreTx) -> tuple[int, int, list[int]]:
        s = _scope(tx, "repo:/a")
        g = tx.graph
        eid = _entity(tx, "E", scope=s)
        m1 = g.add_observation(eid, "first 100% 'quoted'", 2.0, s)
        m2 = g.add_observation(eid, "first 100% 'quoted'", 2.0, s)
        ne, nm = g.next_ids()
        assert ne > eid and nm > m2
        g.insert_batch(
            [
                NewEntity(ne, "Batch\u2603", canonical_name("Batch\u2603"), "k"),
                NewEntity(ne + 1, "Two", "two", "k"),
            ],
            [
                NewObservation(nm, "b1", ne),
                NewObservation(nm + 1, "b2 %_'x", ne),
                NewObservation(nm + 2, "e3", eid),
            ],
            3.0,
            s,
        )
        g.insert_batch([], [], 3.0, s)
        assert g.next_ids() == (ne + 2, nm + 3)
        return eid, ne, [m1, m2, nm, nm + 1, nm + 2]

    eid, batch, mids = direct.write(setup)

    def check(tx: StoreTx) -> None:
        g = tx.graph
        view = g.view(["repo:/a"], [])
        obs = g.observations([batch, eid, 999_999], view)
        assert [(o.entity_id, o.memory_id, o.content) for o in obs] == [
            (eid, mids[0], "first 100% 'quoted'"),
            (eid, mids[1], "first 100% 'quoted'"),
            (eid, mids[4], "e3"),
            (batch, mids[2], "b1"),
            (batch, mids[3], "b2 %_'x"),
        ]
        assert g.observation_counts([eid, batch, 999_999], view) == {eid: 3, batch: 2}
        assert g.observations([], view) == []
        assert g.observation_texts([batch, eid], view) == [(o.entity_id, o.content) for o in obs]
        assert g.observation_texts([], view) == []
        assert g.duplicate_observations(view) == [(eid, mids[:2])]
        assert g.entity_named("Two") is not None
        assert g.counts(view).observations == 5
        assert g.without_vectors("entity", [eid, batch]) == {eid, batch}
        assert sorted(g.linked_memories(eid)) == [mids[0], mids[1], mids[4]]

    direct.read(check)

    def drop(tx: StoreTx) -> None:
        g = tx.graph
        assert not g.observation_elsewhere(mids[0], eid)
        g.move_memories(batch, eid)  # now eid has b1, b2 too
        g.add_observation(batch, "x", 4.0, _scope(tx, "repo:/a"))
        g.unlink_observation(mids[1], eid)
        g.delete_memory(mids[0])

    direct.write(drop)

    def after(tx: StoreTx) -> None:
        g = tx.graph
        view = View((), (), True)
        assert [o.content for o in g.observations([eid], view)] == ["b1", "b2 %_'x", "e3"]
        assert [o.content for o in g.observations([batch], view)] == ["x"]

    direct.read(after)


def test_relations_reads_and_ordering(direct: Direct) -> None:
    def setup(tx: StoreTx) -> dict[str, int]:
        g = tx.graph
        s = _scope(tx, "repo:/a")
        a, b, c = (_entity(tx, n, k, s) for n, k in (("A", "t1"), ("B", "t2"), ("C", "t2")))
        r1 = g.create_relation(a, b, "knows", "{}", 1.0)
        r2 = g.create_relation(c, a, "knows", '{"w": 1}', 1.0)
        r3 = g.create_relation(a, a, "self", "{}", 1.0)
        r4 = g.create_relation(b, c, "100%_odd'", "{}", 1.0)
        for r in (r1, r2, r3):
            g.link("relation", r, [s])
        g.link("relation", r1, [s])  # already linked: stays
        g.link("relation", r1, [])
        return {"a": a, "b": b, "c": c, "r1": r1, "r2": r2, "r3": r3, "r4": r4, "s": s}

    ids = direct.write(setup)
    a, b = ids["a"], ids["b"]
    r1, r2, r3, r4 = ids["r1"], ids["r2"], ids["r3"], ids["r4"]

    def check(tx: StoreTx) -> None:
        g = tx.graph
        view = g.view(["repo:/a"], [])
        assert [r.id for r in g.relations_touching([a], view, False)] == [r1, r2, r3]
        assert [r.id for r in g.relations_touching([a], view, True)] == [r1, r3]
        assert [r.id for r in g.relations_touching([], view, False)] == []
        rel = g.relations_touching([b], view, True)[0]
        assert (rel.source, rel.relation_type, rel.target) == ("B", "100%_odd'", "C")
        assert [r.id for r in g.relations_of(a, view)] == [r1, r3, r2]  # outgoing first
        assert g.degree(a, view) == (2, 2)  # the self-loop counts both ways
        counts = g.counts(view)
        assert (counts.entities, counts.relations, counts.entity_types, counts.relation_types) == (
            3,
            4,
            2,
            3,
        )
        total, page = g.find_relations(view, a, None, None, 1, 10)
        assert (total, [r.id for r in page]) == (2, [r3])
        total, page = g.find_relations(view, None, None, "100%_odd'", 0, 10)
        assert (total, [r.id for r in page]) == (1, [r4])
        assert g.find_relations(view, None, None, "100%", 0, 10)[0] == 0
        assert g.type_counts(view, "entity") == [("t2", 2), ("t1", 1)]
        assert g.type_counts(view, "relation") == [("knows", 2), ("100%_odd'", 1), ("self", 1)]
        assert [e.id for e in g.edges([a, b], view, True, None)] == [r1, r3, r4]
        assert [e.id for e in g.edges([a], view, False, "knows")] == [r2]
        assert [e.id for e in g.edges([], view, False, None)] == []
        assert [r.id for r in g.edges_named(a, view, True)] == [r1, r3]
        found = g.relation(a, "knows", b, view)
        assert found is not None and (found.id, found.visible) == (r1, True)
        assert g.relation(a, "KNOWS", b, view) is None
        assert sorted(g.relation_ids_touching(a, view)) == [r1, r2, r3]
        assert g.relation_metadata(r2) == '{"w": 1}'
        assert g.relation_metadata(999_999) is None
        assert [r.id for r in g.relations_after(view, r1, 10)] == [r2, r3, r4]
        assert [r.id for r in g.all_edges_of(a)] == [r1, r2, r3]

    direct.read(check)

    def other_scope(tx: StoreTx) -> None:
        other = tx.graph.view([tx.scopes.ensure("repo:/b") and "repo:/b"], [])
        found = tx.graph.relation(a, "knows", b, other)
        assert found is not None and not found.visible
        assert tx.graph_edges.relations_touching([a], other, False) == []
        assert [r.id for r in tx.graph_edges.relations_touching([b], other, True)] == [
            r4
        ]  # no scope

    direct.write(other_scope)


def test_writes_merge_and_delete(direct: Direct) -> None:
    def run(tx: StoreTx) -> None:
        g = tx.graph
        s1, s2 = _scope(tx, "repo:/a"), _scope(tx, "global")
        a, b, c = _entity(tx, "A", scope=s1), _entity(tx, "B", scope=s2), _entity(tx, "C")
        r_ab = g.create_relation(a, b, "r", "{}", 1.0)
        r_cb = g.create_relation(c, b, "r", "{}", 1.0)
        r_ac = g.create_relation(a, c, "r", "{}", 1.0)
        g.link("relation", r_ab, [s1])
        mid = g.add_observation(a, "obs", 1.0, s1)
        g.set_relation_metadata(r_ab, '{"k": "v"}')
        assert g.relation_metadata(r_ab) == '{"k": "v"}'
        g.set_kind(a, "person", 5.0)
        g.touch([a, b], 6.0)
        g.touch([], 6.0)
        assert [e.kind for e in g.entities_by_ids([a])] == ["person"]
        # Merge A into C: scopes, memories, relations.
        g.copy_scopes(a, c)
        g.copy_scopes(a, c)
        assert g.move_memories(a, c) == [mid]
        assert g.observation_elsewhere(mid, a)
        g.fold_relation(r_ab, r_cb)  # A-r->B folds into C-r->B
        g.repoint_relation(r_ac, c, c)
        g.delete_entity(a)
        view = g.view(["repo:/a"], [])
        assert [x.id for x in g.all_edges_of(c)] == [r_cb, r_ac]
        assert sorted(g.relation_ids_touching(c, view)) == [r_cb, r_ac]
        assert g.entities_by_names(["C"], view)[0].visible
        assert [o.content for o in g.observations([c], view)] == ["obs"]
        g.delete_relation(r_ac)
        g.delete_relation(r_ac)  # gone already: nothing happens
        assert [x.id for x in g.all_edges_of(c)] == [r_cb]
        assert g.without_vectors("relation", []) == set()

    direct.write(run)
