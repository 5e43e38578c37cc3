"""The vector tools that change embeddings: upsert one, upsert a batch, delete one.

Each is one write transaction on the StoreWriter (the rows land in
``entity_embeddings`` or not at all); after the commit the index re-reads
the ids written (`VectorService.refresh`), so the answer a client gets
means both the table and the index hold the vector.

An embedding belongs to its entity: the entity must be visible to the
session, and shared with no scope the server may not write (``store.domain.ownership``:
another repository's entity keeps its attributes, its vector included).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...protocol.errors import BadArgument, NotFound
from ...protocol.plural import plural
from ...supervisors.context import CallContext
from ..kg.lookup import Ent, resolve
from ..kg.transactions import view_of
from ..kg.view import Scoped, View
from ..store.domain.ownership import Ownership, SharedRow
from ..store.interfaces import StoreTx
from ..store.tooling.services import policy_of
from ..vector_index.arrays import ValueRule
from . import args as A
from . import results as X
from . import table
from .service import VECTORS, VectorService


def check_vector(
    values: Sequence[float], dims: int, field: str = "embedding", rule: ValueRule | None = None
) -> bytes:
    """``values`` as float32 little-endian bytes, checked against the store's dimension and,
    after conversion to the stored types, against ``rule`` (the service's `ValueRule`).

    Called before any transaction: a vector refused here is never written.
    Error handling: `BadArgument` naming the expected and given dimensions, or
    the first value that is not finite once stored (``1e39`` is a float64 but
    no float32), or a vector too long to score.
    """
    if len(values) != dims:
        raise BadArgument(
            f"`{field}` has {plural(len(values), 'dimension')}, but this store's embeddings have {dims} "
            "([vectors] dims, --embedding-dims)"
        )
    problem = (rule or ValueRule()).problem(values, field)
    if problem is not None:
        raise BadArgument(problem)
    return np.asarray(values, dtype="<f4").tobytes()


async def service_view(ctx: CallContext) -> tuple[VectorService, View]:
    """The vector service and the calling session's scopes."""
    service = ctx.app.service(VECTORS)
    return service, view_of(await policy_of(ctx))


def writable_entity(tx: StoreTx, view: View, name: str, action: str) -> Ent:
    """The entity ``name`` if the view sees it and may change it.

    Error handling: `NotFound` for an unknown (or invisible) entity,
    `SharedRow` for one shared with a scope this server may not write.
    """
    ent = resolve(tx, Scoped(tx, view), [name]).get(name)
    if ent is None:
        raise NotFound(f"entity {name!r} not found; create it first (create_entities)")
    Ownership(tx, view.writable).require("entity", ent.id, f"entity {ent.name!r}", action)
    return ent


async def upsert_embedding(ctx: CallContext, args: A.UpsertArgs) -> X.Upserted:
    service, view = await service_view(ctx)
    blob = check_vector(args.embedding, service.dims, rule=service.rule)
    model = args.model or ""

    def op(tx: StoreTx) -> tuple[Ent, bool]:
        ent = writable_entity(tx, view, args.entityName, "set its embedding")
        return ent, table.put(tx, ent.id, blob, service.dims, model)

    ent, created = await service.store.write(op, name="vectors.upsert_embedding")
    await service.refresh([ent.id])
    return X.Upserted(entityName=ent.name, dims=service.dims, model=model, created=created)


async def batch_upsert(ctx: CallContext, args: A.BatchUpsertArgs) -> X.BatchUpserted:
    """Store every valid item in one transaction; each refused item gets its error, the rest stay."""
    service, view = await service_view(ctx)
    errors: list[X.BatchError] = []
    blobs: dict[int, bytes] = {}
    for i, item in enumerate(args.items):
        try:
            blobs[i] = check_vector(
                item.embedding, service.dims, f"items[{i}].embedding", service.rule
            )
        except BadArgument as exc:
            errors.append(X.BatchError(index=i, entityName=item.entityName, error=str(exc)))

    def op(tx: StoreTx) -> tuple[list[int], list[X.BatchError]]:
        written: list[int] = []
        refused: list[X.BatchError] = []
        for i, blob in blobs.items():
            item = args.items[i]
            try:
                ent = writable_entity(tx, view, item.entityName, "set its embedding")
            except (NotFound, SharedRow) as exc:
                refused.append(X.BatchError(index=i, entityName=item.entityName, error=str(exc)))
                continue
            table.put(tx, ent.id, blob, service.dims, item.model or "")
            written.append(ent.id)
        return written, refused

    written, refused = await service.store.write(op, name="vectors.batch_upsert")
    await service.refresh(written)
    errors = sorted([*errors, *refused], key=lambda e: e.index)
    return X.BatchUpserted(
        upserted=len(args.items) - len(errors), failed=len(errors), errors=errors
    )


async def delete_embedding(ctx: CallContext, args: A.EntityArgs) -> X.Deleted:
    """Remove an entity's embedding; the entity, its observations and relations stay."""
    service, view = await service_view(ctx)

    def op(tx: StoreTx) -> tuple[Ent, bool]:
        ent = writable_entity(tx, view, args.entityName, "delete its embedding")
        return ent, table.delete(tx, ent.id)

    ent, deleted = await service.store.write(op, name="vectors.delete_embedding")
    await service.refresh([ent.id])
    return X.Deleted(entityName=ent.name, deleted=deleted)
