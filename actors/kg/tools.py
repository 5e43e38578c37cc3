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

TOOLS = [
    _w("create_entities", "Create Entities",
       "Create entities {name, entityType, observations}, skipping existing ones; returns those created. "
       "One another repository has is linked, type kept (see warnings).",
       A.CreateEntitiesArgs, W.create_entities, X.CreatedEntities),
    _w("create_relations", "Create Relations",
       "Create relations {from, to, relationType} (active voice, e.g. works_at) between existing "
       "entities, skipping existing ones; returns those created.",
       A.RelationsArgs, W.create_relations, X.CreatedRelations),
    _w("add_observations", "Add Observations",
       "Add observations to existing entities, skipping those present; returns those added.",
       A.AddObservationsArgs, W.add_observations, X.ObservationsAdded),
    _w("delete_entities", "Delete Entities",
       "Delete entities with their relations and observations; unknown names ignored.",
       A.DeleteEntitiesArgs, W.delete_entities, X.Deleted, destructive=True, idempotent=True),
    _w("delete_observations", "Delete Observations",
       "Delete specific observations from entities.",
       A.DeleteObservationsArgs, W.delete_observations, X.Deleted, destructive=True, idempotent=True),
    _w("delete_relations", "Delete Relations",
       "Delete relations {from, to, relationType}.",
       A.RelationsArgs, W.delete_relations, X.Deleted, destructive=True, idempotent=True),
    _w("upsert_entities", "Upsert Entities",
       "Create missing entities, update existing: a given entityType replaces the stored one (refused "
       "if another repository uses it), new observations added.",
       A.UpsertEntitiesArgs, W.upsert_entities, X.UpsertedEntities, idempotent=True),
    _w("merge_entities", "Merge Entities",
       "Fold `sources` into `target` (created if missing): observations move, relations re-pointed "
       "(duplicates, self-loops dropped), sources deleted.",
       A.MergeEntitiesArgs, W.merge_entities, X.Merged, destructive=True,
       keeps_text=True),  # the target is created when missing
    _w("compact", "Compact Graph",
       "Drop repeated observations of an entity (oldest kept); optimize the full-text indexes.",
       A.NoArgs, W.compact, X.Compacted, destructive=True, idempotent=True),
    _r("read_graph", "Read Graph",
       "A page of entities with their outgoing relations.",
       A.ReadGraphArgs, R.read_graph, X.NodesPage),
    _r("search_nodes", "Search Nodes",
       "Entities whose name, type or observations contain every query word (as prefix), best first, "
       "with their relations.",
       A.SearchNodesArgs, R.search_nodes, X.NodesPage),
    _r("open_nodes", "Open Nodes",
       "Entities by name with their relations; `missing`: unknown names.",
       A.OpenNodesArgs, R.open_nodes, X.NamedNodesPage),
    _r("batch_get_entities", "Batch Get Entities",
       "Entities by name, no relations; `missing`: unknown names.",
       A.BatchGetArgs, R.batch_get_entities, X.NamedNodesPage),
    _r("get_entity", "Get Entity", "One entity by name.",
       A.NameArgs, R.get_entity, X.Entity),
    _r("entity_exists", "Entities Exist", "Which of the names are entities.",
       A.ExistsArgs, R.entity_exists, X.ExistsResult),
    _r("graph_stats", "Graph Statistics",
       "Counts of entities, relations, observations, entity and relation types.",
       A.NoArgs, R.graph_stats, X.GraphStats),
    _r("search_relations", "Search Relations",
       "Relations filtered by any of from, to and relationType.",
       A.SearchRelationsArgs, R.search_relations, X.RelationsPage),
    _r("describe_entity", "Describe Entity",
       "One entity with its observations, degree and relations (outgoing first).",
       A.DescribeArgs, R.describe_entity, X.Description),
    _r("degree", "Degree", "In-, out- and total relation counts of one entity.", A.NameArgs, R.degree, X.NamedDegree),
    _r("find_path", "Find Path",
       "A shortest path between two entities, in either direction unless directed.",
       A.PathArgs, R.find_path, X.PathResult),
    _r("find_all_paths", "Find All Paths",
       "Paths between two entities visiting no entity twice, shortest first; truncated: more exist.",
       A.AllPathsArgs, R.find_all_paths, X.AllPaths),
    _r("extract_subgraph", "Extract Subgraph",
       "Entities within `depth` hops of the given ones, nearest first, with the relations among them.",
       A.SubgraphArgs, R.extract_subgraph, X.NamedNodesPage),
    _r("get_neighbors", "Get Neighbors",
       "Entities within `depth` hops of one entity, with their distance.",
       A.NeighborsArgs, R.get_neighbors, X.Neighbors),
    _r("list_entity_types", "List Entity Types", "Entity types with their counts, most used first.",
       A.TypesArgs, R.list_entity_types, X.EntityTypes),
    _r("list_relation_types", "List Relation Types", "Relation types with their counts, most used first.",
       A.TypesArgs, R.list_relation_types, X.RelationTypes),
    _r("export_graph", "Export Graph",
       "The graph as the reference server's memory.jsonl, paged by lines; join pages with a newline.",
       A.ExportArgs, R.export_graph, X.ExportPage),
]  # fmt: skip
