"""Upkeep's rows, checks and results, the same on both backends (`interfaces.upkeep`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..interfaces.memories import StoreCounts
from ..interfaces.upkeep import (
    EntityRow,
    FlushCounts,
    MemoryRow,
    RelationRow,
    VectorRow,
)

_ID_TABLES = frozenset({"entities", "relations", "memories"})
# What a flush deletes, counted before and after it.
FLUSHED = ("memories", "entities", "relations")
# The export's columns of each kind of row, in the order of its builder below.
ENTITY_COLUMNS = "id, name, canonical_name, kind, created_at, updated_at"
MEMORY_COLUMNS = (
    "id, content, memory_type, importance, created_at, updated_at, last_accessed_at, access_count"
)
VECTOR_COLUMNS = "kind, item_id, model, revision, dim, vec"


def id_table(table: str) -> str:
    """``table`` if it is a table of ids (`IdTable`); else ValueError."""
    if table not in _ID_TABLES:
        raise ValueError(f"not a table of ids: {table!r}")
    return table


def store_counts(count: Callable[[str], int]) -> StoreCounts:
    """The rows of the store, ``count`` giving the rows of a table."""
    return StoreCounts(
        memories=count("memories"),
        scopes=count("scopes"),
        entities=count("entities"),
        edges=count("relations"),
        vectors=count("vectors"),
        recall_log=count("recall_log"),
        anchors=count("memory_anchors"),
    )


def flush_counts(before: Sequence[int], after: Sequence[int]) -> FlushCounts:
    """What a flush deleted: the rows of `FLUSHED` before it and after it."""
    memories, entities, relations = (int(b) - int(a) for b, a in zip(before, after, strict=True))
    return FlushCounts(
        deleted_memories=memories, deleted_entities=entities, deleted_relations=relations
    )


def entity_row(row: Sequence[Any], scopes: list[str]) -> EntityRow:
    """A row of `ENTITY_COLUMNS` and its scopes' names as an `EntityRow`."""
    eid, name, cname, kind, created, updated = row
    return EntityRow(
        id=eid, name=name, canonical_name=cname, kind=kind, created_at=created,
        updated_at=updated, scopes=scopes,
    )  # fmt: skip


def relation_row(row: Sequence[Any], scopes: list[str]) -> RelationRow:
    """(id, source name, type, target name, metadata, created_at) and its scopes' names as
    a `RelationRow`."""
    rid, src, rtype, tgt, meta, created = row
    return RelationRow(
        id=rid, source=src, relation_type=rtype, target=tgt, metadata=meta,
        created_at=created, scopes=scopes,
    )  # fmt: skip


def memory_row(
    row: Sequence[Any],
    scopes: list[str],
    entities: Iterable[Sequence[Any]],
    relations: Iterable[list[str] | None],
) -> MemoryRow:
    """A row of `MEMORY_COLUMNS` with its scopes' names, its entities' (name,) rows and
    the triples of its relations (None: gone) as a `MemoryRow`."""
    return MemoryRow(
        id=row[0], content=row[1], memory_type=row[2], importance=row[3],
        created_at=row[4], updated_at=row[5], last_accessed_at=row[6],
        access_count=row[7], scopes=scopes,
        entities=sorted(r[0] for r in entities),
        relations=sorted(t for t in relations if t is not None),
    )  # fmt: skip


def vector_row(
    row: Sequence[Any], key: int | str | list[str], chunks: Iterable[Sequence[Any]]
) -> VectorRow:
    """A row of `VECTOR_COLUMNS`, its item's key and its other windows' (vec,) rows (by
    chunk) as a `VectorRow`: the windows' bytes one after the other."""
    kind, _, model, revision, dim, vec = row
    return VectorRow(
        kind=kind, key=key, model=model, revision=revision, dim=dim,
        vec=bytes(vec) + b"".join(bytes(r[0]) for r in chunks),
    )  # fmt: skip


def memory_values(row: MemoryRow) -> tuple[Any, ...]:
    """The values of `MEMORY_COLUMNS` for an insert of ``row``."""
    return (
        row.id, row.content, row.memory_type, row.importance, row.created_at,
        row.updated_at, row.last_accessed_at, row.access_count,
    )  # fmt: skip


def entity_values(row: EntityRow) -> tuple[Any, ...]:
    """The values of `ENTITY_COLUMNS` for an insert of ``row``."""
    return (row.id, row.name, row.canonical_name, row.kind, row.created_at, row.updated_at)
