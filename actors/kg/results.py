"""The graph tools' results: one msgspec struct per tool, whose JSON Schema is its ``outputSchema``.

The shapes and field names are the reference memory server's (camelCase;
entities ``{name, entityType, observations}``, relations ``{from, to,
relationType}``). A key that is there only sometimes is `UNSET` when absent:
an entity's ``observations`` (mode ``full``) or ``observationCount`` (mode
``summary``), a page's ``relations`` (not in mode ``names``), and
``warnings`` (only when there is one, as in `transactions.with_warnings`).
In mode ``names`` an entity is its name alone (a string).

The read and write layers build plain records (`records`); a handler
converts them with `to_result`, so a record that drifts from its declared
schema fails the call instead of reaching a client.
"""

from __future__ import annotations

from typing import Annotated, TypeVar

import msgspec
from msgspec import UNSET, UnsetType

S = TypeVar("S", bound=msgspec.Struct)

Warnings = Annotated[
    list[str] | UnsetType,
    msgspec.Meta(
        description="what was kept (another repository's row) or replaced (a secret); only when there is one"
    ),
]
NextOffset = Annotated[
    int | None, msgspec.Meta(description="the offset of the next page; null on the last page")
]
Total = Annotated[int, msgspec.Meta(description="how many there are in all pages")]
Missing = Annotated[
    list[str], msgspec.Meta(description="the names asked for that are not entities")
]


class Entity(msgspec.Struct, kw_only=True):
    name: str
    entityType: str
    observations: Annotated[list[str] | UnsetType, msgspec.Meta(description="mode full")] = UNSET
    observationCount: Annotated[int | UnsetType, msgspec.Meta(description="mode summary")] = UNSET


EntityItem = Entity | str  # str: mode ``names``


class Relation(msgspec.Struct, kw_only=True):
    from_: str = msgspec.field(name="from")
    to: str
    relationType: str


# -- reads ---------------------------------------------------------------------


class NodesPage(msgspec.Struct, kw_only=True):
    """read_graph, search_nodes: a page of entities with the relations touching them."""

    entities: list[EntityItem]
    relations: Annotated[
        list[Relation] | UnsetType, msgspec.Meta(description="not in mode names")
    ] = UNSET
    total: Total
    nextOffset: NextOffset


class NamedNodesPage(msgspec.Struct, kw_only=True):
    """open_nodes, batch_get_entities, extract_subgraph: ``missing`` lists unknown names."""

    entities: list[EntityItem]
    relations: Annotated[
        list[Relation] | UnsetType, msgspec.Meta(description="not in mode names")
    ] = UNSET
    missing: Missing
    total: Total
    nextOffset: NextOffset


class ExistsResult(msgspec.Struct):
    exists: dict[str, bool]
    missing: Missing


class GraphStats(msgspec.Struct):
    entities: int
    relations: int
    observations: int
    entityTypes: int
    relationTypes: int
    scopes: list[str]


class RelationsPage(msgspec.Struct):
    relations: list[Relation]
    total: Total
    nextOffset: NextOffset


class Degree(msgspec.Struct):
    in_: int = msgspec.field(name="in")
    out: int
    total: int


class NamedDegree(msgspec.Struct, kw_only=True):
    name: str
    in_: int = msgspec.field(name="in")
    out: int
    total: int


class Outgoing(msgspec.Struct):
    relationType: str
    to: str


class Incoming(msgspec.Struct, kw_only=True):
    from_: str = msgspec.field(name="from")
    relationType: str


class Description(msgspec.Struct):
    entity: Entity
    degree: Degree
    outgoing: list[Outgoing]
    incoming: list[Incoming]
    total: Total
    nextOffset: NextOffset


class Path(msgspec.Struct):
    entities: list[str]
    relations: list[Relation]
    length: int


class PathResult(msgspec.Struct, kw_only=True):
    found: bool
    entities: list[str]
    relations: list[Relation]
    length: int
    maxDepth: int | UnsetType = UNSET  # when not found: how deep the search went


class AllPaths(msgspec.Struct):
    paths: list[Path]
    truncated: bool


class Neighbor(msgspec.Struct, kw_only=True):
    name: str
    entityType: str
    observations: list[str] | UnsetType = UNSET
    distance: int


class Neighbors(msgspec.Struct):
    entity: str
    neighbors: list[Neighbor | str]
    total: Total
    nextOffset: NextOffset


class EntityTypeCount(msgspec.Struct):
    entityType: str
    count: int


class RelationTypeCount(msgspec.Struct):
    relationType: str
    count: int


class EntityTypes(msgspec.Struct):
    types: list[EntityTypeCount]
    total: Total
    nextOffset: NextOffset


class RelationTypes(msgspec.Struct):
    types: list[RelationTypeCount]
    total: Total
    nextOffset: NextOffset


class ExportPage(msgspec.Struct):
    format: str
    jsonl: str
    lines: int
    total: Total
    nextOffset: NextOffset


# -- writes --------------------------------------------------------------------


class CreatedEntities(msgspec.Struct, kw_only=True):
    entities: list[Entity]
    warnings: Warnings = UNSET


class CreatedRelations(msgspec.Struct, kw_only=True):
    relations: list[Relation]
    warnings: Warnings = UNSET


class AddedObservations(msgspec.Struct):
    entityName: str
    addedObservations: list[str]


class ObservationsAdded(msgspec.Struct, kw_only=True):
    results: list[AddedObservations]
    warnings: Warnings = UNSET


class Deleted(msgspec.Struct, kw_only=True):
    success: bool
    message: str
    deleted: int
    warnings: Warnings = UNSET


class UpsertedEntity(msgspec.Struct):
    name: str
    entityType: str
    created: bool
    addedObservations: list[str]


class UpsertedEntities(msgspec.Struct, kw_only=True):
    entities: list[UpsertedEntity]
    warnings: Warnings = UNSET


class Merged(msgspec.Struct, kw_only=True):
    target: Entity
    merged: list[str]
    observationsMoved: int
    duplicateObservationsDropped: int
    relationsMoved: int
    relationsDropped: int
    warnings: Warnings = UNSET


class Compacted(msgspec.Struct, kw_only=True):
    duplicateObservationsRemoved: int
    indexesOptimized: list[str]
    warnings: Warnings = UNSET


def to_result(record: object, struct: type[S]) -> S:
    """A read or write layer's record as the tool's result struct.

    Error handling: a record that does not fit the struct (a bug, not the
    caller's fault) raises `msgspec.ValidationError` naming the field.
    """
    return msgspec.convert(record, struct)
