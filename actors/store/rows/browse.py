"""The dashboard's rows and results, the same on both backends (`interfaces.browse`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, ClassVar, Literal

from ..interfaces.browse import (
    SORTS,
    BrowsedMemory,
    EntityRef,
    GraphLink,
    GraphNode,
    GraphOverview,
    MemoryFilter,
    MemoryPage,
    Sort,
    TypeCount,
)
from .memories import memory_row
from .sql import Rows

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


class BrowseBase(Rows):
    """`interfaces.browse.Browse`'s shared bodies. Each backend names its statements (class
    attributes in its dialect) and writes `ids_in`, `_scope_ids` and `_where`."""

    COUNT_PAGE = "SELECT count(*) FROM memories m WHERE {where}"
    PAGE: ClassVar[str]  # (*params, limit, offset); {where} and {order}
    SCOPES_OF: ClassVar[str]  # (memory id,): (name,) rows by name
    ENTITIES_OF: ClassVar[str]  # (memory id,): (id, name, kind) rows by name
    MEMORY_TYPES: ClassVar[str]  # (type, count) rows, types compared without case
    MEMORY_TEXT: ClassVar[str]  # (memory id,)
    MENTIONS: ClassVar[str]  # (memory id,): (id, name) rows
    # An overview's nodes, the most linked first ({degree}, {ent}; {limit}: its parameter),
    # and the links between them ({shown}, {rel}; {edges}: its parameter).
    NODES = """SELECT e.id, e.name, e.kind, coalesce(g.d, 0) FROM entities e
        LEFT JOIN ({degree}) g ON g.n = e.id WHERE {ent}
        ORDER BY coalesce(g.d, 0) DESC, e.id LIMIT {limit}"""
    DEGREE = """SELECT n, count(*) AS d FROM (
        SELECT r.source_id AS n FROM relations r WHERE {rel}
        UNION ALL SELECT r.target_id AS n FROM relations r WHERE {rel}) g GROUP BY n"""
    LINKS = """SELECT r.source_id, r.relation_type, r.target_id FROM relations r
        WHERE r.source_id {shown} AND r.target_id {shown} AND {rel}
        ORDER BY r.id LIMIT {edges}"""

    def ids_in(self, name: str, ids: list[int]) -> tuple[str, dict[str, Any]]:
        """The dialect's test that a column is one of ``ids`` (``name``: its parameter, if
        it has one), and its parameters."""
        raise NotImplementedError

    def mark(self, name: str) -> str:
        """The dialect's placeholder of the named parameter ``name``."""
        raise NotImplementedError

    def _scope_ids(self, names: list[str]) -> list[int]:
        raise NotImplementedError

    def _where(self, chosen: MemoryFilter) -> tuple[str, list[Any]]:
        raise NotImplementedError

    def page(
        self, chosen: MemoryFilter, sort: Sort, descending: bool, offset: int, limit: int
    ) -> MemoryPage:
        where, params = self._where(chosen)
        total = self.number(self.COUNT_PAGE.format(where=where), params)
        sql = self.PAGE.format(where=where, order=order_by(sort, descending))
        rows = self.all(sql, [*params, limit, offset])
        return MemoryPage(memories=[self._memory(row) for row in rows], total=total)

    def _memory(self, row: Sequence[Any]) -> BrowsedMemory:
        scopes = self.all(self.SCOPES_OF, (row[0],))
        return browsed_memory(row, scopes, self.all(self.ENTITIES_OF, (row[0],)))

    def memory_types(self) -> list[TypeCount]:
        return type_counts(self.all(self.MEMORY_TYPES))

    def graph_overview(self, selection: list[str], limit: int, edges: int) -> GraphOverview:
        read_ids = self._scope_ids(selection)
        read, params = self.ids_in("read", read_ids)
        ent, rel = (
            f"(EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id AND x.scope_id {read})"
            f" OR NOT EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id))"
            for table, col, alias in (
                ("entity_scopes", "entity_id", "e"), ("relation_scopes", "relation_id", "r")
            )
        )  # fmt: skip
        if len(read_ids) == self.number("SELECT count(*) FROM scopes"):
            ent = rel = "(1 = 1)"  # every row is linked to a read scope or to none
        total = self.number(f"SELECT count(*) FROM entities e WHERE {ent}", params)
        degree = self.DEGREE.format(rel=rel)
        nodes = self.NODES.format(degree=degree, ent=ent, limit=self.mark("limit"))
        rows = self.all(nodes, {**params, "limit": limit})
        shown, shown_params = self.ids_in("shown", list(node_names(rows)))
        links = self.all(
            self.LINKS.format(shown=shown, rel=rel, edges=self.mark("edges")),
            {**params, **shown_params, "edges": edges + 1},
        )
        return overview(rows, links, total, edges)

    def memory_text(self, memory_id: int) -> str | None:
        row = self.first(self.MEMORY_TEXT, (memory_id,))
        return str(row[0]) if row else None

    def mentions(self, memory_id: int) -> dict[int, str]:
        return {int(i): str(n) for i, n in self.all(self.MENTIONS, (memory_id,))}
