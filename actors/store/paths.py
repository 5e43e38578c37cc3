"""Relation paths around an entity (the ``graph`` tool): breadth first, never through an entity twice."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from ...protocol.errors import NotFound
from .entities import find_entity
from .scope_rows import scope_ids


def graph_paths(
    conn: sqlite3.Connection,
    entity: str,
    direction: str,
    max_depth: int,
    limit: int,
    selection: Sequence[str],
) -> dict[str, Any]:
    """Simple paths (no entity twice) of length 1..max_depth around ``entity``, breadth first."""
    start = find_entity(conn, entity)
    if start is None:
        raise NotFound(f"entity {entity!r} not found (entities are created by remember or relate)")
    ids = list(scope_ids(conn, selection).values())
    inner = ",".join(str(i) for i in ids) or "NULL"
    vis = (
        f"(EXISTS (SELECT 1 FROM relation_scopes rs WHERE rs.relation_id = r.id AND rs.scope_id IN ({inner}))"
        " OR NOT EXISTS (SELECT 1 FROM relation_scopes rs WHERE rs.relation_id = r.id))"
    )
    names: dict[int, tuple[str, str]] = {start["id"]: (start["name"], start["kind"])}

    def edges(node: int) -> list[tuple[int, int, str, int]]:
        """(relation id, source id, type, target id) touching node, in the asked direction."""
        out: list[tuple[int, int, str, int]] = []
        queries = []
        if direction in ("outgoing", "both"):
            queries.append("r.source_id = ?")
        if direction in ("incoming", "both"):
            queries.append("r.target_id = ?")
        for cond in queries:
            for rid, src, rtype, tgt, sname, skind, tname, tkind in conn.execute(
                f"""SELECT r.id, r.source_id, r.relation_type, r.target_id, s.name, s.kind, t.name, t.kind
                    FROM relations r JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id
                    WHERE {cond} AND {vis} ORDER BY r.relation_type, r.id""",
                (node,),
            ):
                names[src] = (sname, skind)
                names[tgt] = (tname, tkind)
                out.append((rid, src, rtype, tgt))
        return out

    paths: list[dict[str, Any]] = []
    frontier: list[tuple[int, list[tuple[int, int, str, int]], frozenset[int]]] = [
        (start["id"], [], frozenset([start["id"]]))
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
