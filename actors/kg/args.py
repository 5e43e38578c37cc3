"""The graph tools' arguments: msgspec structs (each tool's ``inputSchema``) and the checks
of values a schema cannot express (sizes in bytes, blank names: ``store.domain.limits``).

The bounds are the reference server's (see docs/knowledge-graph.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

import msgspec

from ..anchors.args import Code
from ..store.domain.limits import (
    MAX_ITEMS,
    check_name,
    check_observation,
    check_relation_type,
    check_type,
)

MAX_SEARCH_LIMIT = 1000
MAX_NEIGHBOR_DEPTH = 16
MAX_PATH_DEPTH = 10
MAX_PATHS = 100

# Names are at most 1,024 bytes and observations 65,536 (checked by hand, in bytes: `check_*`
# below); the feature's instructions say so once rather than every argument.
Name = Annotated[str, msgspec.Meta(min_length=1)]
Names = Annotated[list[Name], msgspec.Meta(max_length=MAX_ITEMS)]
Offset = Annotated[int, msgspec.Meta(ge=0)]
Limit = Annotated[int, msgspec.Meta(ge=1, le=MAX_SEARCH_LIMIT)]
Mode = Literal["full", "summary", "names"]  # the feature's instructions say what each shows


# -- write tools -------------------------------------------------------------------------


class EntityArg(msgspec.Struct, forbid_unknown_fields=True):
    name: Name
    entityType: str
    observations: Annotated[list[str], msgspec.Meta(max_length=MAX_ITEMS)] = []
    code: Code | None = None


class UpsertEntityArg(msgspec.Struct, forbid_unknown_fields=True):
    name: Name
    entityType: str | None = None
    observations: Annotated[list[str], msgspec.Meta(max_length=MAX_ITEMS)] = []
    code: Code | None = None


class RelationArg(msgspec.Struct, forbid_unknown_fields=True):
    from_: Name = msgspec.field(name="from")
    to: Name
    relationType: Annotated[str, msgspec.Meta(min_length=1)]


class ObservationsArg(msgspec.Struct, forbid_unknown_fields=True):
    entityName: Name
    contents: Annotated[list[str], msgspec.Meta(max_length=MAX_ITEMS)]
    code: Code | None = None


class DeletionArg(msgspec.Struct, forbid_unknown_fields=True):
    entityName: Name
    observations: Annotated[list[str], msgspec.Meta(max_length=MAX_ITEMS)]


class CreateEntitiesArgs(msgspec.Struct, forbid_unknown_fields=True):
    entities: Annotated[list[EntityArg], msgspec.Meta(max_length=MAX_ITEMS)]


class UpsertEntitiesArgs(msgspec.Struct, forbid_unknown_fields=True):
    entities: Annotated[list[UpsertEntityArg], msgspec.Meta(max_length=MAX_ITEMS)]


class RelationsArgs(msgspec.Struct, forbid_unknown_fields=True):
    relations: Annotated[list[RelationArg], msgspec.Meta(max_length=MAX_ITEMS)]


class AddObservationsArgs(msgspec.Struct, forbid_unknown_fields=True):
    observations: Annotated[list[ObservationsArg], msgspec.Meta(max_length=MAX_ITEMS)]


class DeleteEntitiesArgs(msgspec.Struct, forbid_unknown_fields=True):
    entityNames: Names


class DeleteObservationsArgs(msgspec.Struct, forbid_unknown_fields=True):
    deletions: Annotated[list[DeletionArg], msgspec.Meta(max_length=MAX_ITEMS)]


class MergeEntitiesArgs(msgspec.Struct, forbid_unknown_fields=True):
    sources: Annotated[
        list[Name],
        msgspec.Meta(min_length=1, max_length=MAX_ITEMS),
    ]
    target: Name
    entityType: str | None = None


class NoArgs(msgspec.Struct, forbid_unknown_fields=True):
    """No arguments."""


# -- read tools --------------------------------------------------------------------------


class ReadGraphArgs(msgspec.Struct, forbid_unknown_fields=True):
    offset: Offset = 0
    limit: Limit = 200
    mode: Mode = "full"
    entityType: str | None = None


class SearchNodesArgs(msgspec.Struct, forbid_unknown_fields=True):
    query: Annotated[str, msgspec.Meta(max_length=10_000)]
    offset: Offset = 0
    limit: Limit = 100
    mode: Mode = "full"
    entityType: str | None = None


class OpenNodesArgs(msgspec.Struct, forbid_unknown_fields=True):
    names: Names
    offset: Offset = 0
    limit: Limit = MAX_SEARCH_LIMIT
    mode: Mode = "full"


class BatchGetArgs(msgspec.Struct, forbid_unknown_fields=True):
    names: Names
    offset: Offset = 0
    limit: Limit = MAX_SEARCH_LIMIT
    mode: Mode = "full"


class NameArgs(msgspec.Struct, forbid_unknown_fields=True):
    name: Name


class ExistsArgs(msgspec.Struct, forbid_unknown_fields=True):
    names: Names


class SearchRelationsArgs(msgspec.Struct, forbid_unknown_fields=True):
    from_: Name | None = msgspec.field(default=None, name="from")
    to: Name | None = None
    relationType: str | None = None
    offset: Offset = 0
    limit: Limit = 100


class DescribeArgs(msgspec.Struct, forbid_unknown_fields=True):
    name: Name
    offset: Offset = 0
    limit: Limit = 100


class PathArgs(msgspec.Struct, forbid_unknown_fields=True):
    from_: Name = msgspec.field(name="from")
    to: Name
    maxDepth: Annotated[int, msgspec.Meta(ge=1, le=MAX_NEIGHBOR_DEPTH)] = 6
    directed: bool = False


class AllPathsArgs(msgspec.Struct, forbid_unknown_fields=True):
    from_: Name = msgspec.field(name="from")
    to: Name
    maxDepth: Annotated[int, msgspec.Meta(ge=1, le=MAX_PATH_DEPTH)] = 4
    limit: Annotated[int, msgspec.Meta(ge=1, le=MAX_PATHS)] = 20
    directed: bool = False


class SubgraphArgs(msgspec.Struct, forbid_unknown_fields=True):
    names: Names
    depth: Annotated[int, msgspec.Meta(ge=0, le=MAX_NEIGHBOR_DEPTH)] = 1
    offset: Offset = 0
    limit: Limit = 200
    mode: Mode = "full"


class NeighborsArgs(msgspec.Struct, forbid_unknown_fields=True):
    name: Name
    depth: Annotated[int, msgspec.Meta(ge=1, le=MAX_NEIGHBOR_DEPTH)] = 1
    direction: Literal["both", "outgoing", "incoming"] = "both"
    relationType: str | None = None
    offset: Offset = 0
    limit: Limit = 100
    mode: Mode = "summary"


class TypesArgs(msgspec.Struct, forbid_unknown_fields=True):
    offset: Offset = 0
    limit: Limit = 100


class ExportArgs(msgspec.Struct, forbid_unknown_fields=True):
    offset: Annotated[int, msgspec.Meta(ge=0)] = 0
    limit: Annotated[int, msgspec.Meta(ge=1, le=100_000)] = 10_000


# -- checks ------------------------------------------------------------------------------
# Error handling: each raises the `store.domain.limits` error naming the field (nothing is written yet).


def check_entities(items: Sequence[EntityArg | UpsertEntityArg]) -> None:
    for i, e in enumerate(items):
        check_name(e.name, f"entities[{i}].name")
        if e.entityType is not None:
            check_type(e.entityType, f"entities[{i}].entityType")
        for j, o in enumerate(e.observations):
            check_observation(o, f"entities[{i}].observations[{j}]")


def check_relations(items: Sequence[RelationArg]) -> None:
    for i, r in enumerate(items):
        check_name(r.from_, f"relations[{i}].from")
        check_name(r.to, f"relations[{i}].to")
        check_relation_type(r.relationType, f"relations[{i}].relationType")


def check_observations(items: Sequence[ObservationsArg]) -> None:
    for i, o in enumerate(items):
        check_name(o.entityName, f"observations[{i}].entityName")
        for j, c in enumerate(o.contents):
            check_observation(c, f"observations[{i}].contents[{j}]")


def check_names(names: Sequence[str], field: str) -> None:
    for i, n in enumerate(names):
        check_name(n, f"{field}[{i}]")


def check_merge(args: MergeEntitiesArgs) -> None:
    check_names(args.sources, "sources")
    check_name(args.target, "target")
    if args.entityType is not None:
        check_type(args.entityType, "entityType")
