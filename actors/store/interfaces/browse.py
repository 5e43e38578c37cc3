"""Dashboard reads: overviews, listings and details across concepts, for the web UI.

The interface every store backend implements (`sqlite.browse`, `pg.browse`): arguments and
results are msgspec Structs or plain values, never rows, cursors or SQL.
"""

from __future__ import annotations

from typing import Literal, Protocol

import msgspec

# The orders a page of memories can be sorted in (ties: the newest id first).
Sort = Literal["created", "updated", "importance", "accessed", "id"]
SORTS: tuple[Sort, ...] = ("created", "updated", "importance", "accessed", "id")


class MemoryFilter(msgspec.Struct, frozen=True, kw_only=True):
    """Which memories a page lists: those visible in ``selection`` (linked to one of its
    scopes, or to none), of ``memory_type`` (without regard to case), created in
    [``since``, ``until``), of at least ``min_importance``, in ``only_scope``, and
    (``ids``) only these, e.g. the ranked ones of a search."""

    selection: list[str]
    memory_type: str | None = None
    since: float | None = None
    until: float | None = None
    min_importance: float | None = None
    only_scope: str | None = None
    ids: list[int] | None = None


class EntityRef(msgspec.Struct, frozen=True, kw_only=True):
    id: int
    name: str
    kind: str


class BrowsedMemory(msgspec.Struct, frozen=True, kw_only=True):
    """A memory as a page lists it: its fields, its scopes (by name) and the entities it
    is about (by name)."""

    id: int
    content: str
    memory_type: str
    importance: float
    created_at: float
    updated_at: float
    last_accessed_at: float | None
    access_count: int
    scopes: list[str]
    entities: list[EntityRef]


class MemoryPage(msgspec.Struct, frozen=True, kw_only=True):
    memories: list[BrowsedMemory]
    total: int  # how many the filter selects in all


class TypeCount(msgspec.Struct, frozen=True, kw_only=True):
    name: str  # the type as first spelled (the least of its spellings)
    memories: int


class GraphNode(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    kind: str
    degree: int


class GraphLink(msgspec.Struct, frozen=True, kw_only=True):
    source: str
    relation_type: str
    target: str


class GraphOverview(msgspec.Struct, frozen=True, kw_only=True):
    nodes: list[GraphNode]
    links: list[GraphLink]
    total: int  # visible entities in all
    truncated: bool  # more entities or relations than shown


class Browse(Protocol):
    """Dashboard reads, in one transaction of the store (`StoreTx.browse`)."""

    def page(
        self, chosen: MemoryFilter, sort: Sort, descending: bool, offset: int, limit: int
    ) -> MemoryPage:
        """One page of the memories ``chosen`` selects, sorted by ``sort`` (then the newest
        id first); and how many there are in all."""
        ...

    def memory_types(self) -> list[TypeCount]:
        """The memory types, spellings that differ only by case counted together; the most
        used first, then by name."""
        ...

    def graph_overview(self, selection: list[str], limit: int, edges: int) -> GraphOverview:
        """The entities visible in ``selection``: all when at most ``limit``, else the
        ``limit`` most connected (by visible relations; ties: the oldest first); with the
        visible relations among them (at most ``edges``, oldest first)."""
        ...

    def entities_named(self, canonical_names: list[str]) -> dict[int, str]:
        """The entities whose canonical name is one of ``canonical_names`` (id -> name)."""
        ...

    def memory_text(self, memory_id: int) -> str | None:
        """A memory's content (None: no such memory)."""
        ...

    def mentions(self, memory_id: int) -> dict[int, str]:
        """The entities a memory is about (id -> name)."""
        ...

    def relations_between(
        self, one: list[int], other: list[int], limit: int
    ) -> list[tuple[str, str, str]]:
        """Up to ``limit`` relations (source name, type, target name) from an entity of
        ``one`` to one of ``other`` or back."""
        ...
