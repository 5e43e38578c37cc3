"""Walking the graph: neighbors, subgraphs and paths, breadth first over visible relations.

`Adjacency` fetches the relations of a whole frontier in one query per chunk
and caches them, so a traversal costs one round of queries per hop.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..store.interfaces import ReadTx
from .args import AllPathsArgs, NeighborsArgs, PathArgs, SubgraphArgs
from .lookup import (
    entity_rows,
    get_one,
    in_order,
    missing,
    observation_contents,
    resolve,
)
from .records import JsonObject, entities_out, entity_out, page, relation_out
from .view import Scoped

# find_all_paths gives up (truncated) after this many edge expansions.
MAX_PATH_EXPANSIONS = 200_000

Edge = tuple[int, int, str, int]  # relation id, source id, type, target id


class Adjacency:
    """Visible relations around nodes, fetched a frontier at a time and cached."""

    def __init__(
        self,
        tx: ReadTx,
        sc: Scoped,
        direction: str = "both",
        relation_type: str | None = None,
    ) -> None:
        self.tx, self.sc, self.direction, self.rtype = tx, sc, direction, relation_type
        self.cache: dict[int, list[Edge]] = {}

    def load(self, nodes: Iterable[int]) -> None:
        todo = [n for n in dict.fromkeys(nodes) if n not in self.cache]
        for n in todo:
            self.cache[n] = []
        if not todo:
            return
        sides = {"outgoing": [True], "incoming": [False], "both": [True, False]}
        outgoing = sides.get(self.direction, [])
        for out in outgoing:
            for e in self.tx.graph_edges.edges(todo, self.sc.ids, out, self.rtype):
                edge = (e.id, e.source_id, e.relation_type, e.target_id)
                key = edge[1] if out else edge[3]
                if edge[1] == edge[3] and not out and len(outgoing) == 2:
                    continue  # a self-loop, already listed as outgoing
                self.cache[key].append(edge)

    def edges(self, node: int) -> list[Edge]:
        if node not in self.cache:
            self.load([node])
        return self.cache[node]


def other_end(edge: Edge, node: int) -> int:
    return edge[3] if edge[1] == node else edge[1]


def bfs(adj: Adjacency, starts: Sequence[int], depth: int) -> dict[int, int]:
    """Distance of every node within ``depth`` hops of ``starts``."""
    dist = {s: 0 for s in starts}
    frontier = list(starts)
    for d in range(1, depth + 1):
        adj.load(frontier)
        nxt = []
        for node in frontier:
            for edge in adj.edges(node):
                other = other_end(edge, node)
                if other not in dist:
                    dist[other] = d
                    nxt.append(other)
        if not nxt:
            break
        frontier = nxt
    return dist


def nearest_first(dist: dict[int, int]) -> list[int]:
    return sorted(dist, key=lambda n: (dist[n], n))


def _relations_out(tx: ReadTx, edges: Iterable[Edge]) -> list[dict[str, str]]:
    """Edges as relation records, with their endpoints' names."""
    edges = list(edges)
    rows = entity_rows(tx, list({i for e in edges for i in (e[1], e[3])}))
    return [relation_out(rows[e[1]].name, e[2], rows[e[3]].name) for e in edges]


# -- paths -------------------------------------------------------------------------------


def _path_out(tx: ReadTx, nodes: list[int], edges: list[Edge]) -> JsonObject:
    rows = entity_rows(tx, list({*nodes, *(e[1] for e in edges), *(e[3] for e in edges)}))
    return {
        "entities": [rows[n].name for n in nodes],
        "relations": [relation_out(rows[e[1]].name, e[2], rows[e[3]].name) for e in edges],
        "length": len(edges),
    }


def find_path(tx: ReadTx, sc: Scoped, args: PathArgs) -> JsonObject:
    """A shortest path (fewest relations) between two entities, breadth first."""
    a, b = get_one(tx, sc, args.from_), get_one(tx, sc, args.to)
    depth = args.maxDepth
    if a.id == b.id:
        return {"found": True, **_path_out(tx, [a.id], [])}
    adj = Adjacency(tx, sc, "outgoing" if args.directed else "both")
    parent: dict[int, tuple[int, Edge] | None] = {a.id: None}
    frontier = [a.id]
    for _ in range(depth):
        adj.load(frontier)
        nxt = []
        for node in frontier:
            for edge in adj.edges(node):
                other = other_end(edge, node)
                if other in parent:
                    continue
                parent[other] = (node, edge)
                if other == b.id:
                    nodes, edges = _walk_back(parent, b.id)
                    return {"found": True, **_path_out(tx, nodes, edges)}
                nxt.append(other)
        if not nxt:
            break
        frontier = nxt
    return {"found": False, "entities": [], "relations": [], "length": 0, "maxDepth": depth}


