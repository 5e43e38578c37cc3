"""The memory tools' handlers: remember, recall, stats, list_scopes, inspect, update, forget.

Every refusal raises a `DomainError` (an ``isError`` result saying why)
before anything changes: scopes are validated first, embeddings are computed
before the write (see `embedder.embed.embed`), and the write re-checks what it
depends on inside its transaction.

Ranking: `recall` asks the ``ranker`` service (semantic + graph) when
``use_embeddings`` is true and it runs; it falls back to SQLite FTS5 BM25
(importance, then recency, break ties) when the ranker is absent, answers
None, or fails.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ...protocol.errors import BadArgument, DomainError
from ...supervisors import trace
from ...supervisors.context import AppContext, CallContext
from ..anchors.anchoring import anchors_for, code_states, penalized, update_anchors, where
from ..embedder.embed import embed, embedder_of
from ..ranker.handle import RANKER, Ranked
from ..screening import logged_query
from ..store.domain import limits
from ..store.domain.documents import entity_document, memory_document, relation_document
from ..store.domain.embeddings import Vec
from ..store.domain.entities import (
    RelationSpec,
    missing_vectors,
    validate_entity,
    validate_relation_type,
)
from ..store.domain.lexical import search_memories
from ..store.domain.memories import (
    NewMemory,
    counts,
    delete_memory,
    get_memory,
    insert_memory,
    not_found,
    update_memory,
    visible,
    visible_counts,
    writable_memory,
)
from ..store.domain.scopes import GLOBAL, ScopePolicy
from ..store.interfaces import ReadTx, StoreTx
from ..store.interfaces.errors import StoreOperationalError
from ..store.tooling.services import (
    check_finite,
    clean_text,
    clean_type,
    policy_of,
    scoped,
    store_of,
)
from ..store.writer import ACTOR, Written
from .access import ranked_rows, record_access
from .args import (
    ForgetArgs,
    InspectArgs,
    ListScopesArgs,
    RecallArgs,
    RememberArgs,
    StatsArgs,
    UpdateArgs,
)
from .code_recall import code_candidates
from .results import (
    ForgetResult,
    InspectResult,
    ListScopesResult,
    Ranking,
    RecallResult,
    RememberResult,
    ScopeInfo,
    ScoredMemory,
    StatsResult,
    UpdateResult,
    memory_fields,
    memory_result,
)

TOKEN_CHARS = 4  # characters per token, the usual estimate for English text and code
BUDGET_POOL = 100  # memories ranked, at most, to fill a max_tokens budget


async def remember(ctx: CallContext, args: RememberArgs) -> RememberResult:
    app = ctx.app
    store = store_of(app)
    content = clean_text(args.content, "content")
    memory_type = clean_type(args.memory_type)
    check_finite(args.importance)
    policy = await policy_of(ctx)
    scopes = await scoped(policy.write_scopes, args.scopes)
    entities = [
        validate_entity(e) if isinstance(e, str) else validate_entity(e.name, e.kind)
        for e in args.entities or []
    ]
    relations = [
        RelationSpec(
            validate_entity(r.source),
            validate_relation_type(r.relation),
            validate_entity(r.target),
            limits.check_metadata(r.metadata, f"relations[{i}].metadata"),
        )
        for i, r in enumerate(args.relations or [])
    ]
    new = NewMemory(content, memory_type, float(args.importance), scopes, entities, relations)
    warnings: list[str] = []
    wanted = None if args.code is None else [(c.path, c.symbol) for c in args.code]
    anchors = await anchors_for(ctx, policy, scopes, content, wanted, warnings)
    if embedder_of(app) is not None:
        endpoint_specs = [*entities, *(s for r in relations for s in (r.source, r.target))]
        ent_missing, rel_missing = await store.read(
            lambda tx: missing_vectors(tx, endpoint_specs, relations),
            name="remember.missing_vectors",
        )
        ent_docs: dict[str, str] = {}
        for spec in endpoint_specs:
            if spec.name in ent_missing:
                ent_docs.setdefault(spec.name, entity_document(spec.name, spec.kind))
        rel_docs: dict[tuple[str, str, str], str] = {}
        for rel in relations:
            key = (rel.source.name, rel.relation, rel.target.name)
            if key in rel_missing:
                rel_docs.setdefault(
                    key, relation_document(rel.source.name, rel.relation, rel.target.name)
                )
        texts = [memory_document(content), *ent_docs.values(), *rel_docs.values()]
        embedded = await embed(app, texts, "memory")
        if embedded is not None:
            new.vector = embedded.vectors[0]
            new.entity_vectors = dict(
                zip(ent_docs, embedded.vectors[1 : 1 + len(ent_docs)], strict=True)
            )
            new.relation_vectors = dict(
                zip(rel_docs, embedded.vectors[1 + len(ent_docs) :], strict=True)
            )
            warnings += embedded.warnings

    def op(tx: StoreTx) -> Written[dict[str, Any]]:
        result, changes = insert_memory(tx, new, writable=policy.writable)
        if anchors:
            tx.anchors.set(int(result["id"]), anchors)
        return Written(result, changes)

    result: dict[str, Any] = await store.write(op, name="remember")
    result["code"] = [
        {"path": a.path, "symbol": a.symbol, "kind": a.kind, "since": a.written_at,
         "commit": a.commit, "status": "fresh"}
        for a in anchors
    ]  # fmt: skip
    result = {**memory_fields(result), "memory_type": memory_type}
    result["warnings"] = [*warnings, *result["warnings"]]
    return msgspec.convert(result, RememberResult)


async def rank(
    app: AppContext,
    query: str,
    selection: list[str],
    memory_type: str | None,
    limit: int,
    use_embeddings: bool,
    reasons: dict[int, list[str]] | None = None,
) -> tuple[list[tuple[int, float]], Ranking, list[str]]:
    """Ranked (memory id, score) within ``selection``: semantic ranker when asked and running, else lexical.

    ``reasons``: if given, receives why each memory was ranked (memory id -> reasons).
    """
    store = store_of(app)
    warnings: list[str] = []
    ranker = app.find(RANKER) if use_embeddings and app.config.embedding.enabled else None
    if ranker is not None:
        ids = await store.read(lambda tx: tx.scopes.ids(selection), name="recall.scope_ids")
        try:
            semantic: Ranked | None = await ranker.recall(
                query, sorted(ids.values()), memory_type, limit, explain=reasons is not None
            )
        except DomainError:
            raise
        except Exception as exc:  # noqa: BLE001 - recall still answers, lexically
            trace.warning(ACTOR, "semantic_recall_failed", error=f"{type(exc).__name__}: {exc}")
            warnings.append(
                f"semantic ranking failed ({type(exc).__name__}: {exc}); lexical ranking was used"
            )
            semantic = None
        if semantic is not None:
            warnings.extend(semantic.warnings)
            if reasons is not None:
                reasons.update(semantic.reasons)
            return [(int(i), float(s)) for i, s in semantic][:limit], "semantic", warnings
    ranked = await store.read(
        lambda tx: search_memories(tx, query, selection, memory_type, limit),
        name="recall.lexical",
    )
    if reasons is not None:
        for r, (memory_id, bm25) in enumerate(ranked):
            reasons[memory_id] = [f"lexical: #{r + 1}, BM25 {bm25:.2f}"]
    return ranked, "lexical", warnings


def estimate_tokens(text: str) -> int:
    """Tokens of ``text`` for an LLM, estimated: a quarter of its characters, rounded up."""
    return max(1, -(-len(text) // TOKEN_CHARS))


def within_budget(
    rows: list[dict[str, Any]], max_tokens: int, limit: int
) -> tuple[list[tuple[int, float]], int]:
    """The best ``rows`` (in order) whose contents fit in ``max_tokens`` together, at most
    ``limit``: a memory too long for what is left is skipped for the next ones. Returns
    their (id, score) and the tokens they take."""
    chosen: list[tuple[int, float]] = []
    used = 0
    for row in rows:
        cost = estimate_tokens(row["content"])
        if used + cost <= max_tokens:
            chosen.append((row["id"], row["score"]))
            used += cost
            if len(chosen) >= limit:
                break
    return chosen, used


def _shown(row: dict[str, Any], policy: ScopePolicy) -> dict[str, Any]:
    """``row`` with only the scopes the session's grant may read (a memory of ``global``
    also linked to a repository outside the grant does not name that repository)."""
    if policy.grant is None or not policy.grant.restricted:
        return row
    return {**row, "scopes": [s for s in row.get("scopes", ()) if policy.may_read(s)]}


async def recall(ctx: CallContext, args: RecallArgs) -> RecallResult:
    app = ctx.app
    store = store_of(app)
    policy = await policy_of(ctx)
    selection = await scoped(policy.select, args.scopes)
    memory_type = clean_type(args.memory_type) if args.memory_type is not None else None
    reasons: dict[int, list[str]] | None = {} if args.explain else None
    # With a token budget, a wider pool: memories too long for it make room for the next.
    pool = args.limit if args.max_tokens is None else min(BUDGET_POOL, args.limit * 3)
    ranked, ranking, warnings = await rank(
        app, args.query, selection, memory_type, pool, args.use_embeddings, reasons
    )
    if args.code is not None:
        ranked = await code_candidates(ctx, policy, selection, args.code, ranked, pool, reasons)
    tokens: int | None = None
    if args.max_tokens is not None:
        budget = args.max_tokens
        candidates = await store.read(
            lambda tx: ranked_rows(tx, selection, ranked), name="recall.candidates"
        )
        ranked, tokens = within_budget(candidates, budget, args.limit)
    logged, screened = logged_query(app, args.query)  # the recall log keeps no secret
    warnings += screened
    try:
        if policy.grant is not None and policy.grant.read_only:
            # A read-only token leaves no trace: no access counted, no recall log line.
            rows = await store.read(
                lambda tx: ranked_rows(tx, selection, ranked), name="recall.rows"
            )
        else:
            rows = await store.write(
                lambda tx: record_access(tx, "recall", logged, selection, ranked),
                name="recall",
            )
    except StoreOperationalError as exc:
        # A full or read-only disk: answer from a read connection, uncounted.
        trace.warning(ACTOR, "recall_access_not_recorded", error=str(exc))
        rows = await store.read(lambda tx: ranked_rows(tx, selection, ranked), name="recall.rows")
        warnings.append(f"the access could not be recorded ({exc}); results are unaffected")
    await code_states(ctx, policy, rows, warnings)
    penalized(rows, app.config.retrieval.stale_penalty, selection)
    return RecallResult(
        memories=[
            memory_result(
                _shown(row, policy), ScoredMemory, explain=(reasons or {}).get(row["id"], [])
            )
            for row in rows
        ],
        scopes=selection,
        ranking=ranking,
        tokens=tokens,
        warnings=warnings,
    )


async def stats(ctx: CallContext, args: StatsArgs) -> StatsResult:
    store = store_of(ctx.app)
    policy = await policy_of(ctx)
    if policy.grant is not None and policy.grant.restricted:
        # Only what the grant may read: the counts say nothing of other repositories.
        stored = await store.read(lambda tx: tx.scopes.memory_counts(), name="stats.scopes")
        readable = [name for name in stored if policy.may_read(name)]
        result = await store.read(lambda tx: visible_counts(tx, readable), name="stats.visible")
    else:
        result = await store.read(counts, name="stats.counts")
    return StatsResult(**result, current_scope=policy.current)


async def list_scopes(ctx: CallContext, args: ListScopesArgs) -> ListScopesResult:
    store = store_of(ctx.app)
    stored = await store.read(lambda tx: tx.scopes.memory_counts(), name="list_scopes")
    policy = await policy_of(ctx)
    names = sorted(n for n in set(stored) | {policy.current, GLOBAL} if policy.may_read(n))
    return ListScopesResult(
        current_scope=policy.current,
        scopes=[
            ScopeInfo(
                name=n,
                is_current=n == policy.current,
                writable=n in policy.writable,
                memories=stored.get(n, 0),
            )
            for n in names
        ],
    )


async def inspect(ctx: CallContext, args: InspectArgs) -> InspectResult:
    store = store_of(ctx.app)
    policy = await policy_of(ctx)
    selection = await scoped(policy.select, args.scopes)
    read_only = policy.grant is not None and policy.grant.read_only  # no access recorded

    def look(tx: ReadTx) -> dict[str, Any]:
        memory = get_memory(tx, args.id)
        if memory is None or not visible(memory["scopes"], selection):
            raise not_found(args.id, selection)
        return memory

    def look_and_count(tx: StoreTx) -> dict[str, Any]:
        look(tx)
        record_access(tx, "inspect", f"#{args.id}", selection, [(args.id, 1.0)])
        updated = get_memory(tx, args.id)
        assert updated is not None
        return updated

    found = await (
        store.read(look, name="inspect")
        if read_only
        else store.write(look_and_count, name="inspect")
    )
    warnings: list[str] = []
    await code_states(ctx, policy, [found], warnings)
    return memory_result(_shown(found, policy), InspectResult, warnings=warnings)


async def update(ctx: CallContext, args: UpdateArgs) -> UpdateResult:
    app = ctx.app
    store = store_of(app)
    if (
        args.content is None
        and args.memory_type is None
        and args.importance is None
        and args.code is None
    ):
        raise BadArgument(
            "nothing to update: give at least one of `content`, `memory_type`, `importance`, `code`"
        )
    content = clean_text(args.content, "content") if args.content is not None else None
    memory_type = clean_type(args.memory_type) if args.memory_type is not None else None
    check_finite(args.importance)
    policy = await policy_of(ctx)
    selection = await scoped(policy.write_selection, args.scopes)
    vector: Vec | None = None
    warnings: list[str] = []
    # Refuse before anchoring or embedding; the write re-checks inside its transaction.
    current = await store.read(
        lambda tx: writable_memory(tx, args.id, policy, selection, "update"),
        name="update.check",
    )
    wanted = None if args.code is None else [(c.path, c.symbol) for c in args.code]
    anchors = await update_anchors(ctx, policy, current, content, wanted, warnings)
    if content is not None and embedder_of(app) is not None and current["content"] != content:
        embedded = await embed(app, [memory_document(content)], "memory")
        if embedded is not None:
            vector, warnings = embedded.vectors[0], [*warnings, *embedded.warnings]
    embeddings_on = vector is not None

    def op(tx: StoreTx) -> Written[dict[str, Any]]:
        result, changes = update_memory(
            tx, args.id, policy, selection,
            content=content, memory_type=memory_type, importance=args.importance,
            vector=vector, embeddings_on=embeddings_on,
        )  # fmt: skip
        if anchors is not None:
            before = tx.anchors.of([args.id]).get(args.id, [])
            if [where(a) for a in before] != [where(a) for a in anchors]:
                result["changed"] = [*result.get("changed", []), "code"]
            tx.anchors.set(args.id, anchors)
        return Written(result, changes)

    result: dict[str, Any] = await store.write(op, name="update")
    await code_states(ctx, policy, [result], warnings)
    return memory_result(_shown(result, policy), UpdateResult, warnings=warnings)


async def forget(ctx: CallContext, args: ForgetArgs) -> ForgetResult:
    store = store_of(ctx.app)
    policy = await policy_of(ctx)
    selection = await scoped(policy.write_selection, args.scopes)

    def op(tx: StoreTx) -> Written[dict[str, Any]]:
        result, changes = delete_memory(tx, args.id, policy, selection)
        return Written(result, changes)

    forgotten: dict[str, Any] = await store.write(op, name="forget")
    return msgspec.convert(forgotten, ForgetResult)
