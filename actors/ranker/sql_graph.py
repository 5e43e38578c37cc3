"""PostgreSQL: the seeds' neighbourhood for Personalized PageRank, read from the store.

On SQLite the ranker keeps the whole memory / entity / relation graph in
memory (`graph.RecallCache.adj`). On a PostgreSQL store, shared by many
processes and possibly far larger, it keeps none of it: after the seeds are
known, `neighbourhood` reads their neighbourhood from SQL, breadth first, hop
by hop (at most ``hops`` hops, ``cap`` nodes), with the edges the in-memory
graph has:

- memory — entity (``memory_entities``), memory — relation
  (``memory_relations``), relation — its source and target entity
  (``relations``);
- memory — term, when ``terms`` is on: those come from the memories' text and
  live in the cache only (``cache.adj`` holds nothing else on PostgreSQL).

Each hop is at most six indexed queries (one per kind of edge and direction,
the frontier's ids as one array); the edges between the nodes reached are
then read in three more, so a recall costs a bounded number of round trips
whatever the store's size. A hub (an entity with thousands of memories) gives
at most `HUB_ROWS` of its peers per hop, the first by id: the walk stops at
``cap`` nodes anyway.

The nodes' attributes (scope, type, time) are the cache's (`ItemTable`): a
node the cache does not know yet (written by another process a moment ago)
is outside every mask and is skipped, as on SQLite.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Mapping

import numpy as np

from .graph import KIND_CODE, node, node_id, node_kind

HUB_ROWS = 2_000  # peers of one node read per hop, at most

MEMORY, ENTITY, RELATION, TERM = (KIND_CODE[k] for k in ("memory", "entity", "relation", "term"))

# (frontier kind, SQL, kind of the peers): each statement takes the frontier's ids and
# `HUB_ROWS`, and gives (frontier id, peer id). Every lookup is by an index:
# memory_entities / memory_relations by their primary key (memory first) or their
# reverse index, relations by id, by (source_id, ...) unique key and by target_id.
_PEERS = (
    (
        MEMORY,
        """SELECT f.id, p.entity_id FROM unnest(?::bigint[]) AS f(id) CROSS JOIN LATERAL
           (SELECT entity_id FROM memory_entities WHERE memory_id = f.id
            ORDER BY entity_id LIMIT ?) p""",
        ENTITY,
    ),
    (
        MEMORY,
        """SELECT f.id, p.relation_id FROM unnest(?::bigint[]) AS f(id) CROSS JOIN LATERAL
           (SELECT relation_id FROM memory_relations WHERE memory_id = f.id
            ORDER BY relation_id LIMIT ?) p""",
        RELATION,
    ),
    (
        ENTITY,
        """SELECT f.id, p.memory_id FROM unnest(?::bigint[]) AS f(id) CROSS JOIN LATERAL
           (SELECT memory_id FROM memory_entities WHERE entity_id = f.id
            ORDER BY memory_id LIMIT ?) p""",
        MEMORY,
    ),
    (
        ENTITY,
        """SELECT f.id, p.id FROM unnest(?::bigint[]) AS f(id) CROSS JOIN LATERAL
           ((SELECT id FROM relations WHERE source_id = f.id)
            UNION (SELECT id FROM relations WHERE target_id = f.id) ORDER BY id LIMIT ?) p""",
        RELATION,
    ),
    (
        RELATION,
        """SELECT f.id, p.memory_id FROM unnest(?::bigint[]) AS f(id) CROSS JOIN LATERAL
           (SELECT memory_id FROM memory_relations WHERE relation_id = f.id
            ORDER BY memory_id LIMIT ?) p""",
        MEMORY,
    ),
)
# A relation's two entities: one row each, no hub to bound.
_RELATION_ENDS = "SELECT id, source_id, target_id FROM relations WHERE id = ANY(?::bigint[])"
# The edges between the nodes reached (by kind): (memory, entity), (memory, relation).
_EDGES_MEMORY_ENTITY = """SELECT memory_id, entity_id FROM memory_entities
    WHERE memory_id = ANY(?::bigint[]) AND entity_id = ANY(?::bigint[])"""
_EDGES_MEMORY_RELATION = """SELECT memory_id, relation_id FROM memory_relations
    WHERE memory_id = ANY(?::bigint[]) AND relation_id = ANY(?::bigint[])"""


def _by_kind(nodes: Iterable[int]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {MEMORY: [], ENTITY: [], RELATION: [], TERM: []}
    for n in nodes:
        out[node_kind(n)].append(node_id(n))
    return out


def _code_kind(code: int) -> str:
    return next(k for k, c in KIND_CODE.items() if c == code)


def _peers(
    conn: sqlite3.Connection, frontier: list[int], cached: Mapping[int, set[int]]
) -> dict[int, list[int]]:
    """Node -> its peers (memories, entities, relations from SQL; terms from ``cached``)."""
    ids = _by_kind(frontier)
    found: dict[int, set[int]] = {}
    for kind, sql, peer in _PEERS:
        if ids[kind]:
            name, peer_name = _code_kind(kind), _code_kind(peer)
            for a, b in conn.execute(sql, (ids[kind], HUB_ROWS)):
                found.setdefault(node(name, int(a)), set()).add(node(peer_name, int(b)))
    if ids[RELATION]:
        for rel, source, target in conn.execute(_RELATION_ENDS, (ids[RELATION],)):
            peers = found.setdefault(node("relation", int(rel)), set())
            peers.update((node("entity", int(source)), node("entity", int(target))))
    for n in frontier:  # terms: a memory's, and a term's memories
        if node_kind(n) in (MEMORY, TERM) and n in cached:
            found.setdefault(n, set()).update(cached[n])
    return {n: sorted(peers) for n, peers in found.items()}


def neighbourhood(
    conn: sqlite3.Connection,
    start: list[int],
    masks: dict[str, np.ndarray],
    cached: Mapping[int, set[int]],
    term_limit: int,
    hops: int,
    cap: int,
) -> list[int]:
    """Allowed nodes within ``hops`` of ``start`` (breadth first, seeds first, at most ``cap``).

    The walk of `rank.neighbourhood` over the store's tables (`walk`, each hop's
    peers read by `_peers`). ``cached``: the cache's term links.
    """
    return walk(
        start,
        masks,
        lambda frontier: _peers(conn, frontier, cached),
        lambda term: len(cached.get(term, ())),
        term_limit,
        hops,
        cap,
    )


def walk(
    start: list[int],
    masks: dict[str, np.ndarray],
    peers_of: Callable[[list[int]], Mapping[int, Iterable[int]]],
    term_degree: Callable[[int], int],
    term_limit: int,
    hops: int,
    cap: int,
) -> list[int]:
    """Allowed nodes within ``hops`` of ``start`` (breadth first, seeds first, at most ``cap``).

    ``peers_of(frontier)`` gives each frontier node's peers (the cache's
    adjacency, or one hop read from SQL). A memory, entity or relation outside
    ``masks`` (or unknown to them) is not entered; a term is walked when it links
    2 to ``term_limit`` memories (``term_degree``).
    """
    kinds = {KIND_CODE[k]: masks[k] for k in masks}
    seen = dict.fromkeys(start)
    frontier = list(start)
    for _ in range(hops):
        if len(seen) >= cap or not frontier:
            break
        peers = peers_of(frontier)
        nxt: list[int] = []
        for n in frontier:
            for m in peers.get(n, ()):
                if m in seen:
                    continue
                kind = node_kind(m)
                if kind == TERM:
                    if not 1 < term_degree(m) <= term_limit:
                        continue
                else:
                    mask = kinds[kind]
                    i = node_id(m)
                    if i >= len(mask) or not mask[i]:
                        continue
                seen[m] = None
                nxt.append(m)
                if len(seen) >= cap:
                    return list(seen)
        frontier = nxt
    return list(seen)


def subgraph_links(
    conn: sqlite3.Connection, nodes: list[int], cached: Mapping[int, set[int]]
) -> dict[int, set[int]]:
    """Every edge between ``nodes``, as adjacency sets (three queries, and the cached terms)."""
    ids = _by_kind(nodes)
    inside = set(nodes)
    links: dict[int, set[int]] = {}

    def link(a: int, b: int) -> None:
        if a in inside and b in inside:
            links.setdefault(a, set()).add(b)
            links.setdefault(b, set()).add(a)

    memories, entities, relations = ids[MEMORY], ids[ENTITY], ids[RELATION]
    if memories and entities:
        for m, e in conn.execute(_EDGES_MEMORY_ENTITY, (memories, entities)):
            link(node("memory", int(m)), node("entity", int(e)))
    if memories and relations:
        for m, r in conn.execute(_EDGES_MEMORY_RELATION, (memories, relations)):
            link(node("memory", int(m)), node("relation", int(r)))
    if relations:
        for r, source, target in conn.execute(_RELATION_ENDS, (relations,)):
            link(node("relation", int(r)), node("entity", int(source)))
            link(node("relation", int(r)), node("entity", int(target)))
    for n in nodes:
        if node_kind(n) == MEMORY:
            for t in cached.get(n, ()):
                link(n, t)
    return links
