"""The knowledge-graph tools: the reference memory server's nine and mcp-memory's extended set.

Write tools (group ``graph-write``): create_entities, create_relations,
add_observations, delete_entities, delete_observations, delete_relations,
upsert_entities, merge_entities, compact. Read tools (group ``graph-read``):
read_graph, search_nodes, open_nodes, batch_get_entities, get_entity,
entity_exists, graph_stats, search_relations, describe_entity, degree,
find_path, find_all_paths, extract_subgraph, get_neighbors,
list_entity_types, list_relation_types, export_graph.

Arguments and results follow the reference server (camelCase; entities
``{name, entityType, observations}``, relations ``{from, to, relationType}``).
Every list-returning tool takes ``offset``/``limit`` and answers ``total``
and ``nextOffset`` (null on the last page); the entity-returning ones take
``mode``: ``full`` (observations), ``summary`` (observation counts) or
``names``.

Each write tool call is one transaction on the StoreWriter, with the existence
and ownership checks of the whole batch inside it (``store.ownership``: a row
shared with a repository this server may not write keeps its attributes; a
change is refused, a link reports the kept value in ``warnings``, a key that is
present only when there is a warning). Observation texts (and new entities) are
embedded before the write when an embedder runs, and their vectors stored in
the same transaction, as ``remember`` does.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal

import msgspec

from ...protocol.tools import Tool
from ..store import ops
from ..store import tools as store_tools
from ..store.writer import Written
from . import graph, jsonl
from .graph import (
    MAX_ITEMS,
    MAX_NEIGHBOR_DEPTH,
    MAX_PATH_DEPTH,
    MAX_PATHS,
    MAX_SEARCH_LIMIT,
    EntityIn,
    Scoped,
    Vectors,
    View,
    Writer,
)

READ = "graph-read"
WRITE = "graph-write"

Name = Annotated[str, msgspec.Meta(min_length=1, description="entity name (at most 1,024 bytes)")]
Text = Annotated[str, msgspec.Meta(description="observation text (at most 65,536 bytes)")]
Names = Annotated[
    list[Name], msgspec.Meta(max_length=MAX_ITEMS, description="entity names (at most 1,000)")
]
Offset = Annotated[int, msgspec.Meta(ge=0, description="skip this many results (from nextOffset)")]
Limit = Annotated[int, msgspec.Meta(ge=1, le=MAX_SEARCH_LIMIT, description="results per page")]
Mode = Annotated[
    Literal["full", "summary", "names"],
    msgspec.Meta(
        description="full: entities with observations; summary: observation counts; names: entity names only"
    ),
]


class EntityArg(msgspec.Struct, forbid_unknown_fields=True):
    name: Name
    entityType: str
    observations: Annotated[list[Text], msgspec.Meta(max_length=MAX_ITEMS)] = []


class UpsertEntityArg(msgspec.Struct, forbid_unknown_fields=True):
    name: Name
    entityType: str | None = None
    observations: Annotated[list[Text], msgspec.Meta(max_length=MAX_ITEMS)] = []


class RelationArg(msgspec.Struct, forbid_unknown_fields=True):
    from_: Name = msgspec.field(name="from")
    to: Name
    relationType: Annotated[
        str, msgspec.Meta(min_length=1, description="active voice, e.g. works_at")
    ]


class ObservationsArg(msgspec.Struct, forbid_unknown_fields=True):
    entityName: Name
    contents: Annotated[list[Text], msgspec.Meta(max_length=MAX_ITEMS)]


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
        msgspec.Meta(min_length=1, max_length=MAX_ITEMS, description="entities folded into target"),
    ]
    target: Name
    entityType: str | None = None


class NoArgs(msgspec.Struct, forbid_unknown_fields=True):
    """No arguments."""


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
    offset: Annotated[int, msgspec.Meta(ge=0, description="first line (from nextOffset)")] = 0
    limit: Annotated[int, msgspec.Meta(ge=1, le=100_000, description="lines per page")] = 10_000


# -- plumbing --------------------------------------------------------------------------


def view_of(app: Any) -> View:
    policy = store_tools.store_of(app).policy
    return View(policy.select(None), policy.writable, policy.current)


async def read(app: Any, fn: Callable[[sqlite3.Connection, Scoped], Any]) -> Any:
    store = store_tools.store_of(app)
    view = view_of(app)
    return await store.read(lambda conn: fn(conn, Scoped(conn, view)))


async def write(
    app: Any, name: str, fn: Callable[[Writer], Any], vectors: Vectors | None = None
) -> tuple[Any, list[str]]:
    """Run ``fn`` in one write transaction; (its value, the `Writer`'s warnings)."""
    store = store_tools.store_of(app)
    view = view_of(app)

    def op(conn: sqlite3.Connection) -> Written:
        w = Writer(conn, view, vectors)
        return Written((fn(w), w.warnings), w.changes)

    return await store.write(op, name=name)


def with_warnings(result: dict[str, Any], warnings: list[str]) -> dict[str, Any]:
    """``result`` plus ``warnings`` when there are any (absent otherwise, as in the reference server)."""
    if warnings:
        result["warnings"] = warnings
    return result


async def embed_for(
    app: Any, observations: Sequence[str], entities: Sequence[tuple[str, str]]
) -> Vectors | None:
    """Vectors of observation texts and entity documents, or None when embeddings are off."""
    if store_tools.embedder_of(app) is None:
        return None
    obs = list(dict.fromkeys(observations))
    ents: dict[str, str] = {}
    for name, kind in entities:
        ents.setdefault(ops.canonical_name(name), ops.entity_document(name, kind or "entity"))
    embedded = await store_tools.embed(app, [*obs, *ents.values()], "observation")
    if embedded is None:
        return None
    vecs = embedded.vectors
    return Vectors(
        dict(zip(obs, vecs[: len(obs)], strict=True)),
        dict(zip(ents, vecs[len(obs) :], strict=True)),
    )


def _check_entities(items: Sequence[EntityArg | UpsertEntityArg]) -> None:
    for i, e in enumerate(items):
        graph.check_name(e.name, f"entities[{i}].name")
        if e.entityType is not None:
            graph.check_type(e.entityType, f"entities[{i}].entityType")
        for j, o in enumerate(e.observations):
            graph.check_observation(o, f"entities[{i}].observations[{j}]")


def _check_relations(items: Sequence[RelationArg], field: str = "relations") -> None:
    for i, r in enumerate(items):
        graph.check_name(r.from_, f"{field}[{i}].from")
        graph.check_name(r.to, f"{field}[{i}].to")
        graph.check_relation_type(r.relationType, f"{field}[{i}].relationType")


def _check_names(names: Sequence[str], field: str) -> None:
    for i, n in enumerate(names):
        graph.check_name(n, f"{field}[{i}]")


# -- write tools -----------------------------------------------------------------------


async def create_entities(ctx: Any, args: CreateEntitiesArgs) -> dict[str, Any]:
    _check_entities(args.entities)
    items = [EntityIn(e.name, e.entityType, list(e.observations)) for e in args.entities]
    vectors = await embed_for(
        ctx.app,
        [o for e in items for o in e.observations],
        [(e.name, e.entityType or "entity") for e in items],
    )
    created, warnings = await write(
        ctx.app, "create_entities", lambda w: graph.create_entities(w, items), vectors
    )
    return with_warnings({"entities": created}, warnings)


async def upsert_entities(ctx: Any, args: UpsertEntitiesArgs) -> dict[str, Any]:
    _check_entities(args.entities)
    items = [EntityIn(e.name, e.entityType, list(e.observations)) for e in args.entities]
    vectors = await embed_for(
        ctx.app,
        [o for e in items for o in e.observations],
        [(e.name, e.entityType or "entity") for e in items],
    )
    result, warnings = await write(
        ctx.app, "upsert_entities", lambda w: graph.create_entities(w, items, upsert=True), vectors
    )
    return with_warnings({"entities": result}, warnings)


async def create_relations(ctx: Any, args: RelationsArgs) -> dict[str, Any]:
    _check_relations(args.relations)
    items = [(r.from_, r.relationType, r.to) for r in args.relations]
    created, warnings = await write(
        ctx.app, "create_relations", lambda w: graph.create_relations(w, items)
    )
    return with_warnings({"relations": created}, warnings)


async def add_observations(ctx: Any, args: AddObservationsArgs) -> dict[str, Any]:
    for i, o in enumerate(args.observations):
        graph.check_name(o.entityName, f"observations[{i}].entityName")
        for j, c in enumerate(o.contents):
            graph.check_observation(c, f"observations[{i}].contents[{j}]")
    items = [(o.entityName, list(o.contents)) for o in args.observations]
    vectors = await embed_for(ctx.app, [c for _, cs in items for c in cs], [])
    results, warnings = await write(
        ctx.app, "add_observations", lambda w: graph.add_observations(w, items), vectors
    )
    return with_warnings({"results": results}, warnings)


def _done(message: str, count: int, key: str) -> dict[str, Any]:
    return {"success": True, "message": message, key: count}


async def delete_entities(ctx: Any, args: DeleteEntitiesArgs) -> dict[str, Any]:
    _check_names(args.entityNames, "entityNames")
    n, warnings = await write(
        ctx.app, "delete_entities", lambda w: graph.delete_entities(w, args.entityNames)
    )
    return with_warnings(_done("Entities deleted successfully", n, "deleted"), warnings)


async def delete_observations(ctx: Any, args: DeleteObservationsArgs) -> dict[str, Any]:
    items = [(d.entityName, list(d.observations)) for d in args.deletions]
    n, warnings = await write(
        ctx.app, "delete_observations", lambda w: graph.delete_observations(w, items)
    )
    return with_warnings(_done("Observations deleted successfully", n, "deleted"), warnings)


async def delete_relations(ctx: Any, args: RelationsArgs) -> dict[str, Any]:
    _check_relations(args.relations)
    items = [(r.from_, r.relationType, r.to) for r in args.relations]
    n, warnings = await write(
        ctx.app, "delete_relations", lambda w: graph.delete_relations(w, items)
    )
    return with_warnings(_done("Relations deleted successfully", n, "deleted"), warnings)


async def merge_entities(ctx: Any, args: MergeEntitiesArgs) -> dict[str, Any]:
    _check_names(args.sources, "sources")
    graph.check_name(args.target, "target")
    if args.entityType is not None:
        graph.check_type(args.entityType, "entityType")
    result, warnings = await write(
        ctx.app,
        "merge_entities",
        lambda w: graph.merge_entities(w, args.sources, args.target, args.entityType),
    )
    return with_warnings(result, warnings)


async def compact(ctx: Any, args: NoArgs) -> dict[str, Any]:
    result, warnings = await write(ctx.app, "compact", graph.compact)
    return with_warnings(result, warnings)


# -- read tools ------------------------------------------------------------------------


async def read_graph(ctx: Any, args: ReadGraphArgs) -> dict[str, Any]:
    return await read(
        ctx.app,
        lambda c, s: graph.read_graph(c, s, args.offset, args.limit, args.mode, args.entityType),
    )


async def search_nodes(ctx: Any, args: SearchNodesArgs) -> dict[str, Any]:
    return await read(
        ctx.app,
        lambda c, s: graph.search_nodes(
            c, s, args.query, args.offset, args.limit, args.mode, args.entityType
        ),
    )


async def open_nodes(ctx: Any, args: OpenNodesArgs) -> dict[str, Any]:
    return await read(
        ctx.app, lambda c, s: graph.open_nodes(c, s, args.names, args.offset, args.limit, args.mode)
    )


async def batch_get_entities(ctx: Any, args: BatchGetArgs) -> dict[str, Any]:
    return await read(
        ctx.app, lambda c, s: graph.batch_get(c, s, args.names, args.offset, args.limit, args.mode)
    )


async def get_entity(ctx: Any, args: NameArgs) -> dict[str, Any]:
    def op(c: sqlite3.Connection, s: Scoped) -> dict[str, Any]:
        ent = graph.get_one(c, s, args.name)
        return graph.entities_out(c, s, [ent], "full")[0]

    return await read(ctx.app, op)


async def entity_exists(ctx: Any, args: ExistsArgs) -> dict[str, Any]:
    def op(c: sqlite3.Connection, s: Scoped) -> dict[str, Any]:
        found = graph.resolve(c, s, args.names)
        names = list(dict.fromkeys(args.names))
        return {
            "exists": {n: ops.canonical_name(n) in found for n in names},
            "missing": [n for n in names if ops.canonical_name(n) not in found],
        }

    return await read(ctx.app, op)


async def graph_stats(ctx: Any, args: NoArgs) -> dict[str, Any]:
    return await read(ctx.app, graph.graph_stats)


async def search_relations(ctx: Any, args: SearchRelationsArgs) -> dict[str, Any]:
    return await read(
        ctx.app,
        lambda c, s: graph.search_relations(
            c, s, args.from_, args.to, args.relationType, args.offset, args.limit
        ),
    )


async def describe_entity(ctx: Any, args: DescribeArgs) -> dict[str, Any]:
    return await read(
        ctx.app, lambda c, s: graph.describe_entity(c, s, args.name, args.offset, args.limit)
    )


async def degree(ctx: Any, args: NameArgs) -> dict[str, Any]:
    def op(c: sqlite3.Connection, s: Scoped) -> dict[str, Any]:
        ent = graph.get_one(c, s, args.name)
        return {"name": ent.name, **graph.degree_of(c, s, ent.id)}

    return await read(ctx.app, op)


async def find_path(ctx: Any, args: PathArgs) -> dict[str, Any]:
    return await read(
        ctx.app,
        lambda c, s: graph.find_path(c, s, args.from_, args.to, args.maxDepth, args.directed),
    )


async def find_all_paths(ctx: Any, args: AllPathsArgs) -> dict[str, Any]:
    return await read(
        ctx.app,
        lambda c, s: graph.find_all_paths(
            c, s, args.from_, args.to, args.maxDepth, args.limit, args.directed
        ),
    )


async def extract_subgraph(ctx: Any, args: SubgraphArgs) -> dict[str, Any]:
    return await read(
        ctx.app,
        lambda c, s: graph.extract_subgraph(
            c, s, args.names, args.depth, args.offset, args.limit, args.mode
        ),
    )


async def get_neighbors(ctx: Any, args: NeighborsArgs) -> dict[str, Any]:
    return await read(
        ctx.app,
        lambda c, s: graph.get_neighbors(
            c,
            s,
            args.name,
            args.depth,
            args.direction,
            args.relationType,
            args.offset,
            args.limit,
            args.mode,
        ),  # fmt: skip
    )


async def list_entity_types(ctx: Any, args: TypesArgs) -> dict[str, Any]:
    return await read(
        ctx.app, lambda c, s: graph.list_types(c, s, "entity", args.offset, args.limit)
    )


async def list_relation_types(ctx: Any, args: TypesArgs) -> dict[str, Any]:
    return await read(
        ctx.app, lambda c, s: graph.list_types(c, s, "relation", args.offset, args.limit)
    )


async def export_graph(ctx: Any, args: ExportArgs) -> dict[str, Any]:
    lines = await read(ctx.app, jsonl.export_lines)
    chosen = lines[args.offset : args.offset + args.limit]
    return {
        "format": jsonl.FORMAT,
        "jsonl": "\n".join(chosen),
        "lines": len(chosen),
        "total": len(lines),
        "nextOffset": graph.page(len(lines), args.offset, len(chosen)),
    }


# -- registration ----------------------------------------------------------------------

_PAGE = " Paginated: offset/limit, answers total and nextOffset (null on the last page)."
_MODE = " mode: full (observations) | summary (observation counts) | names (names only)."


def _w(name: str, title: str, description: str, args: Any, handler: Any, **kw: Any) -> Tool:
    return Tool(
        name=name,
        title=title,
        description=description,
        args=args,
        handler=handler,
        group=WRITE,
        **kw,
    )


def _r(name: str, title: str, description: str, args: Any, handler: Any) -> Tool:
    return Tool(
        name=name, title=title, description=description, args=args, handler=handler,
        group=READ, read_only=True, idempotent=True,
    )  # fmt: skip


TOOLS = [
    _w("create_entities", "Create Entities",
       "Create multiple new entities in the knowledge graph: {name, entityType, observations[]}. Entities that "
       "already exist are skipped; returns the ones created. At most 1,000 per call, one transaction. An entity "
       "another repository has is linked with its own type kept (see warnings).",
       CreateEntitiesArgs, create_entities),
    _w("create_relations", "Create Relations",
       "Create multiple new relations {from, to, relationType} between existing entities. Relations should be in "
       "active voice. Existing relations are skipped; returns the ones created.",
       RelationsArgs, create_relations),
    _w("add_observations", "Add Observations",
       "Add new observations to existing entities: [{entityName, contents[]}]. Observations already present are "
       "skipped; returns the added ones per entity. Observations are memories that recall also finds.",
       AddObservationsArgs, add_observations),
    _w("delete_entities", "Delete Entities",
       "Delete multiple entities and their associated relations and observations. Unknown names are ignored.",
       DeleteEntitiesArgs, delete_entities, destructive=True, idempotent=True),
    _w("delete_observations", "Delete Observations",
       "Delete specific observations from entities: [{entityName, observations[]}].",
       DeleteObservationsArgs, delete_observations, destructive=True, idempotent=True),
    _w("delete_relations", "Delete Relations",
       "Delete multiple relations {from, to, relationType} from the knowledge graph.",
       RelationsArgs, delete_relations, destructive=True, idempotent=True),
    _w("upsert_entities", "Upsert Entities",
       "Create entities that do not exist and update those that do: a given entityType replaces the stored one "
       "(refused for an entity another repository also uses), observations not yet present are added. Returns "
       "{name, entityType, created, addedObservations} per entity.",
       UpsertEntitiesArgs, upsert_entities, idempotent=True),
    _w("merge_entities", "Merge Entities",
       "Fold the `sources` entities into `target` (created if missing): observations move (duplicates dropped), "
       "relations are re-pointed (duplicates folded, self-loops between merged entities dropped), sources deleted.",
       MergeEntitiesArgs, merge_entities, destructive=True),
    _w("compact", "Compact Graph",
       "Remove repeated observations of the same entity (keeping the oldest) and optimize the full-text indexes.",
       NoArgs, compact, destructive=True, idempotent=True),
    _r("read_graph", "Read Graph",
       "Read the knowledge graph a page of entities at a time, with the relations leaving them; optional "
       "entityType filter." + _PAGE + _MODE,
       ReadGraphArgs, read_graph),
    _r("search_nodes", "Search Nodes",
       "Search entities whose name, type or observations contain every word of the query (words match as "
       "prefixes, full-text index); returns them best first with relations touching them." + _PAGE + _MODE,
       SearchNodesArgs, search_nodes),
    _r("open_nodes", "Open Nodes",
       "Open specific entities by name, with the relations touching them; `missing` lists unknown names."
       + _PAGE + _MODE,
       OpenNodesArgs, open_nodes),
    _r("batch_get_entities", "Batch Get Entities",
       "Fetch up to 1,000 entities by name (no relations); `missing` lists unknown names." + _PAGE + _MODE,
       BatchGetArgs, batch_get_entities),
    _r("get_entity", "Get Entity", "Fetch one entity by name: {name, entityType, observations}.",
       NameArgs, get_entity),
    _r("entity_exists", "Entities Exist", "Check which of up to 1,000 names are entities: {exists: {name: bool}, missing}.",
       ExistsArgs, entity_exists),
    _r("graph_stats", "Graph Statistics",
       "Counts of entities, relations, observations, entity types and relation types in the visible graph.",
       NoArgs, graph_stats),
    _r("search_relations", "Search Relations",
       "Relations filtered by any of from, to and relationType (all optional)." + _PAGE,
       SearchRelationsArgs, search_relations),
    _r("describe_entity", "Describe Entity",
       "One entity with its observations, degree and incident relations (outgoing first)." + _PAGE,
       DescribeArgs, describe_entity),
    _r("degree", "Degree", "In-, out- and total degree (relation counts) of one entity.", NameArgs, degree),
    _r("find_path", "Find Path",
       "A shortest path between two entities (fewest relations), following relations in both directions unless "
       "directed is true; maxDepth 1-16 (default 6).",
       PathArgs, find_path),
    _r("find_all_paths", "Find All Paths",
       "Simple paths (no entity twice, so cycles end) between two entities, shortest first; maxDepth 1-10 "
       "(default 4), limit 1-100 (default 20); truncated says whether more may exist.",
       AllPathsArgs, find_all_paths),
    _r("extract_subgraph", "Extract Subgraph",
       "The entities within `depth` hops (0-16, default 1) of the given ones, nearest first, with the relations "
       "among them." + _PAGE + _MODE,
       SubgraphArgs, extract_subgraph),
    _r("get_neighbors", "Get Neighbors",
       "Entities within depth 1-16 (default 1) of one entity, with their distance; direction both|outgoing|incoming, "
       "optional relationType." + _PAGE + " mode: full | summary (default, name and type) | names.",
       NeighborsArgs, get_neighbors),
    _r("list_entity_types", "List Entity Types", "Entity types with their counts, most used first." + _PAGE,
       TypesArgs, list_entity_types),
    _r("list_relation_types", "List Relation Types", "Relation types with their counts, most used first." + _PAGE,
       TypesArgs, list_relation_types),
    _r("export_graph", "Export Graph",
       "The visible graph in the reference memory server's memory.jsonl format (one JSON object per line, "
       "entities then relations), a page of lines at a time (offset/limit over lines; join pages with a newline).",
       ExportArgs, export_graph),
]  # fmt: skip
