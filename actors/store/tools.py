"""The nine memory tools: remember, recall, stats, list_scopes, relate, graph, inspect, update, forget.

Their registration (names, descriptions, hints); the argument structs are in
`tool_args`, the handlers in `memory_tools` and `graph_tools`, what they
share (the store handle, the embedder, argument checks) in `services`.
"""

from __future__ import annotations

from ...protocol.tools import Tool
from . import results as R
from .graph_tools import graph, relate
from .memory_tools import forget, inspect, list_scopes, recall, remember, stats, update
from .services import embed, embedder_of, policy_of, store_of
from .tool_args import (
    EntityArg,
    ForgetArgs,
    GraphArgs,
    InspectArgs,
    ListScopesArgs,
    RecallArgs,
    RelateArgs,
    RelationArg,
    RememberArgs,
    StatsArgs,
    UpdateArgs,
)

_SCOPE_NOTE = (
    " Scopes are `global` or `repo:/absolute/path`; writes may only go to the current repository and `global`,"
    " and rows another repository also uses keep their kind, metadata and content (see warnings)."
)

TOOLS = [
    Tool(
        name="remember",
        title="Remember",
        description=(
            "Store a memory (a decision, convention, pitfall, fact learned) so a later session can recall it. "
            "Optional: memory_type (default observation), importance 0..1, scopes (default: the current repository), "
            "entities it mentions and directed relations it states (created or reused, linked atomically). "
            "Returns the new numeric id." + _SCOPE_NOTE
        ),
        args=RememberArgs,
        handler=remember,
        result=R.RememberResult,
    ),
    Tool(
        name="recall",
        title="Recall",
        description=(
            "Find memories relevant to a query, best first, within the current repository plus `global` "
            "(or the given scopes plus `global`). Optional memory_type filter (ignores case), limit 1-100 "
            "(default 10), use_embeddings (false forces lexical FTS5 ranking), max_tokens (the best memories that fit "
            "a token budget), explain (why each memory was returned). Returned memories count as accessed."
        ),
        args=RecallArgs,
        handler=recall,
        result=R.RecallResult,
        access="read",  # it only records the access
    ),
    Tool(
        name="stats",
        title="Store statistics",
        description="Counts of memories, scopes, entities and edges (relations) in the store.",
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
            "List every stored scope plus the current one and `global`: name, is_current, writable. "
            "Pass a name to recall/inspect `scopes` to read another repository. Read-only."
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
            "Record a directed relation `source -[relation]-> target` between two entities (created if new), "
            "with optional kinds and JSON metadata. Idempotent per (source, relation, target)."
            + _SCOPE_NOTE
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
            "The relation paths around an entity: direction both|incoming|outgoing, max_depth 1-3 (default 2), "
            "limit 1-100 paths (default 50). Paths never revisit an entity, so cycles terminate."
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
            "Read one memory by numeric id with its scopes, entities and relations, under the same scope "
            "selection as recall (another repository's memory needs its scope in `scopes`). Counts as an access."
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
            "Revise a memory by id: content, memory_type and importance replace the stored values; omitted fields "
            "are kept. Scopes, entities and relations are unchanged." + _SCOPE_NOTE
        ),
        args=UpdateArgs,
        handler=update,
        result=R.UpdateResult,
        idempotent=True,
    ),
    Tool(
        name="forget",
        title="Forget a memory",
        description="Delete a memory by id, with its links to scopes, entities and relations."
        + _SCOPE_NOTE,
        args=ForgetArgs,
        handler=forget,
        result=R.ForgetResult,
        destructive=True,
        idempotent=True,
    ),
]

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
    "stats",
    "store_of",
    "update",
]
