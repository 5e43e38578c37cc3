"""The graph tools' handlers: relate (a directed relation between two entities) and graph (paths around one)."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from ...supervisors.context import CallContext
from ..embedder.embed import embed, embedder_of
from ..store.domain import limits
from ..store.domain.documents import entity_document, relation_document
from ..store.domain.embeddings import ItemKind, Vec, change_of, put_vector
from ..store.domain.entities import (
    RelationSpec,
    find_entity,
    missing_vectors,
    upsert_entity,
    upsert_relation,
    validate_entity,
    validate_relation_type,
)
from ..store.domain.memories import now
from ..store.domain.ownership import Ownership
from ..store.interfaces import StoreTx
from ..store.tooling.services import policy_of, scoped, store_of
from ..store.writer import Written
from .args import GraphArgs, RelateArgs
from .paths import graph_paths
from .results import GraphResult, RelateResult


async def relate(ctx: CallContext, args: RelateArgs) -> RelateResult:
    app = ctx.app
    store = store_of(app)
    policy = await policy_of(ctx)
    scopes = await scoped(policy.write_scopes, args.scopes)
    source = validate_entity(args.source, args.source_kind)
    target = validate_entity(args.target, args.target_kind)
    relation_type = validate_relation_type(args.relation)
    limits.check_metadata(args.metadata, "metadata")
    warnings: list[str] = []
    vectors: dict[int, Vec] = {}  # 0: source, 1: target, 2: relation
    if embedder_of(app) is not None:
        spec = RelationSpec(source, relation_type, target)
        ent_missing, rel_missing = await store.read(
            lambda tx: missing_vectors(tx, [source, target], [spec]), name="store.relate.missing"
        )
        docs = {
            0: entity_document(source.name, source.kind) if source.name in ent_missing else None,
            1: entity_document(target.name, target.kind) if target.name in ent_missing else None,
            2: relation_document(source.name, relation_type, target.name) if rel_missing else None,
        }
        wanted = {k: d for k, d in docs.items() if d is not None}
        embedded = await embed(app, list(wanted.values()), "relation")
        if embedded is not None:
            vectors = dict(zip(wanted, embedded.vectors, strict=True))
            warnings = embedded.warnings

    def op(tx: StoreTx) -> Written[dict[str, Any]]:
        ts = now()
        sids = [tx.scopes.ensure(s) for s in scopes]
        own = Ownership(tx, policy.writable)
        changes = []
        kept: list[str] = []
        # The relation's metadata is what relate is asked to set: a change of a
        # shared relation's is refused (one transaction: nothing stays linked).
        # The kinds are a side note: a shared entity keeps its kind, with a warning.
        src_id, src_new = upsert_entity(tx, source, sids, ts, own, kept)
        tgt_id, tgt_new = upsert_entity(tx, target, sids, ts, own, kept)
        rel_id, rel_new = upsert_relation(
            tx, src_id, relation_type, tgt_id, args.metadata, sids, ts, own, None
        )
        rows: tuple[tuple[ItemKind, int, bool, int], ...] = (
            ("entity", src_id, src_new, 0),
            ("entity", tgt_id, tgt_new, 1),
            ("relation", rel_id, rel_new, 2),
        )
        for kind, item, created, vec in rows:
            if vec in vectors and put_vector(tx, kind, item, vectors[vec], replace=False):
                changes.append(change_of(kind, item, vectors[vec]))
            elif created:
                changes.append(change_of(kind, item, None))
        metadata = tx.graph.relation_metadata(rel_id)
        entity = lambda i, spec: {"id": i, **(find_entity(tx, spec.name) or {})}  # noqa: E731
        return Written(
            {
                "id": rel_id,
                "source": entity(src_id, source),
                "relation": relation_type,
                "target": entity(tgt_id, target),
                "metadata": json.loads(metadata or "{}"),
                "created": rel_new,
                "scopes": scopes,
                "warnings": kept,
            },
            changes,
        )

    result: dict[str, Any] = await store.write(op, name="store.relate")
    result["warnings"] = [*warnings, *result["warnings"]]
    return msgspec.convert(result, RelateResult)


async def graph(ctx: CallContext, args: GraphArgs) -> GraphResult:
    store = store_of(ctx.app)
    selection = await scoped((await policy_of(ctx)).select, args.scopes)
    paths = await store.read(
        lambda tx: graph_paths(
            tx, args.entity, args.direction, args.max_depth, args.limit, selection
        ),
        name="store.graph",
    )
    return msgspec.convert(paths, GraphResult)