def _walk_back(
    parent: dict[int, tuple[int, Edge] | None], end: int
) -> tuple[list[int], list[Edge]]:
    """The path to ``end`` (its nodes and edges, from the start) that ``parent`` records."""
    nodes, edges = [end], []
    step = parent[end]
    while step is not None:
        edges.append(step[1])
        nodes.append(step[0])
        step = parent[step[0]]
    return nodes[::-1], edges[::-1]


def find_all_paths(tx: ReadTx, sc: Scoped, args: AllPathsArgs) -> JsonObject:  # noqa: C901
    """Simple paths (no entity twice, so cycles end) between two entities, shortest first."""
    a, b = get_one(tx, sc, args.from_), get_one(tx, sc, args.to)
    depth, limit = args.maxDepth, args.limit
    adj = Adjacency(tx, sc, "outgoing" if args.directed else "both")
    # Prune: only nodes that can still reach b within the remaining hops.
    rev = Adjacency(tx, sc, "incoming" if args.directed else "both")
    to_b = bfs(rev, [b.id], depth)
    found: list[tuple[list[int], list[Edge]]] = []
    expansions = 0
    truncated = False
    # Iterative deepening keeps results shortest first.
    for limit_depth in range(1, depth + 1):
        stack: list[tuple[int, list[int], list[Edge]]] = [(a.id, [a.id], [])]
        while stack:
            node, nodes, edges = stack.pop()
            remaining = limit_depth - len(edges)
            if remaining == 0:
                continue
            for edge in reversed(adj.edges(node)):
                expansions += 1
                if expansions > MAX_PATH_EXPANSIONS:
                    truncated = True
                    break
                other = other_end(edge, node)
                if other in nodes or to_b.get(other, depth + 1) > remaining - 1:
                    continue
                if other == b.id:
                    if len(edges) + 1 == limit_depth:
                        found.append(([*nodes, other], [*edges, edge]))
                        if len(found) >= limit:
                            truncated = True
                            break
                    continue
                stack.append((other, [*nodes, other], [*edges, edge]))
            if truncated:
                break
        if truncated or a.id == b.id:
            break
    return {
        "paths": [_path_out(tx, n, e) for n, e in found],
        "truncated": truncated,
    }


# -- neighborhoods -----------------------------------------------------------------------


def extract_subgraph(tx: ReadTx, sc: Scoped, args: SubgraphArgs) -> JsonObject:
    """The entities within ``depth`` hops of the named ones, nearest first, and the relations among them."""
    names, offset, mode = args.names, args.offset, args.mode
    found = resolve(tx, sc, names)
    adj = Adjacency(tx, sc)
    dist = bfs(adj, [e.id for e in in_order(found, names)], args.depth)
    ordered = nearest_first(dist)
    chosen_ids = ordered[offset : offset + args.limit]
    rows = entity_rows(tx, chosen_ids)
    chosen = [rows[i] for i in chosen_ids if i in rows]
    result: JsonObject = {"entities": entities_out(tx, sc, chosen, mode)}
    if mode != "names":
        adj.load(chosen_ids)
        rels: dict[int, Edge] = {}
        for n in chosen_ids:
            for edge in adj.edges(n):
                if edge[1] in dist and edge[3] in dist and edge[1] == n:
                    rels[edge[0]] = edge
        result["relations"] = _relations_out(tx, (e for _, e in sorted(rels.items())))
    result["missing"] = missing(found, names)
    result["total"] = len(ordered)
    result["nextOffset"] = page(len(ordered), offset, len(chosen_ids))
    return result


def get_neighbors(tx: ReadTx, sc: Scoped, args: NeighborsArgs) -> JsonObject:
    """The entities within ``depth`` hops of one entity, nearest first, with their distance."""
    ent = get_one(tx, sc, args.name)
    adj = Adjacency(tx, sc, args.direction, args.relationType)
    dist = bfs(adj, [ent.id], args.depth)
    dist.pop(ent.id)
    ordered = nearest_first(dist)
    offset, mode = args.offset, args.mode
    chosen_ids = ordered[offset : offset + args.limit]
    rows = entity_rows(tx, chosen_ids)
    neighbors: list[JsonObject | str]
    if mode == "names":
        neighbors = [rows[i].name for i in chosen_ids]
    else:
        obs = observation_contents(tx, sc, chosen_ids) if mode == "full" else {}
        neighbors = []
        for i in chosen_ids:
            item = entity_out(rows[i], "full" if mode == "full" else "summary", obs)
            assert isinstance(item, dict)
            if mode != "full":
                item.pop("observationCount", None)
            item["distance"] = dist[i]
            neighbors.append(item)
    return {
        "entity": ent.name,
        "neighbors": neighbors,
        "total": len(ordered),
        "nextOffset": page(len(ordered), offset, len(chosen_ids)),
    }
