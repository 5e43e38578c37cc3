"""The knowledge-graph tools: the reference memory server's nine and mcp-memory's extended set.

Write tools (group ``graph-write``, handlers in `write_tools`): create_entities,
create_relations, add_observations, delete_entities, delete_observations,
delete_relations, upsert_entities, merge_entities, compact. Read tools (group
``graph-read``, handlers in `read_tools`): read_graph, search_nodes,
open_nodes, batch_get_entities, get_entity, entity_exists, graph_stats,
search_relations, describe_entity, degree, find_path, find_all_paths,
extract_subgraph, get_neighbors, list_entity_types, list_relation_types,
export_graph.

Arguments (`args`) and results follow the reference server (camelCase;
entities ``{name, entityType, observations}``, relations ``{from, to,
relationType}``). Every list-returning tool takes ``offset``/``limit`` and
answers ``total`` and ``nextOffset`` (null on the last page); the
entity-returning ones take ``mode``: ``full`` (observations), ``summary``
(observation counts) or ``names``.
"""

from __future__ import annotations

import functools

from ...protocol.tools import grouped_tool
from . import args as A
from . import read_tools as R
from . import results as X
from . import write_tools as W

READ = "graph-read"
WRITE = "graph-write"


_w = functools.partial(grouped_tool, WRITE)
_r = functools.partial(grouped_tool, READ, read_only=True, idempotent=True)

_PAGE = " Paginated: offset/limit, answers total and nextOffset (null on the last page)."
_MODE = " mode: full (observations) | summary (observation counts) | names (names only)."


