"""Personalized PageRank on PostgreSQL walks a neighbourhood read from SQL, and ranks as SQLite.

The same small graph (memories, entities, a relation, two scopes; paths of
two hops and more) is written into a SQLite store and a PostgreSQL store;
a `RecallCache` is loaded from each as the ranker loads it (PostgreSQL: no
stored edges), and `rank` must give the same memories in the same order.
Vectors are fixed unit vectors (no model), 384 wide so that pgvector answers
the PostgreSQL dense seeds.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import stores
from memtrio.actors.ranker import rank as rank_mod
from memtrio.actors.ranker import sql_graph
from memtrio.actors.ranker.graph import KIND_CODE, RecallCache, node, node_id, node_kind
from memtrio.actors.store import backends, connections
from memtrio.actors.store.domain.embeddings import Vec, put_vector
from memtrio.actors.store.interfaces import StoreTx
from memtrio.actors.store.pg.snapshot import PgSnapshot
from memtrio.actors.store.writer import Change

DIM = 384
MODEL, REVISION = "test-model", "r1"
PARAMS = rank_mod.Params(use_lexical=False, mmr_lambda=1.0, neighbour_weight=0.0)
RNG_SEED = 7


def _unit(rng: np.random.Generator, near: np.ndarray | None = None) -> np.ndarray:
    v = rng.standard_normal(DIM).astype(np.float32)
    if near is not None:
        v = near * 4 + v * 0.3
    return (v / np.linalg.norm(v)).astype(np.float32)


class Graph:
    """Writes the graph through shared SQL; remembers ids by name."""

    def __init__(self, conn: sqlite3.Connection, tx: StoreTx) -> None:
        self.conn = conn
        self.tx = tx  # the same connection through the storage interfaces (vectors)
        self.ids: dict[str, int] = {}
        self.rng = np.random.default_rng(RNG_SEED)
        self.query = _unit(self.rng)

    def scope(self, name: str) -> int:
        stores.sql(self.conn, "INSERT INTO scopes (name) VALUES (?) ON CONFLICT DO NOTHING", name)
        return stores.sql(self.conn, "SELECT id FROM scopes WHERE name = ?", name).fetchone()[0]

    def vec(self, kind: str, item_id: int, near_query: bool) -> None:
        v = _unit(self.rng, self.query if near_query else None)
        put_vector(self.tx, kind, item_id, Vec(v.tobytes(), DIM, MODEL, REVISION))

    def memory(
        self, name: str, scope: str = "a", near: bool = False, text: str = "", **links: list[str]
    ) -> int:
        now = time.time()
        mid = stores.sql(
            self.conn,
            "INSERT INTO memories (content, memory_type, created_at, updated_at) VALUES (?, 'observation', ?, ?) RETURNING id",
            f"memory {name} {text}",
            now,
            now,
        ).fetchone()[0]
        stores.sql(self.conn, "INSERT INTO memory_scopes VALUES (?, ?)", mid, self.scope(scope))
        for e in links.get("entities", []):
            stores.sql(self.conn, "INSERT INTO memory_entities VALUES (?, ?)", mid, self.ids[e])
        for r in links.get("relations", []):
            stores.sql(self.conn, "INSERT INTO memory_relations VALUES (?, ?)", mid, self.ids[r])
        self.vec("memory", mid, near)
        self.ids[name] = mid
        return mid

    def entity(self, name: str, scopes: tuple[str, ...] = ("a",), near: bool = False) -> int:
        now = time.time()
        eid = stores.sql(
            self.conn,
            "INSERT INTO entities (name, canonical_name, kind, created_at, updated_at) VALUES (?, ?, 'entity', ?, ?) RETURNING id",
            name,
            name,
            now,
            now,
        ).fetchone()[0]
        for s in scopes:
            stores.sql(self.conn, "INSERT INTO entity_scopes VALUES (?, ?)", eid, self.scope(s))
        self.vec("entity", eid, near)
        self.ids[name] = eid
        return eid

    def relation(self, name: str, source: str, target: str) -> int:
        rid = stores.sql(
            self.conn,
            "INSERT INTO relations (source_id, target_id, relation_type, created_at) VALUES (?, ?, 'uses', ?) RETURNING id",
            self.ids[source],
            self.ids[target],
            time.time(),
        ).fetchone()[0]
        stores.sql(self.conn, "INSERT INTO relation_scopes VALUES (?, ?)", rid, self.scope("a"))
        self.vec("relation", rid, False)
        self.ids[name] = rid
        return rid


def build(conn: sqlite3.Connection, tx: StoreTx) -> Graph:
    """Paths: seed m-seed -> billing -> m-two-hop; billing -(uses)- stripe -> m-stripe;
    a relation-linked memory; a memory three hops out; a hub; noise; scope b."""
    g = Graph(conn, tx)
    g.entity("billing")
    g.entity("stripe", near=True)  # an entity seed
    g.entity("hub", scopes=("a", "b"))
    g.entity("far")
    g.relation("billing-uses-stripe", "billing", "stripe")
    g.memory("m-seed", near=True, entities=["billing"])
    g.memory("m-two-hop", entities=["billing", "hub"])
    g.memory("m-stripe", entities=["stripe"])
    g.memory("m-relation", relations=["billing-uses-stripe"])
    g.memory("m-far", entities=["far"], text="renews refresh_token")  # a term, with m-term
    g.memory("m-term", text="sets refresh_token")  # seed -> billing -> m-two-hop -> hub -> ...
    g.memory("m-bridge", entities=["far", "hub"])
    g.memory("m-b", scope="b", entities=["billing", "hub"])
    g.memory("m-review on 4 May 2023", entities=["stripe"])
    for i in range(8):
        g.memory(f"noise-{i}", entities=["hub"] if i % 2 else [])
    return g


@pytest.fixture
def backends_pair(tmp_path: Path, pg_server: stores.PgServer) -> Iterator[dict[str, Any]]:
    """name -> (writer connection, reader transaction view, graph) on SQLite and PostgreSQL."""
    out: dict[str, Any] = {}
    opened: list[sqlite3.Connection] = []
    try:
        for name, url in (("sqlite", None), ("postgresql", pg_server.database())):
            path = tmp_path / name / "memtrio.sqlite"
            path.parent.mkdir()
            backend = backends.load(url, path)
            writer = backend.open_writer(busy_timeout_ms=5000, durability="sync")
            opened.append(writer)
            graph = build(writer, backend.tx_maker()(writer))
            reader = backend.open_reader(5000)
            opened.append(reader)
            out[name] = (writer, backend.tx_maker()(reader), graph)
        yield out
    finally:
        for conn in opened:
            conn.close()


def loaded(reader: StoreTx, terms: bool = False) -> RecallCache:
    """A cache as the ranker loads it (`Ranker._load_sync`)."""
    cache = RecallCache(
        MODEL, REVISION, DIM, terms=terms, dates=True, stored_edges=reader.snapshot.keeps_graph()
    )
    connections.run_read(reader.conn, lambda _: cache.load(reader.snapshot))
    return cache


def ranked(
    cache: RecallCache,
    tx: StoreTx,
    qvec: np.ndarray,
    scopes: list[str] | None = None,
    p: rank_mod.Params = PARAMS,
    query: str = "billing",
) -> list[tuple[int, float]]:
    masks = {
        kind: cache.items[kind].allowed(cache.selected_scopes(scopes))
        for kind in ("memory", "entity", "relation")
    }
    return rank_mod.rank(cache, tx, query, qvec, masks, 50, p, lexical=[])


def names(graph: Graph, ranking: list[tuple[int, float]]) -> list[str]:
    by_id = {graph.ids[n]: n for n in graph.ids if n.startswith(("m-", "noise-"))}
    return [by_id[i] for i, _ in ranking]


@pytest.mark.parametrize(
    ("scopes", "terms"), [(None, False), (["a"], False), (["b"], False), (["a"], True)]
)
def test_postgresql_ranks_a_multi_hop_graph_as_sqlite(
    backends_pair: dict[str, Any], scopes: list[str] | None, terms: bool
) -> None:
    results = {}
    query = "who reads refresh_token" if terms else "billing"
    for name, (_, reader, graph) in backends_pair.items():
        cache = loaded(reader, terms)
        results[name] = ranked(cache, reader, graph.query, scopes, query=query)
    lite, pg = results["sqlite"], results["postgresql"]
    graph = backends_pair["sqlite"][2]
    assert names(graph, pg) == names(graph, lite)
    np.testing.assert_allclose([s for _, s in pg], [s for _, s in lite], rtol=1e-4)
    if scopes != ["b"]:
        order = names(graph, lite)
        # The graph carried rank two hops out, through an entity and through a relation.
        assert {"m-two-hop", "m-stripe", "m-relation"} <= set(order)
        assert order.index("m-two-hop") < order.index("noise-0")
    if terms:  # the term named in the query seeds its two memories, linked only through it
        term_cache = loaded(backends_pair["postgresql"][1], terms)
        assert term_cache.stats()["edges"] == 2  # memory-term links, from the text
        assert names(graph, lite)[:2] == names(graph, pg)[:2]
        assert {"m-far", "m-term"} <= set(names(graph, lite)[:4])


def test_the_postgresql_cache_holds_no_graph_yet_walks_two_hops(
    backends_pair: dict[str, Any],
) -> None:
    writer, reader, graph = backends_pair["postgresql"]
    cache = loaded(reader)
    assert cache.stats()["edges"] == 0 and cache.adj == {}
    # Regression: the dates of memories were read with SQLite's GLOB, and the cache of a
    # PostgreSQL store never loaded (every recall fell back to lexical).
    assert cache.dates is not None and list(cache.dates) == [graph.ids["m-review on 4 May 2023"]]
    one = replace(PARAMS, seed_top_k=1)  # one memory seed: m-seed
    walked = dict(ranked(cache, reader, graph.query, ["a"], one))
    flat = dict(ranked(cache, reader, graph.query, ["a"], replace(one, use_graph=False)))
    two_hop = graph.ids["m-two-hop"]
    assert list(flat) == [graph.ids["m-seed"]]
    assert walked.get(two_hop, 0.0) > 0
    # A memory written later (another process, say) is walked to once the cache knows it,
    # and the cache still keeps no edge.
    late = graph.memory("m-late", entities=["billing"])
    cache.apply(reader.snapshot, [Change(kind="memory", id=late)])
    assert cache.stats()["edges"] == 0
    assert dict(ranked(cache, reader, graph.query, ["a"], one)).get(late, 0.0) > 0


def test_an_entity_gaining_a_scope_through_a_memory_is_followed_without_the_graph(
    backends_pair: dict[str, Any],
) -> None:
    writer, reader, graph = backends_pair["postgresql"]
    cache = loaded(reader)
    far = graph.ids["far"]
    assert not cache.items["entity"].allowed(cache.selected_scopes(["b"]))[far]
    mid = graph.memory("m-b-far", scope="b", entities=["far"])
    stores.sql(writer, "INSERT INTO entity_scopes VALUES (?, ?)", far, graph.scope("b"))
    cache.apply(
        reader.snapshot, [Change(kind="memory", id=mid)]
    )  # the memory only, as the store says
    assert cache.items["entity"].allowed(cache.selected_scopes(["b"]))[far]


class CountingConnection:
    """A PostgreSQL connection that counts the statements run on it."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.statements = 0

    def native(self, sql: str, params: Any = ()) -> Any:
        self.statements += 1
        return self.conn.native(sql, params)


