"""The dashboard's rows and results, the same on both backends (`interfaces.browse`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

from ..interfaces.browse import (
    SORTS,
    BrowsedMemory,
    EntityRef,
    GraphLink,
    GraphNode,
    GraphOverview,
    MemoryFilter,
    Sort,
    TypeCount,
)
from .memories import memory_row

# The column of each sort order (alias ``m``).
_ORDER = {
    "created": "m.created_at",
    "updated": "m.updated_at",
    "importance": "m.importance",
    "accessed": "m.access_count",
    "id": "m.id",
}

# A condition of a `MemoryFilter` beyond visibility; each backend spells each one.
Condition = Literal["memory_type", "since", "until", "min_importance", "only_scope", "ids"]


def conditions(chosen: MemoryFilter) -> list[tuple[Condition, Any]]:
    """The conditions ``chosen`` sets, in a fixed order, each with its value."""
    found: list[tuple[Condition, Any]] = []
    if chosen.memory_type:
        found.append(("memory_type", chosen.memory_type))
    if chosen.since is not None:
        found.append(("since", chosen.since))
    if chosen.until is not None:
        found.append(("until", chosen.until))
    if chosen.min_importance is not None:
        found.append(("min_importance", chosen.min_importance))
    if chosen.only_scope:
        found.append(("only_scope", chosen.only_scope))
    if chosen.ids is not None:
        found.append(("ids", [int(i) for i in chosen.ids]))
    return found


def order_by(sort: Sort, descending: bool) -> str:
    """The ORDER BY of a page: ``sort`` (an unknown one: by id), then the newest id first."""
    key = _ORDER[sort if sort in SORTS else "id"]
    return f"{key} {'DESC' if descending else 'ASC'}, m.id DESC"


def browsed_memory(
    row: Sequence[Any], scopes: Iterable[Sequence[Any]], entities: Iterable[Sequence[Any]]
) -> BrowsedMemory:
    """A row of `rows.memories.COLUMNS` with its scopes' (name,) rows and its entities'
    (id, name, kind) rows, as a `BrowsedMemory`."""
    return BrowsedMemory(
        **memory_row(row).as_dict(),
        scopes=[s[0] for s in scopes],
        entities=[EntityRef(id=e[0], name=e[1], kind=e[2]) for e in entities],
    )


def type_counts(rows: Iterable[Sequence[Any]]) -> list[TypeCount]:
    """(type, count) rows as `TypeCount`s."""
    return [TypeCount(name=name, memories=int(count)) for name, count in rows]


def node_names(nodes: Sequence[Sequence[Any]]) -> dict[int, str]:
    """The names of an overview's (id, name, kind, degree) node rows, by id."""
    return {int(n[0]): n[1] for n in nodes}


def overview(
    nodes: Sequence[Sequence[Any]], links: Sequence[Sequence[Any]], total: int, edges: int
) -> GraphOverview:
    """A `GraphOverview` of (id, name, kind, degree) node rows, (source id, type, target
    id) link rows (at most ``edges`` shown: one more says there are more) and ``total``
    visible entities."""
    names = node_names(nodes)
    return GraphOverview(
        nodes=[GraphNode(name=n[1], kind=n[2], degree=int(n[3])) for n in nodes],
        links=[
            GraphLink(source=names[s], relation_type=t, target=names[o])
            for s, t, o in links[:edges]
        ],
        total=total,
        truncated=total > len(nodes) or len(links) > edges,
    )
