"""The memory tools' results: one msgspec struct per tool, whose JSON Schema is its ``outputSchema``.

Field names are the same across the tools for the same thing: a memory is
``id``, ``content``, ``memory_type``, ``importance``, ``scopes``,
``created_at``, ``updated_at``, ``last_accessed_at``, ``access_count``; an
entity ``{id, name, kind}``; a relation ``{id, source, relation, target}``;
``created`` (a boolean) says a call made the row. Times are ISO 8601 in UTC
(``2026-11-30T21:06:24.415286Z``), scores have four significant digits, and
``warnings`` is always present in ``remember``, ``recall`` and ``relate``
results (``[]`` when nothing was truncated or kept, as the reference's contract
has it), and in ``update``'s only when there is one (``omit_defaults``).

The store keeps epoch seconds (and so do export files); `time_of` converts at
this edge, for the tools and the CLI's ``--json`` alike.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar

import msgspec

Time = Annotated[
    dt.datetime,
    msgspec.Meta(description="ISO 8601 time in UTC", extra_json_schema={"format": "date-time"}),
]
Score = Annotated[
    float, msgspec.Meta(description="relevance, higher is better (4 significant digits)")
]
SCORE_DIGITS = 4
Created = Annotated[bool, msgspec.Meta(description="true when this call created it")]
Warnings = Annotated[
    list[str],
    msgspec.Meta(description="what was kept or truncated; present only when there is one"),
]
AlwaysWarnings = Annotated[
    list[str],
    msgspec.Meta(description="what was kept or truncated; [] when nothing was"),
]
Ranking = Literal["lexical", "semantic"]
Scopes = Annotated[list[str], msgspec.Meta(description="`global` or `repo:/absolute/path`")]
S = TypeVar("S", bound=msgspec.Struct)


def time_of(ts: float) -> dt.datetime:
    """Epoch seconds as an aware UTC datetime (encoded ``...Z``)."""
    return dt.datetime.fromtimestamp(ts, dt.UTC)


def score_of(value: float) -> float:
    """``value`` to `SCORE_DIGITS` significant digits: what a reader can compare, not noise."""
    return float(f"{value:.{SCORE_DIGITS}g}")


class EntityRef(msgspec.Struct):
    id: int
    name: str
    kind: str


class LinkedEntity(EntityRef):
    created: Created


class RelationRef(msgspec.Struct):
    id: int
    source: str
    relation: str
    target: str


class LinkedRelation(RelationRef):
    created: Created


class MovedTo(msgspec.Struct):
    path: str
    symbol: str


CodeStatus = Literal["fresh", "changed", "moved", "deleted"]


class CodeAnchor(msgspec.Struct, kw_only=True, omit_defaults=True):
    path: Annotated[str, msgspec.Meta(description="the file, relative to the repository's root")]
    symbol: Annotated[str, msgspec.Meta(description='the symbol in it; "": the whole file')]
    kind: str
    status: Annotated[
        CodeStatus | None,
        msgspec.Meta(
            description="against the working tree: fresh, changed (its text differs), moved (the same "
            "text under another path or name: see moved_to), deleted; absent when it could not be checked"
        ),
    ] = None
    since: Annotated[Time, msgspec.Meta(description="when it was anchored")]
    commit: Annotated[str, msgspec.Meta(description="the Git commit then; '' outside Git")] = ""
    moved_to: MovedTo | None = None


class Memory(msgspec.Struct, kw_only=True, omit_defaults=True):
    id: int
    content: str
    memory_type: str
    importance: float
    created_at: Time
    updated_at: Time
    last_accessed_at: Annotated[
        Time | None, msgspec.Meta(description="ISO 8601 time in UTC; null: never read")
    ]
    access_count: Annotated[int, msgspec.Meta(description="times recall or inspect returned it")]
    scopes: Scopes
    code: Annotated[
        list[CodeAnchor],
        msgspec.Meta(
            description="the code it describes, each anchor with its status (absent: none)"
        ),
    ] = msgspec.field(default_factory=list)
    stale: Annotated[
        bool, msgspec.Meta(description="true: an anchor's code changed or was deleted since")
    ] = False


class ScoredMemory(Memory, kw_only=True, omit_defaults=True):
    score: Score
    entities: Annotated[
        list[EntityRef],
        msgspec.Meta(
            description="the knowledge-graph entities it is about (an observation: its "
            "entity); absent: none"
        ),
    ] = msgspec.field(default_factory=list)
    explain: Annotated[
        list[str],
        msgspec.Meta(
            description="with explain=true: the re-ranker's rank, the seeds (dense, lexical), "
            "graph links and thread neighbour that brought this memory"
        ),
    ] = msgspec.field(default_factory=list)


class InspectResult(Memory, kw_only=True, omit_defaults=True):
    entities: list[EntityRef]
    relations: list[RelationRef]
    warnings: Warnings = msgspec.field(default_factory=list)


class UpdateResult(Memory, kw_only=True, omit_defaults=True):
    changed: Annotated[list[str], msgspec.Meta(description="the fields this call changed")]
    warnings: Warnings = msgspec.field(default_factory=list)


class RememberResult(msgspec.Struct, kw_only=True, omit_defaults=True):
    id: int
    memory_type: str
    scopes: Scopes
    entities: list[LinkedEntity]
    relations: list[LinkedRelation]
    code: Annotated[
        list[CodeAnchor],
        msgspec.Meta(description="the code anchors stored (given in `code` or found in the text)"),
    ] = msgspec.field(default_factory=list)
    warnings: AlwaysWarnings  # no default: never omitted


class RecallResult(msgspec.Struct, kw_only=True, omit_defaults=True):
    memories: Annotated[list[ScoredMemory], msgspec.Meta(description="best first")]
    scopes: Annotated[list[str], msgspec.Meta(description="the scopes searched")]
    ranking: Annotated[
        Ranking,
        msgspec.Meta(description="semantic: embeddings and graph; lexical: SQLite FTS5 BM25"),
    ]
    tokens: Annotated[
        int | None,
        msgspec.Meta(description="with max_tokens: the estimated tokens of the memories returned"),
    ] = None
    warnings: AlwaysWarnings  # no default: never omitted


class StaleMemory(Memory, kw_only=True, omit_defaults=True):
    diff: Annotated[
        str,
        msgspec.Meta(
            description="the structural diff (code_diff's lines) of its anchors' files from the "
            "commit each was anchored at to the working tree"
        ),
    ] = ""


class ReviewStaleResult(msgspec.Struct, kw_only=True, omit_defaults=True):
    memories: Annotated[
        list[StaleMemory],
        msgspec.Meta(description="stale memories of the repository, oldest id first"),
    ]
    scope: Annotated[str, msgspec.Meta(description="the repository's scope")]
    checked: Annotated[int, msgspec.Meta(description="anchored memories checked by this call")]
    next_cursor: Annotated[
        int | None, msgspec.Meta(description="pass as cursor for the next page; absent: no more")
    ] = None


class StatsResult(msgspec.Struct):
    memories: int
    scopes: int
    entities: int
    edges: int
    vectors: int
    recall_log: int
    anchors: Annotated[int, msgspec.Meta(description="code anchors of the memories counted")]
    current_scope: str


class ScopeInfo(msgspec.Struct):
    name: str
    is_current: Annotated[bool, msgspec.Meta(description="the calling session's repository")]
    writable: Annotated[bool, msgspec.Meta(description="this server may write to it")]
    memories: int


class ListScopesResult(msgspec.Struct):
    current_scope: str
    scopes: list[ScopeInfo]


class RelateResult(msgspec.Struct, kw_only=True, omit_defaults=True):
    id: int
    source: EntityRef
    relation: str
    target: EntityRef
    metadata: dict[str, Any]
    created: Created
    scopes: Scopes
    warnings: AlwaysWarnings  # no default: never omitted


class Edge(msgspec.Struct):
    source: str
    relation: str
    target: str


class GraphPath(msgspec.Struct):
    depth: int
    end: str
    edges: list[Edge]


class GraphResult(msgspec.Struct):
    entity: EntityRef
    direction: Literal["both", "incoming", "outgoing"]
    paths: Annotated[list[GraphPath], msgspec.Meta(description="breadth first")]
    truncated: Annotated[bool, msgspec.Meta(description="more paths exist than `limit`")]


class ForgetResult(msgspec.Struct):
    id: int
    forgotten: bool
    scopes: Scopes


Row = Mapping[str, object]
_TIMES = ("created_at", "updated_at", "last_accessed_at")


def _code_fields(anchors: object) -> object:
    if not isinstance(anchors, list):
        return anchors
    return [
        {**a, "since": time_of(a["since"])}
        if isinstance(a, dict) and isinstance(a.get("since"), int | float)
        else a
        for a in anchors
    ]


def memory_fields(row: Row) -> dict[str, object]:
    """A stored memory row (epoch times) as result fields (UTC datetimes)."""
    out = dict(row)
    for key in _TIMES:
        value = out.get(key)
        if isinstance(value, int | float):
            out[key] = time_of(value)
    if "code" in out:
        out["code"] = _code_fields(out["code"])
    score = out.get("score")
    if isinstance(score, int | float):
        out["score"] = score_of(score)
    return out


def memory_result(row: Row, struct: type[S], **extra: object) -> S:
    """``row`` (plus ``extra`` fields) as ``struct``; a shape mismatch raises `msgspec.ValidationError`."""
    return msgspec.convert({**memory_fields(row), **extra}, struct)
