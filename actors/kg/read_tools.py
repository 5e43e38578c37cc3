"""The graph's read tool handlers (group ``graph-read``): each call is one read transaction.

Every list-returning tool takes ``offset``/``limit`` and answers ``total`` and
``nextOffset`` (null on the last page); the entity-returning ones take
``mode`` (see `records`).
"""

from __future__ import annotations

from ...supervisors.context import CallContext
from . import jsonl, reads, traversal
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
from .transactions import read


async def read_graph(ctx: CallContext, args: ReadGraphArgs) -> JsonObject:
    return await read(ctx, reads.read_graph, args.offset, args.limit, args.mode, args.entityType)


async def search_nodes(ctx: CallContext, args: SearchNodesArgs) -> JsonObject:
    return await read(ctx, search, args.query, args.offset, args.limit, args.mode, args.entityType)


async def open_nodes(ctx: CallContext, args: OpenNodesArgs) -> JsonObject:
    return await read(ctx, reads.open_nodes, args.names, args.offset, args.limit, args.mode)


async def batch_get_entities(ctx: CallContext, args: BatchGetArgs) -> JsonObject:
    return await read(ctx, reads.batch_get, args.names, args.offset, args.limit, args.mode)


async def get_entity(ctx: CallContext, args: NameArgs) -> JsonObject | str:
    return await read(ctx, reads.get_entity, args.name)


async def entity_exists(ctx: CallContext, args: ExistsArgs) -> JsonObject:
    return await read(ctx, reads.entity_exists, args.names)


async def graph_stats(ctx: CallContext, args: NoArgs) -> JsonObject:
    return await read(ctx, reads.graph_stats)


async def search_relations(ctx: CallContext, args: SearchRelationsArgs) -> JsonObject:
    return await read(ctx, reads.search_relations, args)


async def describe_entity(ctx: CallContext, args: DescribeArgs) -> JsonObject:
    return await read(ctx, reads.describe_entity, args)


async def degree(ctx: CallContext, args: NameArgs) -> JsonObject:
    return await read(ctx, reads.degree, args.name)


async def find_path(ctx: CallContext, args: PathArgs) -> JsonObject:
    return await read(ctx, traversal.find_path, args)


async def find_all_paths(ctx: CallContext, args: AllPathsArgs) -> JsonObject:
    return await read(ctx, traversal.find_all_paths, args)


async def extract_subgraph(ctx: CallContext, args: SubgraphArgs) -> JsonObject:
    return await read(ctx, traversal.extract_subgraph, args)


async def get_neighbors(ctx: CallContext, args: NeighborsArgs) -> JsonObject:
    return await read(ctx, traversal.get_neighbors, args)


async def list_entity_types(ctx: CallContext, args: TypesArgs) -> JsonObject:
    return await read(ctx, reads.list_types, "entity", args.offset, args.limit)


async def list_relation_types(ctx: CallContext, args: TypesArgs) -> JsonObject:
    return await read(ctx, reads.list_types, "relation", args.offset, args.limit)


async def export_graph(ctx: CallContext, args: ExportArgs) -> JsonObject:
    lines = await read(ctx, jsonl.export_lines)
    chosen = lines[args.offset : args.offset + args.limit]
    return {
        "format": jsonl.FORMAT,
        "jsonl": "\n".join(chosen),
        "lines": len(chosen),
        "total": len(lines),
        "nextOffset": page(len(lines), args.offset, len(chosen)),
    }
