"""The graph's write tool handlers (group ``graph-write``): each call is one write transaction.

Arguments are checked (`args`) before anything is embedded or written. A row
shared with a repository this server may not write keeps its attributes
(``store.domain.ownership``): a change is refused, a link reports the kept value in
``warnings``, a key that is present only when there is a warning.
"""

from __future__ import annotations

from collections.abc import Sequence

from msgspec import UNSET

from ...supervisors.context import CallContext
from ..anchors.anchoring import text_anchors
from ..anchors.args import CodeArg
from ..store.tooling.services import policy_of
from . import results as X
from . import writes
from .args import (
    AddObservationsArgs,
    CreateEntitiesArgs,
    DeleteEntitiesArgs,
    DeleteObservationsArgs,
    EntityArg,
    MergeEntitiesArgs,
    NoArgs,
    RelationsArgs,
    UpsertEntitiesArgs,
    UpsertEntityArg,
    check_entities,
    check_merge,
    check_names,
    check_observations,
    check_relations,
)
from .merge import merge_entities as merge
from .records import JsonObject
from .transactions import embed_for, with_warnings, write
from .writes import EntityIn


async def _put_entities(
    ctx: CallContext, entities: Sequence[EntityArg | UpsertEntityArg], upsert: bool
) -> JsonObject:
    """The write of create_entities and upsert_entities: their record, before its struct."""
    check_entities(entities)
    items = [EntityIn(e.name, e.entityType, list(e.observations)) for e in entities]
    vectors = await embed_for(
        ctx.app,
        [o for e in items for o in e.observations],
        [(e.name, e.entityType or "entity") for e in items],
    )
    found: list[str] = []
    anchors = await text_anchors(
        ctx,
        await policy_of(ctx),
        [(e.observations, _wanted(e.code)) for e in entities],
        found,
    )
    name = "upsert_entities" if upsert else "create_entities"
    result, warnings = await write(
        ctx, name, lambda w: writes.create_entities(w, items, upsert=upsert), vectors, anchors
    )
    return with_warnings({"entities": result}, [*found, *warnings])


def _wanted(code: Sequence[CodeArg] | None) -> list[tuple[str, str]] | None:
    return None if code is None else [(c.path, c.symbol) for c in code]


async def create_entities(ctx: CallContext, args: CreateEntitiesArgs) -> X.CreatedEntities:
    return X.to_result(await _put_entities(ctx, args.entities, upsert=False), X.CreatedEntities)


async def upsert_entities(ctx: CallContext, args: UpsertEntitiesArgs) -> X.UpsertedEntities:
    return X.to_result(await _put_entities(ctx, args.entities, upsert=True), X.UpsertedEntities)


async def create_relations(ctx: CallContext, args: RelationsArgs) -> X.CreatedRelations:
    check_relations(args.relations)
    items = [(r.from_, r.relationType, r.to) for r in args.relations]
    created, warnings = await write(
        ctx, "create_relations", lambda w: writes.create_relations(w, items)
    )
    return X.to_result(with_warnings({"relations": created}, warnings), X.CreatedRelations)


async def add_observations(ctx: CallContext, args: AddObservationsArgs) -> X.ObservationsAdded:
    check_observations(args.observations)
    items = [(o.entityName, list(o.contents)) for o in args.observations]
    found: list[str] = []
    anchors = await text_anchors(
        ctx, await policy_of(ctx), [(o.contents, _wanted(o.code)) for o in args.observations], found
    )
    vectors = await embed_for(ctx.app, [c for _, cs in items for c in cs], [])
    results, warnings = await write(
        ctx, "add_observations", lambda w: writes.add_observations(w, items), vectors, anchors
    )
    return X.to_result(
        with_warnings({"results": results}, [*found, *warnings]), X.ObservationsAdded
    )


def _done(message: str, count: int, warnings: list[str]) -> X.Deleted:
    return X.Deleted(success=True, message=message, deleted=count, warnings=warnings or UNSET)


async def delete_entities(ctx: CallContext, args: DeleteEntitiesArgs) -> X.Deleted:
    check_names(args.entityNames, "entityNames")
    n, warnings = await write(
        ctx, "delete_entities", lambda w: writes.delete_entities(w, args.entityNames)
    )
    return _done("Entities deleted successfully", n, warnings)


async def delete_observations(ctx: CallContext, args: DeleteObservationsArgs) -> X.Deleted:
    items = [(d.entityName, list(d.observations)) for d in args.deletions]
    n, warnings = await write(
        ctx, "delete_observations", lambda w: writes.delete_observations(w, items)
    )
    return _done("Observations deleted successfully", n, warnings)


async def delete_relations(ctx: CallContext, args: RelationsArgs) -> X.Deleted:
    check_relations(args.relations)
    items = [(r.from_, r.relationType, r.to) for r in args.relations]
    n, warnings = await write(ctx, "delete_relations", lambda w: writes.delete_relations(w, items))
    return _done("Relations deleted successfully", n, warnings)


async def merge_entities(ctx: CallContext, args: MergeEntitiesArgs) -> X.Merged:
    check_merge(args)
    result, warnings = await write(
        ctx, "merge_entities", lambda w: merge(w, args.sources, args.target, args.entityType)
    )
    return X.to_result(with_warnings(result, warnings), X.Merged)


async def compact(ctx: CallContext, args: NoArgs) -> X.Compacted:
    result, warnings = await write(ctx, "compact", writes.compact)
    return X.to_result(with_warnings(result, warnings), X.Compacted)
