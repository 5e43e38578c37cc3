"""The nine memory tools: remember, recall, stats, list_scopes, relate, graph, inspect, update, forget.

Every refusal raises `ToolError` (an ``isError`` result saying why) before
anything changes: scopes are validated first, embeddings are computed before
the write, and the write re-checks what it depends on inside its transaction.

Embeddings: when an ``embedder`` service runs, `remember`, `update` (changed
content) and `relate` embed their documents *before* the write and store the
vectors in the same transaction; an embedding failure fails the call with
nothing stored. Without an embedder no vectors are stored.

Ranking: `recall` asks the ``ranker`` service (semantic + graph) when
``use_embeddings`` is true and it runs; it falls back to SQLite FTS5 BM25
(importance, then recency, break ties) when the ranker is absent, answers
None, or fails.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal

import msgspec
import trio

from ...protocol.tools import Tool, ToolError
from ...supervisors import trace
from ...supervisors.context import AppContext
from ..embedder.pool import EMBEDDER, EmbedderPool
from ..ranker.service import RANKER
from . import limits, ops
from .limits import Content, Importance, MemoryId, MemoryType, Name, Scopes
from .ownership import Ownership
from .scopes import ScopeError
from .writer import ACTOR, STORE, Store, Written


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
            msgspec.Meta(
                max_length=100, description="entities this memory mentions: names, or {name, kind}"
            ),
        ]
        | None
    ) = None
    relations: (
        Annotated[
            list[RelationArg],
            msgspec.Meta(
                max_length=100,
                description="directed relations this memory states: {source, relation, target}",
            ),
        ]
        | None
    ) = None


class RecallArgs(msgspec.Struct, forbid_unknown_fields=True):
    query: Annotated[str, msgspec.Meta(max_length=10_000)]
    scopes: Scopes | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=100)] = 10
    use_embeddings: bool = True
    memory_type: MemoryType | None = None


class StatsArgs(msgspec.Struct, forbid_unknown_fields=True):
    """No arguments."""


class ListScopesArgs(msgspec.Struct, forbid_unknown_fields=True):
    """No arguments."""


class RelateArgs(msgspec.Struct, forbid_unknown_fields=True):
    source: Name
    relation: Annotated[
        str,
        msgspec.Meta(min_length=1, max_length=128, description="relation type, e.g. depends_on"),
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


class ForgetArgs(msgspec.Struct, forbid_unknown_fields=True):
    id: MemoryId
    scopes: Scopes | None = None


# -- helpers -------------------------------------------------------------------


async def scoped(fn: Callable[[Any], list[str]], scopes: list[str] | None) -> list[str]:
    """Apply a scope rule; explicit ``repo:`` paths may run git, so off the trio thread."""
    if not scopes:
        return fn(scopes)
    return await trio.to_thread.run_sync(fn, scopes)


def store_of(app: AppContext) -> Store:
    return app.service(STORE)


def embedder_of(app: AppContext) -> EmbedderPool | None:
    if not app.config.embedding.enabled:
        return None
    return app.find(EMBEDDER)


class Embedded(msgspec.Struct):
    vectors: list[ops.Vec]
    warnings: list[str]


async def embed(app: Any, texts: Sequence[str], what: str) -> Embedded | None:
    """Embed ``texts`` with the embedder service, or None when embeddings are off.

    A text longer than the model's token limit is embedded as up to
    ``[embedding] max_chunks`` overlapping windows (its `ops.Vec` holds them
    all); only content beyond those windows is cut, and that is reported in
    the warnings.

    Error handling: an embedder failure raises `ToolError` (the caller has
    stored nothing yet).
    """
    embedder = embedder_of(app)
    if embedder is None or not texts:
        return None
    max_chunks = app.config.embedding.max_chunks
    try:
        result = await embedder.embed(list(texts), max_chunks=max_chunks)
    except ToolError:
        raise
    except Exception as exc:  # noqa: BLE001 - any embedder failure refuses the write
        trace.warning(ACTOR, "embed_failed", what=what, error=f"{type(exc).__name__}: {exc}")
        raise ToolError(
            f"embedding failed ({type(exc).__name__}: {exc}); nothing was stored, try again"
        ) from exc
    vectors = ops.vecs_of(result)
    tokens = getattr(embedder, "chunk_tokens", None)
    limit = f"{max_chunks} windows of {tokens} tokens" if tokens else f"{max_chunks} windows"
    warnings = [
        f"{what} text {i + 1} was truncated for embedding: it is longer than the {limit} "
        "the embedding covers, and the rest is not embedded"
        if len(texts) > 1
        else f"{what} text was truncated for embedding: it is longer than the {limit} "
        "the embedding covers, and the rest is not embedded"
        for i, cut in enumerate(result.truncated)
        if cut
    ]
    if warnings:
        trace.warning(ACTOR, "embed_truncated", what=what, count=len(warnings))
    return Embedded(vectors, warnings)


def clean_text(value: str, field: str) -> str:
    if not value.strip():
        raise ToolError(f"`{field}` must not be empty or only whitespace")
    return value


def clean_type(value: str) -> str:
    text = value.strip()
    if not text:
        raise ToolError("`memory_type` must not be empty (for example `observation`, `decision`)")
    return text


def _check_finite(value: float | None) -> None:
    if value is not None and not math.isfinite(value):
        raise ToolError("`importance` must be a number between 0.0 and 1.0")


# -- remember --------------------------------------------------------------------


async def remember(ctx: Any, args: RememberArgs) -> dict[str, Any]:
    app = ctx.app
    store = store_of(app)
    content = clean_text(args.content, "content")
    memory_type = clean_type(args.memory_type)
    _check_finite(args.importance)
    scopes = await scoped(store.policy.write_scopes, args.scopes)
    entities = [
        ops.validate_entity(e) if isinstance(e, str) else ops.validate_entity(e.name, e.kind)
        for e in args.entities or []
    ]
    relations = [
        ops.RelationSpec(
            ops.validate_entity(r.source),
            ops.validate_relation_type(r.relation),
            ops.validate_entity(r.target),
            limits.check_metadata(r.metadata, f"relations[{i}].metadata"),
        )
        for i, r in enumerate(args.relations or [])
    ]
    new = ops.NewMemory(content, memory_type, float(args.importance), scopes, entities, relations)
    warnings: list[str] = []
    if embedder_of(app) is not None:
        endpoint_specs = [*entities, *(s for r in relations for s in (r.source, r.target))]
        ent_missing, rel_missing = await store.read(
            lambda conn: ops.missing_vectors(conn, endpoint_specs, relations)
        )
        ent_docs: dict[str, str] = {}
        for spec in endpoint_specs:
            canon = ops.canonical_name(spec.name)
            if canon in ent_missing:
                ent_docs.setdefault(canon, ops.entity_document(spec.name, spec.kind))
        rel_docs: dict[tuple[str, str, str], str] = {}
        for rel in relations:
            key = (
                ops.canonical_name(rel.source.name),
                rel.relation,
                ops.canonical_name(rel.target.name),
            )
            if key in rel_missing:
                rel_docs.setdefault(
                    key, ops.relation_document(rel.source.name, rel.relation, rel.target.name)
                )
        texts = [ops.memory_document(content), *ent_docs.values(), *rel_docs.values()]
        embedded = await embed(app, texts, "memory")
        if embedded is not None:
            new.vector = embedded.vectors[0]
            new.entity_vectors = dict(
                zip(ent_docs, embedded.vectors[1 : 1 + len(ent_docs)], strict=True)
            )
            new.relation_vectors = dict(
                zip(rel_docs, embedded.vectors[1 + len(ent_docs) :], strict=True)
            )
            warnings = embedded.warnings

    def op(conn: sqlite3.Connection) -> Written:
        result, changes = ops.insert_memory(conn, new, writable=store.policy.writable)
        return Written(result, changes)

    result = await store.write(op, name="remember")
    result["memory_type"] = memory_type
    result["warnings"] = [*warnings, *result["warnings"]]
    return result


# -- recall ----------------------------------------------------------------------


async def rank(
    app: Any,
    query: str,
    selection: list[str],
    memory_type: str | None,
    limit: int,
    use_embeddings: bool,
) -> tuple[list[tuple[int, float]], str, list[str]]:
    """Ranked (memory id, score) within ``selection``: semantic ranker when asked and running, else lexical."""
    store = store_of(app)
    warnings: list[str] = []
    ranker = app.find(RANKER) if use_embeddings and app.config.embedding.enabled else None
    if ranker is not None:
        ids = await store.read(lambda conn: ops.scope_ids(conn, selection))
        try:
            ranked = await ranker.recall(query, sorted(ids.values()), memory_type, limit)
        except ToolError:
            raise
        except Exception as exc:  # noqa: BLE001 - recall still answers, lexically
            trace.warning(ACTOR, "semantic_recall_failed", error=f"{type(exc).__name__}: {exc}")
            warnings.append(
                f"semantic ranking failed ({type(exc).__name__}: {exc}); lexical ranking was used"
            )
            ranked = None
        if ranked is not None:
            warnings.extend(getattr(ranked, "warnings", []))
            return [(int(i), float(s)) for i, s in ranked][:limit], "semantic", warnings
    ranked = await store.read(
        lambda conn: ops.lexical_search(conn, query, selection, memory_type, limit)
    )
    return ranked, "lexical", warnings


async def recall(ctx: Any, args: RecallArgs) -> dict[str, Any]:
    app = ctx.app
    store = store_of(app)
    selection = await scoped(store.policy.select, args.scopes)
    memory_type = clean_type(args.memory_type) if args.memory_type is not None else None
    ranked, ranking, warnings = await rank(
        app, args.query, selection, memory_type, args.limit, args.use_embeddings
    )
    try:
        rows = await store.write(
            lambda conn: ops.record_access(conn, "recall", args.query, selection, ranked),
            name="recall",
        )
    except sqlite3.OperationalError as exc:
        # A full or read-only disk: answer from a read connection, uncounted.
        trace.warning(ACTOR, "recall_access_not_recorded", error=str(exc))
        rows = await store.read(lambda conn: _ranked_rows(conn, selection, ranked))
        warnings.append(f"the access could not be recorded ({exc}); results are unaffected")
    return {"memories": rows, "scopes": selection, "ranking": ranking, "warnings": warnings}


def _ranked_rows(
    conn: sqlite3.Connection, selection: list[str], ranked: Sequence[tuple[int, float]]
) -> list[dict[str, Any]]:
    """What `ops.record_access` returns, without writing anything."""
    rows: list[dict[str, Any]] = []
    seen: set[int] = set()
    for memory_id, score in ranked:
        if memory_id in seen:
            continue
        seen.add(memory_id)
        memory = ops.get_memory(conn, memory_id, details=False)
        if memory is None or not ops.visible(memory["scopes"], selection):
            continue
        memory["score"] = float(score)
        rows.append(memory)
    repos = {s for s in selection if s != "global"}
    rows.sort(key=lambda m: 0 if repos.intersection(m["scopes"]) else 1)
    return rows


# -- stats and scopes ------------------------------------------------------------


async def stats(ctx: Any, args: StatsArgs) -> dict[str, Any]:
    store = store_of(ctx.app)
    result = await store.read(ops.counts)
    result["current_scope"] = store.default_scope
    return result


async def list_scopes(ctx: Any, args: ListScopesArgs) -> dict[str, Any]:
    store = store_of(ctx.app)
    stored = await store.read(ops.scope_counts)
    policy = store.policy
    names = sorted(set(stored) | {policy.current, ops.GLOBAL})
    return {
        "current_scope": policy.current,
        "scopes": [
            {
                "name": n,
                "is_current": n == policy.current,
                "writable": n in policy.writable,
                "memories": stored.get(n, 0),
            }
            for n in names
        ],
    }


# -- relate and graph ------------------------------------------------------------


async def relate(ctx: Any, args: RelateArgs) -> dict[str, Any]:
    app = ctx.app
    store = store_of(app)
    scopes = await scoped(store.policy.write_scopes, args.scopes)
    source = ops.validate_entity(args.source, args.source_kind)
    target = ops.validate_entity(args.target, args.target_kind)
    relation_type = ops.validate_relation_type(args.relation)
    limits.check_metadata(args.metadata, "metadata")
    warnings: list[str] = []
    vectors: dict[int, ops.Vec] = {}  # 0: source, 1: target, 2: relation
    if embedder_of(app) is not None:
        spec = ops.RelationSpec(source, relation_type, target)
        ent_missing, rel_missing = await store.read(
            lambda conn: ops.missing_vectors(conn, [source, target], [spec])
        )
        docs = {
            0: ops.entity_document(source.name, source.kind)
            if ops.canonical_name(source.name) in ent_missing
            else None,
            1: ops.entity_document(target.name, target.kind)
            if ops.canonical_name(target.name) in ent_missing
            else None,
            2: ops.relation_document(source.name, relation_type, target.name)
            if rel_missing
            else None,
        }
        wanted = {k: d for k, d in docs.items() if d is not None}
        embedded = await embed(app, list(wanted.values()), "relation")
        if embedded is not None:
            vectors = dict(zip(wanted, embedded.vectors, strict=True))
            warnings = embedded.warnings

    def op(conn: sqlite3.Connection) -> Written:
        ts = ops.now()
        sids = [ops.ensure_scope(conn, s) for s in scopes]
        own = Ownership(conn, store.policy.writable)
        changes = []
        kept: list[str] = []
        # The relation's metadata is what relate is asked to set: a change of a
        # shared relation's is refused (one transaction: nothing stays linked).
        # The kinds are a side note: a shared entity keeps its kind, with a warning.
        src_id, src_new = ops.upsert_entity(conn, source, sids, ts, own, kept)
        tgt_id, tgt_new = ops.upsert_entity(conn, target, sids, ts, own, kept)
        rel_id, rel_new = ops.upsert_relation(
            conn, src_id, relation_type, tgt_id, args.metadata, sids, ts, own, None
        )
        for kind, item, created, vec in (
            ("entity", src_id, src_new, 0),
            ("entity", tgt_id, tgt_new, 1),
            ("relation", rel_id, rel_new, 2),
        ):
            if vec in vectors and ops.put_vector(conn, kind, item, vectors[vec], replace=False):
                changes.append(ops._change(kind, item, vectors[vec]))
            elif created:
                changes.append(ops._change(kind, item, None))
        row = conn.execute("SELECT metadata FROM relations WHERE id = ?", (rel_id,)).fetchone()
        entity = lambda i, spec: {"id": i, **(ops.find_entity(conn, spec.name) or {})}  # noqa: E731
        return Written(
            {
                "id": rel_id,
                "source": entity(src_id, source),
                "relation": relation_type,
                "target": entity(tgt_id, target),
                "metadata": json.loads(row[0]),
                "created": rel_new,
                "scopes": scopes,
                "warnings": kept,
            },
            changes,
        )

    result = await store.write(op, name="relate")
    result["warnings"] = [*warnings, *result["warnings"]]
    return result


async def graph(ctx: Any, args: GraphArgs) -> dict[str, Any]:
    store = store_of(ctx.app)
    selection = await scoped(store.policy.select, args.scopes)
    return await store.read(
        lambda conn: ops.graph_paths(
            conn, args.entity, args.direction, args.max_depth, args.limit, selection
        )
    )


# -- inspect, update, forget -----------------------------------------------------


async def inspect(ctx: Any, args: InspectArgs) -> dict[str, Any]:
    store = store_of(ctx.app)
    selection = await scoped(store.policy.select, args.scopes)

    def op(conn: sqlite3.Connection) -> dict[str, Any]:
        memory = ops.get_memory(conn, args.id)
        if memory is None or not ops.visible(memory["scopes"], selection):
            raise ops.not_found(args.id, selection)
        ops.record_access(conn, "inspect", f"#{args.id}", selection, [(args.id, 1.0)])
        updated = ops.get_memory(conn, args.id)
        assert updated is not None
        return updated

    return await store.write(op, name="inspect")


async def update(ctx: Any, args: UpdateArgs) -> dict[str, Any]:
    app = ctx.app
    store = store_of(app)
    if args.content is None and args.memory_type is None and args.importance is None:
        raise ToolError(
            "nothing to update: give at least one of `content`, `memory_type`, `importance`"
        )
    content = clean_text(args.content, "content") if args.content is not None else None
    memory_type = clean_type(args.memory_type) if args.memory_type is not None else None
    _check_finite(args.importance)
    selection = await scoped(store.policy.write_selection, args.scopes)
    vector: ops.Vec | None = None
    warnings: list[str] = []
    if content is not None and embedder_of(app) is not None:
        # Refuse before embedding; the write re-checks inside its transaction.
        current = await store.read(
            lambda conn: ops.writable_memory(conn, args.id, store.policy, selection, "update")
        )
        if current["content"] != content:
            embedded = await embed(app, [ops.memory_document(content)], "memory")
            if embedded is not None:
                vector, warnings = embedded.vectors[0], embedded.warnings
    embeddings_on = vector is not None

    def op(conn: sqlite3.Connection) -> Written:
        result, changes = ops.update_memory(
            conn, args.id, store.policy, selection,
            content=content, memory_type=memory_type, importance=args.importance,
            vector=vector, embeddings_on=embeddings_on,
        )  # fmt: skip
        return Written(result, changes)

    result = await store.write(op, name="update")
    result["warnings"] = warnings
    return result


async def forget(ctx: Any, args: ForgetArgs) -> dict[str, Any]:
    store = store_of(ctx.app)
    selection = await scoped(store.policy.write_selection, args.scopes)

    def op(conn: sqlite3.Connection) -> Written:
        result, changes = ops.delete_memory(conn, args.id, store.policy, selection)
        return Written(result, changes)

    return await store.write(op, name="forget")


# -- registration ----------------------------------------------------------------

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
    ),
    Tool(
        name="recall",
        title="Recall",
        description=(
            "Find memories relevant to a query, best first, within the current repository plus `global` "
            "(or the given scopes plus `global`). Optional memory_type filter (ignores case), limit 1-100 "
            "(default 10), use_embeddings (false forces lexical FTS5 ranking). Returned memories count as accessed."
        ),
        args=RecallArgs,
        handler=recall,
    ),
    Tool(
        name="stats",
        title="Store statistics",
        description="Counts of memories, scopes, entities and edges (relations) in the store.",
        args=StatsArgs,
        handler=stats,
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
        idempotent=True,
    ),
    Tool(
        name="forget",
        title="Forget a memory",
        description="Delete a memory by id, with its links to scopes, entities and relations."
        + _SCOPE_NOTE,
        args=ForgetArgs,
        handler=forget,
        destructive=True,
        idempotent=True,
    ),
]

__all__ = ["TOOLS", "ScopeError"]
