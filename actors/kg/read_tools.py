"""The graph's read tool handlers (group ``graph-read``): each call is one read transaction.

Every list-returning tool takes ``offset``/``limit`` and answers ``total`` and
``nextOffset`` (null on the last page); the entity-returning ones take
``mode`` (see `records`).
"""

from __future__ import annotations

from ...supervisors.context import CallContext
from ..store.interfaces import ReadTx
from . import jsonl, reads, traversal
from . import results as X
from .args import (
    AllPathsArgs,
    BatchGetArgs,
    DescribeArgs,
    ExistsArgs,
    ExportArgs,
    NameArgs,
    NeighborsArgs,
    NoArgs,
    OpenNodesArgs,
    PathArgs,
    ReadGraphArgs,
    SearchNodesArgs,
    SearchRelationsArgs,
    SubgraphArgs,
    TypesArgs,
)
from .records import JsonObject, page
from .search import search_nodes as search
from .transactions import read, read_small
from .view import Scoped


async def read_graph(ctx: CallContext, args: ReadGraphArgs) -> X.NodesPage:
    return X.to_result(
        await read(ctx, reads.read_graph, args.offset, args.limit, args.mode, args.entityType),
        X.NodesPage,
    )


def _search(
    tx: ReadTx,
    sc: Scoped,
    query: str,
    offset: int,
    limit: int,
    mode: str,
    entity_type: str | None,
) -> JsonObject:
    return search(tx, sc, query, offset, limit, mode, entity_type)


_search.__name__ = "search_nodes"


async def search_nodes(ctx: CallContext, args: SearchNodesArgs) -> X.NodesPage:
    return X.to_result(
        await read_small(
            ctx, _search, args.query, args.offset, args.limit, args.mode, args.entityType
        ),
        X.NodesPage,
    )


async def open_nodes(ctx: CallContext, args: OpenNodesArgs) -> X.NamedNodesPage:
    return X.to_result(
        await read_small(ctx, reads.open_nodes, args.names, args.offset, args.limit, args.mode),
        X.NamedNodesPage,
    )


async def batch_get_entities(ctx: CallContext, args: BatchGetArgs) -> X.NamedNodesPage:
    return X.to_result(
        await read_small(ctx, reads.batch_get, args.names, args.offset, args.limit, args.mode),
        X.NamedNodesPage,
    )


async def get_entity(ctx: CallContext, args: NameArgs) -> X.Entity:
    return X.to_result(await read_small(ctx, reads.get_entity, args.name), X.Entity)


async def entity_exists(ctx: CallContext, args: ExistsArgs) -> X.ExistsResult:
    return X.to_result(await read_small(ctx, reads.entity_exists, args.names), X.ExistsResult)


async def graph_stats(ctx: CallContext, args: NoArgs) -> X.GraphStats:
    return X.to_result(await read(ctx, reads.graph_stats), X.GraphStats)


async def search_relations(ctx: CallContext, args: SearchRelationsArgs) -> X.RelationsPage:
    return X.to_result(await read(ctx, reads.search_relations, args), X.RelationsPage)


async def describe_entity(ctx: CallContext, args: DescribeArgs) -> X.Description:
    return X.to_result(await read(ctx, reads.describe_entity, args), X.Description)


async def degree(ctx: CallContext, args: NameArgs) -> X.NamedDegree:
    return X.to_result(await read_small(ctx, reads.degree, args.name), X.NamedDegree)


async def find_path(ctx: CallContext, args: PathArgs) -> X.PathResult:
    return X.to_result(await read(ctx, traversal.find_path, args), X.PathResult)


async def find_all_paths(ctx: CallContext, args: AllPathsArgs) -> X.AllPaths:
    return X.to_result(await read(ctx, traversal.find_all_paths, args), X.AllPaths)


async def extract_subgraph(ctx: CallContext, args: SubgraphArgs) -> X.NamedNodesPage:
    return X.to_result(await read(ctx, traversal.extract_subgraph, args), X.NamedNodesPage)


async def get_neighbors(ctx: CallContext, args: NeighborsArgs) -> X.Neighbors:
    return X.to_result(await read(ctx, traversal.get_neighbors, args), X.Neighbors)


async def list_entity_types(ctx: CallContext, args: TypesArgs) -> X.EntityTypes:
    return X.to_result(
        await read(ctx, reads.list_types, "entity", args.offset, args.limit), X.EntityTypes
    )


async def list_relation_types(ctx: CallContext, args: TypesArgs) -> X.RelationTypes:
    return X.to_result(
        await read(ctx, reads.list_types, "relation", args.offset, args.limit), X.RelationTypes
    )


async def export_graph(ctx: CallContext, args: ExportArgs) -> X.ExportPage:
    lines = await read(ctx, jsonl.export_lines)
    chosen = lines[args.offset : args.offset + args.limit]
    return X.ExportPage(
        format=jsonl.FORMAT,
        jsonl="\n".join(chosen),
        lines=len(chosen),
        total=len(lines),
        nextOffset=page(len(lines), args.offset, len(chosen)),
    )
