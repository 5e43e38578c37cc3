"""The seeds' neighbourhood for Personalized PageRank, read from the store.

Where the store says a reader may keep the graph (`Snapshot.keeps_graph`: SQLite)
the ranker keeps the whole memory / entity / relation graph in memory
(`graph.RecallCache.adj`). Where it may not (PostgreSQL: shared by many
processes and possibly far larger), it keeps none of it: after the seeds are
known, `neighbourhood` reads their neighbourhood from the store, breadth first, hop
by hop (at most ``hops`` hops, ``cap`` nodes), with the edges the in-memory
graph has:

- memory — entity (``memory_entities``), memory — relation
  (``memory_relations``), relation — its source and target entity
  (``relations``);
- memory — term, when ``terms`` is on: those come from the memories' text and
  live in the cache only (``cache.adj`` holds nothing else then).

Each hop is at most six reads (`Snapshot.peers`, one per kind of edge and
direction, and the relations' ends); the edges between the nodes reached are
then read in three more, so a recall costs a bounded number of round trips
whatever the store's size. A hub (an entity with thousands of memories) gives
at most `HUB_ROWS` of its peers per hop, the first by id: the walk stops at
``cap`` nodes anyway.

The nodes' attributes (scope, type, time) are the cache's (`ItemTable`): a
node the cache does not know yet (written by another process a moment ago)
is outside every mask and is skipped, as on SQLite.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import numpy as np

from ..store.interfaces import Snapshot
from ..store.interfaces.snapshot import Kind
from .graph import KIND_CODE, NODE_KINDS, node, node_id, node_kind

HUB_ROWS = 2_000  # peers of one node read per hop, at most

MEMORY, ENTITY, RELATION, TERM = (KIND_CODE[k] for k in ("memory", "entity", "relation", "term"))

# (frontier kind, kind of the peers): each hop reads, for each kind of the frontier's
# nodes, their first `HUB_ROWS` peers of each kind they link to (`Snapshot.peers`).
_PEERS: tuple[tuple[Kind, Kind], ...] = (
    ("memory", "entity"),
    ("memory", "relation"),
    ("entity", "memory"),
    ("entity", "relation"),
    ("relation", "memory"),
)
_CODE: dict[Kind, int] = {"memory": MEMORY, "entity": ENTITY, "relation": RELATION}


def _by_kind(nodes: Iterable[int]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {MEMORY: [], ENTITY: [], RELATION: [], TERM: []}
    for n in nodes:
        out[node_kind(n)].append(node_id(n))
    return out


def _peers(
    snap: Snapshot, frontier: list[int], cached: Mapping[int, set[int]]
) -> dict[int, list[int]]:
    """Node -> its peers (memories, entities, relations from the store; terms from ``cached``)."""
    ids = _by_kind(frontier)
    found: dict[int, set[int]] = {}
    for kind, peer in _PEERS:
        if ids[_CODE[kind]]:
            for a, b in snap.peers(kind, ids[_CODE[kind]], peer, HUB_ROWS):
                found.setdefault(node(kind, int(a)), set()).add(node(peer, int(b)))
    if ids[RELATION]:
        for r in snap.relations(ids[RELATION]):
            peers = found.setdefault(node("relation", r.id), set())
            peers.update((node("entity", r.source_id), node("entity", r.target_id)))
    for n in frontier:  # terms: a memory's, and a term's memories
        if node_kind(n) in (MEMORY, TERM) and n in cached:
            found.setdefault(n, set()).update(cached[n])
    return {n: sorted(peers) for n, peers in found.items()}


def neighbourhood(
    snap: Snapshot,
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
        lambda frontier: _peers(snap, frontier, cached),
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
    adjacency, or one hop read from the store). A memory, entity or relation outside
    ``masks`` (or unknown to them) is not entered; a term is walked when it links
    2 to ``term_limit`` memories (``term_degree``).
    """
    # `node_kind` and `node_id` inlined, the masks as bytes (a hub's thousands of peers
    # are looked at one by one)
    kinds = {KIND_CODE[k]: masks[k].tobytes() for k in masks}
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
                kind = m % NODE_KINDS
                if kind == TERM:
                    if not 1 < term_degree(m) <= term_limit:
                        continue
                else:
                    mask = kinds[kind]
                    i = m // NODE_KINDS
                    if i >= len(mask) or not mask[i]:
                        continue
                seen[m] = None
                nxt.append(m)
                if len(seen) >= cap:
                    return list(seen)
        frontier = nxt
    return list(seen)


def subgraph_links(  # noqa: C901
    snap: Snapshot, nodes: list[int], cached: Mapping[int, set[int]]
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
        for m, e in snap.memory_entities(memories, entities):
            link(node("memory", int(m)), node("entity", int(e)))
    if memories and relations:
        for m, r in snap.memory_relations(memories, relations):
            link(node("memory", int(m)), node("relation", int(r)))
    if relations:
        for rel in snap.relations(relations):
            link(node("relation", rel.id), node("entity", rel.source_id))
            link(node("relation", rel.id), node("entity", rel.target_id))
    for n in nodes:
        if node_kind(n) == MEMORY:
            for t in cached.get(n, ()):
                link(n, t)
    return links
