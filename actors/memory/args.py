"""The memory tools' arguments: one msgspec struct per tool (their ``inputSchema`` is generated from these)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from ..anchors.args import Code
from ..store.domain.limits import Content, Importance, MemoryId, MemoryType, Name, Scopes


class EntityArg(msgspec.Struct, forbid_unknown_fields=True):
    name: Name
    kind: Annotated[str, msgspec.Meta(max_length=64)] = "entity"


class RelationArg(msgspec.Struct, forbid_unknown_fields=True):
    source: Name
    relation: Annotated[str, msgspec.Meta(min_length=1, max_length=128)]
    target: Name
    metadata: dict[str, Any] | None = None


class RememberArgs(msgspec.Struct, forbid_unknown_fields=True):
    content: Content
    memory_type: MemoryType = "observation"
    importance: Importance = 0.0
    scopes: Scopes | None = None
    entities: (
        Annotated[
            list[str | EntityArg],
            msgspec.Meta(max_length=100),
        ]
        | None
    ) = None
    relations: (
        Annotated[
            list[RelationArg],
            msgspec.Meta(max_length=100),
        ]
        | None
    ) = None
    code: Code | None = None


class RecallArgs(msgspec.Struct, forbid_unknown_fields=True):
    query: Annotated[str, msgspec.Meta(max_length=10_000)]
    scopes: Scopes | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=100)] = 10
    use_embeddings: Annotated[bool, msgspec.Meta(description="false: lexical (FTS5) only")] = True
    memory_type: MemoryType | None = None
    max_tokens: (
        Annotated[
            int,
            msgspec.Meta(
                ge=1,
                le=1_000_000,
                description="token budget (chars/4)",
            ),
        ]
        | None
    ) = None
    explain: Annotated[
        bool,
        msgspec.Meta(description="say why each matched"),
    ] = False
    code: (
        Annotated[
            str,
            msgspec.Meta(
                min_length=1,
                max_length=1024,
                description="path or symbol: memories anchored to it (or an import/call away) first",
            ),
        ]
        | None
    ) = None


class StatsArgs(msgspec.Struct, forbid_unknown_fields=True):
    """No arguments."""


class ListScopesArgs(msgspec.Struct, forbid_unknown_fields=True):
    """No arguments."""


class RelateArgs(msgspec.Struct, forbid_unknown_fields=True):
    source: Name
    relation: Annotated[
        str,
        msgspec.Meta(min_length=1, max_length=128, description="e.g. depends_on"),
    ]
    target: Name
    source_kind: Annotated[str, msgspec.Meta(max_length=64)] = "entity"
    target_kind: Annotated[str, msgspec.Meta(max_length=64)] = "entity"
    metadata: dict[str, Any] | None = None
    scopes: Scopes | None = None


class GraphArgs(msgspec.Struct, forbid_unknown_fields=True):
    entity: Name
    direction: Literal["both", "incoming", "outgoing"] = "both"
    max_depth: Annotated[int, msgspec.Meta(ge=1, le=3)] = 2
    limit: Annotated[int, msgspec.Meta(ge=1, le=100)] = 50
    scopes: Scopes | None = None


class InspectArgs(msgspec.Struct, forbid_unknown_fields=True):
    id: MemoryId
    scopes: Scopes | None = None


class UpdateArgs(msgspec.Struct, forbid_unknown_fields=True):
    id: MemoryId
    content: Content | None = None
    memory_type: MemoryType | None = None
    importance: Importance | None = None
    scopes: Scopes | None = None
    code: Code | None = None


class ReviewStaleArgs(msgspec.Struct, forbid_unknown_fields=True):
    limit: Annotated[int, msgspec.Meta(ge=1, le=50)] = 10
    cursor: Annotated[int, msgspec.Meta(ge=0, le=2**62)] = 0


class ForgetArgs(msgspec.Struct, forbid_unknown_fields=True):
    id: MemoryId
    scopes: Scopes | None = None