TOOLS = [
    _w("create_entities", "Create Entities",
       "Create multiple new entities in the knowledge graph: {name, entityType, observations[]}. Entities that "
       "already exist are skipped; returns the ones created. At most 1,000 per call, one transaction. An entity "
       "another repository has is linked with its own type kept (see warnings).",
       A.CreateEntitiesArgs, W.create_entities, X.CreatedEntities),
    _w("create_relations", "Create Relations",
       "Create multiple new relations {from, to, relationType} between existing entities. Relations should be in "
       "active voice. Existing relations are skipped; returns the ones created.",
       A.RelationsArgs, W.create_relations, X.CreatedRelations),
    _w("add_observations", "Add Observations",
       "Add new observations to existing entities: [{entityName, contents[]}]. Observations already present are "
       "skipped; returns the added ones per entity. Observations are memories that recall also finds.",
       A.AddObservationsArgs, W.add_observations, X.ObservationsAdded),
    _w("delete_entities", "Delete Entities",
       "Delete multiple entities and their associated relations and observations. Unknown names are ignored.",
       A.DeleteEntitiesArgs, W.delete_entities, X.Deleted, destructive=True, idempotent=True),
    _w("delete_observations", "Delete Observations",
       "Delete specific observations from entities: [{entityName, observations[]}].",
       A.DeleteObservationsArgs, W.delete_observations, X.Deleted, destructive=True, idempotent=True),
    _w("delete_relations", "Delete Relations",
       "Delete multiple relations {from, to, relationType} from the knowledge graph.",
       A.RelationsArgs, W.delete_relations, X.Deleted, destructive=True, idempotent=True),
    _w("upsert_entities", "Upsert Entities",
       "Create entities that do not exist and update those that do: a given entityType replaces the stored one "
       "(refused for an entity another repository also uses), observations not yet present are added. Returns "
       "{name, entityType, created, addedObservations} per entity.",
       A.UpsertEntitiesArgs, W.upsert_entities, X.UpsertedEntities, idempotent=True),
    _w("merge_entities", "Merge Entities",
       "Fold the `sources` entities into `target` (created if missing): observations move (duplicates dropped), "
       "relations are re-pointed (duplicates folded, self-loops between merged entities dropped), sources deleted.",
       A.MergeEntitiesArgs, W.merge_entities, X.Merged, destructive=True),
    _w("compact", "Compact Graph",
       "Remove repeated observations of the same entity (keeping the oldest) and optimize the full-text indexes.",
       A.NoArgs, W.compact, X.Compacted, destructive=True, idempotent=True),
    _r("read_graph", "Read Graph",
       "Read the knowledge graph a page of entities at a time, with the relations leaving them; optional "
       "entityType filter." + _PAGE + _MODE,
       A.ReadGraphArgs, R.read_graph, X.NodesPage),
    _r("search_nodes", "Search Nodes",
       "Search entities whose name, type or observations contain every word of the query (words match as "
       "prefixes, full-text index); returns them best first with relations touching them." + _PAGE + _MODE,
       A.SearchNodesArgs, R.search_nodes, X.NodesPage),
    _r("open_nodes", "Open Nodes",
       "Open specific entities by name, with the relations touching them; `missing` lists unknown names."
       + _PAGE + _MODE,
       A.OpenNodesArgs, R.open_nodes, X.NamedNodesPage),
    _r("batch_get_entities", "Batch Get Entities",
       "Fetch up to 1,000 entities by name (no relations); `missing` lists unknown names." + _PAGE + _MODE,
       A.BatchGetArgs, R.batch_get_entities, X.NamedNodesPage),
    _r("get_entity", "Get Entity", "Fetch one entity by name: {name, entityType, observations}.",
       A.NameArgs, R.get_entity, X.Entity),
    _r("entity_exists", "Entities Exist", "Check which of up to 1,000 names are entities: {exists: {name: bool}, missing}.",
       A.ExistsArgs, R.entity_exists, X.ExistsResult),
    _r("graph_stats", "Graph Statistics",
       "Counts of entities, relations, observations, entity types and relation types in the visible graph.",
       A.NoArgs, R.graph_stats, X.GraphStats),
    _r("search_relations", "Search Relations",
       "Relations filtered by any of from, to and relationType (all optional)." + _PAGE,
       A.SearchRelationsArgs, R.search_relations, X.RelationsPage),
    _r("describe_entity", "Describe Entity",
       "One entity with its observations, degree and incident relations (outgoing first)." + _PAGE,
       A.DescribeArgs, R.describe_entity, X.Description),
    _r("degree", "Degree", "In-, out- and total degree (relation counts) of one entity.", A.NameArgs, R.degree, X.NamedDegree),
    _r("find_path", "Find Path",
       "A shortest path between two entities (fewest relations), following relations in both directions unless "
       "directed is true; maxDepth 1-16 (default 6).",
       A.PathArgs, R.find_path, X.PathResult),
    _r("find_all_paths", "Find All Paths",
       "Simple paths (no entity twice, so cycles end) between two entities, shortest first; maxDepth 1-10 "
       "(default 4), limit 1-100 (default 20); truncated says whether more may exist.",
       A.AllPathsArgs, R.find_all_paths, X.AllPaths),
    _r("extract_subgraph", "Extract Subgraph",
       "The entities within `depth` hops (0-16, default 1) of the given ones, nearest first, with the relations "
       "among them." + _PAGE + _MODE,
       A.SubgraphArgs, R.extract_subgraph, X.NamedNodesPage),
    _r("get_neighbors", "Get Neighbors",
       "Entities within depth 1-16 (default 1) of one entity, with their distance; direction both|outgoing|incoming, "
       "optional relationType." + _PAGE + " mode: full | summary (default, name and type) | names.",
       A.NeighborsArgs, R.get_neighbors, X.Neighbors),
    _r("list_entity_types", "List Entity Types", "Entity types with their counts, most used first." + _PAGE,
       A.TypesArgs, R.list_entity_types, X.EntityTypes),
    _r("list_relation_types", "List Relation Types", "Relation types with their counts, most used first." + _PAGE,
       A.TypesArgs, R.list_relation_types, X.RelationTypes),
    _r("export_graph", "Export Graph",
       "The visible graph in the reference memory server's memory.jsonl format (one JSON object per line, "
       "entities then relations), a page of lines at a time (offset/limit over lines; join pages with a newline).",
       A.ExportArgs, R.export_graph, X.ExportPage),
]  # fmt: skip
