"""Relation paths around an entity (the ``graph`` tool): breadth first, never through an entity twice."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...protocol.errors import NotFound
from ..store.domain.entities import match_entity
from ..store.interfaces import ReadTx


def graph_paths(  # noqa: C901
    tx: ReadTx,
    entity: str,
    direction: str,
    max_depth: int,
    limit: int,
    selection: Sequence[str],
) -> dict[str, Any]:
    """Simple paths (no entity twice) of length 1..max_depth around ``entity``, breadth first."""
    found = match_entity(tx, entity)
    if found is None:
        raise NotFound(f"entity {entity!r} not found (entities are created by remember or relate)")
    start = {"id": found[0], "name": found[1], "kind": found[2]}
    view = tx.graph.view(selection, [])
    names: dict[int, tuple[str, str]] = {found[0]: (found[1], found[2])}

    def edges(node: int) -> list[tuple[int, int, str, int]]:
        """(relation id, source id, type, target id) touching node, in the asked direction."""
        out: list[tuple[int, int, str, int]] = []
        sides = []
        if direction in ("outgoing", "both"):
            sides.append(True)
        if direction in ("incoming", "both"):
            sides.append(False)
        for outgoing in sides:
            for r in tx.graph_edges.edges_named(node, view, outgoing):
                names[r.source_id] = (r.source, r.source_kind)
                names[r.target_id] = (r.target, r.target_kind)
                out.append((r.id, r.source_id, r.relation_type, r.target_id))
        return out

    paths: list[dict[str, Any]] = []
    frontier: list[tuple[int, list[tuple[int, int, str, int]], frozenset[int]]] = [
        (found[0], [], frozenset([found[0]]))
    ]
    truncated = False
    cache: dict[int, list[tuple[int, int, str, int]]] = {}
    for depth in range(1, max_depth + 1):
        next_frontier = []
        for node, path, on_path in frontier:
            if node not in cache:
                cache[node] = edges(node)
            for edge in cache[node]:
                _, src, _, tgt = edge
                other = tgt if src == node else src
                if other in on_path:
                    continue  # a cycle: this path ends here
                if len(paths) >= limit:
                    truncated = True
                    break
                new_path = [*path, edge]
                paths.append(
                    {
                        "depth": depth,
                        "end": names[other][0],
                        "edges": [
                            {"source": names[s][0], "relation": t, "target": names[g][0]}
                            for _, s, t, g in new_path
                        ],
                    }
                )
                next_frontier.append((other, new_path, on_path | {other}))
            if truncated:
                break
        if truncated or not next_frontier:
            break
        frontier = next_frontier
    return {
        "entity": {"id": start["id"], "name": start["name"], "kind": start["kind"]},
        "direction": direction,
        "paths": paths,
        "truncated": truncated,
    }