def test_the_neighbourhood_costs_a_bounded_number_of_queries(
    backends_pair: dict[str, Any],
) -> None:
    _, reader, graph = backends_pair["postgresql"]
    cache = loaded(reader)
    masks = {kind: cache.items[kind].allowed(None) for kind in ("memory", "entity", "relation")}
    counting = CountingConnection(reader.conn)
    counted = PgSnapshot(counting)  # type: ignore[arg-type] # native() is all it calls
    start = [node("memory", graph.ids["m-seed"]), node("entity", graph.ids["stripe"])]
    nodes = sql_graph.neighbourhood(counted, start, masks, cache.adj, 0, 2, 1_500)
    links = sql_graph.subgraph_links(counted, nodes, cache.adj)
    # Two hops of at most six statements, then three for the edges between the nodes.
    assert counting.statements <= 2 * 6 + 3
    reached = {node_id(n) for n in nodes if node_kind(n) == KIND_CODE["memory"]}
    assert {graph.ids["m-two-hop"], graph.ids["m-stripe"], graph.ids["m-b"]} <= reached
    assert graph.ids["m-far"] not in reached  # three hops out
    # The edges between the nodes reached are there (an entity's and a relation's),
    # and only those: the hub, three hops out, is neither a node nor a peer.
    billing = node("entity", graph.ids["billing"])
    assert node("memory", graph.ids["m-two-hop"]) in links[billing]
    relation = node("relation", graph.ids["billing-uses-stripe"])
    assert links[relation] == {
        billing,
        node("entity", graph.ids["stripe"]),
        node("memory", graph.ids["m-relation"]),
    }
    assert node("entity", graph.ids["hub"]) not in links
    assert all(m in set(nodes) for peers in links.values() for m in peers)
    # A cap stops the walk.
    assert len(sql_graph.neighbourhood(reader.snapshot, start, masks, cache.adj, 0, 2, 5)) == 5
