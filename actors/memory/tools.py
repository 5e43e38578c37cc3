"""The memory tools: remember, recall, stats, list_scopes, relate, graph, inspect, update, forget,
review_stale.

Their registration (names, descriptions, hints); the argument structs are in
`tool_args`, the handlers in `memory_tools` and `graph_tools`, what they
share (the store handle, the embedder, argument checks) in `services`.
"""

from __future__ import annotations

from ...protocol.tools import Tool
from ..embedder.embed import embed, embedder_of
from ..store.tooling.services import policy_of, store_of
from . import results as R
from .args import (
    EntityArg,
    ForgetArgs,
    GraphArgs,
    InspectArgs,
    ListScopesArgs,
    RecallArgs,
    RelateArgs,
    RelationArg,
    RememberArgs,
    ReviewStaleArgs,
    StatsArgs,
    UpdateArgs,
)
from .graph_tools import graph, relate
from .handlers import forget, inspect, list_scopes, recall, remember, stats, update
from .stale import review_stale

TOOLS = [
    Tool(
        name="remember",
        title="Remember",
        description=(
            "Store a memory for later sessions, atomically with its entities, relations (created or "
            "reused) and code anchors (`code`, else file/symbol names in it). Returns its id. Shared rows "
            "keep their values (see warnings)."
        ),
        args=RememberArgs,
        handler=remember,
        result=R.RememberResult,
    ),
    Tool(
        name="recall",
        title="Recall",
        description=(
            "Memories relevant to a query, best first, from this repository (or `scopes`) and `global`, "
            "with their code's status (`stale` ranks lower). Counts as an access."
        ),
        args=RecallArgs,
        handler=recall,
        result=R.RecallResult,
        access="read",  # it only records the access
    ),
    Tool(
        name="stats",
        title="Store statistics",
        description="Counts of memories, scopes, entities and relations.",
        args=StatsArgs,
        handler=stats,
        result=R.StatsResult,
        read_only=True,
        idempotent=True,
    ),
    Tool(
        name="list_scopes",
        title="List scopes",
        description=(
            "All scopes (stored, current, `global`) with is_current and writable; pass one in `scopes` "
            "to read another repository."
        ),
        args=ListScopesArgs,
        handler=list_scopes,
        result=R.ListScopesResult,
        read_only=True,
        idempotent=True,
    ),
    Tool(
        name="relate",
        title="Relate entities",
        description=(
            "Record `source -[relation]-> target` (entities created if new), with optional kinds and "
            "JSON metadata. Idempotent per triple."
        ),
        args=RelateArgs,
        handler=relate,
        result=R.RelateResult,
        idempotent=True,
    ),
    Tool(
        name="graph",
        title="Graph around an entity",
        description=(
            "Relation paths around an entity, up to max_depth hops, never revisiting an entity."
        ),
        args=GraphArgs,
        handler=graph,
        result=R.GraphResult,
        read_only=True,
        idempotent=True,
    ),
    Tool(
        name="inspect",
        title="Inspect a memory",
        description=(
            "One memory by id with its scopes, entities and relations (another repository's needs its "
            "scope in `scopes`). Counts as an access."
        ),
        args=InspectArgs,
        handler=inspect,
        result=R.InspectResult,
        access="read",  # it only records the access
    ),
    Tool(
        name="update",
        title="Update a memory",
        description=(
            "Revise a memory by id: content, memory_type, importance given replace the stored ones; "
            "scopes, entities, relations kept; re-anchored (`code`, else found)."
        ),
        args=UpdateArgs,
        handler=update,
        result=R.UpdateResult,
        idempotent=True,
    ),
    Tool(
        name="forget",
        title="Forget a memory",
        description="Delete a memory by id with its links to scopes, entities, relations.",
        args=ForgetArgs,
        handler=forget,
        result=R.ForgetResult,
        destructive=True,
        idempotent=True,
    ),
    Tool(
        name="review_stale",
        title="Review stale memories",
        description=(
            "Memories whose code changed or vanished since written, with the diff; `update` (re-anchors) "
            "or `forget` each. Pages by `cursor`."
        ),
        args=ReviewStaleArgs,
        handler=review_stale,
        result=R.ReviewStaleResult,
        read_only=True,
        idempotent=True,
    ),
]


def tool_named(name: str) -> Tool:
    """The memory tool ``name`` (what the CLI calls through ``screening.run_tool``)."""
    return next(tool for tool in TOOLS if tool.name == name)


__all__ = [
    "TOOLS",
    "EntityArg",
    "ForgetArgs",
    "GraphArgs",
    "InspectArgs",
    "ListScopesArgs",
    "RecallArgs",
    "RelateArgs",
    "RelationArg",
    "RememberArgs",
    "ReviewStaleArgs",
    "StatsArgs",
    "UpdateArgs",
    "embed",
    "embedder_of",
    "forget",
    "graph",
    "inspect",
    "list_scopes",
    "policy_of",
    "recall",
    "relate",
    "remember",
    "review_stale",
    "stats",
    "store_of",
    "tool_named",
    "update",
]
