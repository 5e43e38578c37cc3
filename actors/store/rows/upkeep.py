"""Upkeep's rows, checks and results, the same on both backends (`interfaces.upkeep`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, ClassVar

from ..interfaces.memories import StoreCounts
from ..interfaces.upkeep import (
    EntityRow,
    FlushCounts,
    IdTable,
    MemoryRow,
    RelationRow,
    Scoped,
    ScopeRow,
    VectorRow,
)
from .scopes import SCOPE_LINKS
from .sql import Params, Rows

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


class UpkeepBase(Rows):
    """The whole-store interfaces' shared bodies (`interfaces.upkeep`: counts, flush, export,
    import). Each backend names the statements that differ (class attributes in its
    dialect) and writes its health report and version."""

    MARK: ClassVar[str]  # the dialect's positional placeholder
    SCOPES_OF: ClassVar[str]  # (item,); {table} and {kind}
    TRIPLE: ClassVar[str]  # (relation id,): (source name, type, target name)
    ENTITY_NAME: ClassVar[str]  # (entity id,)
    MEMORY_ENTITIES: ClassVar[str]  # (memory id,): (name,) rows
    MEMORY_RELATIONS: ClassVar[str]  # (memory id,): (relation id,) rows
    LATER_WINDOWS: ClassVar[str]  # (kind, item, model, revision): (vec,) rows by chunk
    SEQ: ClassVar[str]  # (table,): the id high-water mark
    ID_TAKEN: ClassVar[str]  # (id,); {table}
    SCOPE_ID: ClassVar[str]  # (name,)
    ADD_SCOPE: ClassVar[str]  # (name,): the id
    LINK_SCOPE: ClassVar[str]  # (item, scope id), once; {table} and {kind}
    ENTITY_ID: ClassVar[str]  # (name,)
    ADD_ENTITY: ClassVar[str]  # `entity_values`: the id
    RELATION_ID: ClassVar[str]  # (source id, type, target id)
    ADD_RELATION: ClassVar[str]  # (id, source id, target id, type, metadata, created): the id
    MEMORY_PRESENT: ClassVar[str]  # (id, content, created)
    ADD_MEMORY: ClassVar[str]  # `memory_values`: the id
    LINK_ENTITY: ClassVar[str]  # (memory id, entity id), once
    LINK_RELATION: ClassVar[str]  # (memory id, relation id), once
    # What a flush of some scopes deletes: rows linked to no scope but those ({only}: the
    # dialect's `only_writable` condition), and no longer needed by a memory.
    FLUSH = (
        "DELETE FROM memories WHERE id IN (SELECT m.id FROM memories m WHERE {memories})",
        "DELETE FROM relations WHERE id IN (SELECT r.id FROM relations r WHERE {relations}"
        " AND NOT EXISTS (SELECT 1 FROM memory_relations mr WHERE mr.relation_id = r.id))",
        "DELETE FROM entities WHERE id IN (SELECT e.id FROM entities e WHERE {entities}"
        " AND NOT EXISTS (SELECT 1 FROM memory_entities me WHERE me.entity_id = e.id)"
        " AND NOT EXISTS (SELECT 1 FROM relations r WHERE r.source_id = e.id OR r.target_id = e.id))",
    )
    RELATION_ROWS = """SELECT r.id, s.name, r.relation_type, t.name, r.metadata, r.created_at
        FROM relations r JOIN entities s ON s.id = r.source_id
        JOIN entities t ON t.id = r.target_id ORDER BY r.id"""

    def only_writable(self, ids: list[int]) -> tuple[str, Params]:
        """The dialect's condition that no scope but the ids ``ids`` holds ``{alias}``'s row
        through ``{table}`` (its column ``{col}``), and its parameters."""
        raise NotImplementedError

    # -- counts -----------------------------------------------------------------------------

    def _count(self, table: str) -> int:
        return self.number(f"SELECT count(*) FROM {table}")

    def counts(self) -> StoreCounts:
        return store_counts(self._count)

    def _counts(self) -> list[int]:
        return [self._count(table) for table in FLUSHED]

    # -- flush ------------------------------------------------------------------------------

    def flush(self, writable: Sequence[str], everything: bool) -> FlushCounts:
        before = self._counts()
        if everything:
            for table in ("memories", "relations", "entities", "vectors", "recall_log", "scopes"):
                self.run(f"DELETE FROM {table}")
        else:
            only, params = self.only_writable(
                [i for name in writable if (i := self._scope_id(name)) is not None]
            )
            where = {
                "memories": only.format(table="memory_scopes", col="memory_id", alias="m"),
                "relations": only.format(table="relation_scopes", col="relation_id", alias="r"),
                "entities": only.format(table="entity_scopes", col="entity_id", alias="e"),
            }
            for sql in self.FLUSH:
                self.run(sql.format(**where), params)
        return flush_counts(before, self._counts())

    # -- export -----------------------------------------------------------------------------

    def _scopes_of(self, kind: Scoped, item: int) -> list[str]:
        sql = self.SCOPES_OF.format(table=SCOPE_LINKS[kind], kind=kind)
        return sorted(r[0] for r in self.all(sql, (item,)))

    def _triple(self, relation_id: int) -> list[str] | None:
        row = self.first(self.TRIPLE, (relation_id,))
        return list(row) if row else None

    def scopes(self) -> Iterator[ScopeRow]:
        for sid, name in self.streamed("SELECT id, name FROM scopes ORDER BY id"):
            yield ScopeRow(id=sid, name=name)

    def entities(self) -> Iterator[EntityRow]:
        for row in self.streamed(f"SELECT {ENTITY_COLUMNS} FROM entities ORDER BY id"):
            yield entity_row(row, self._scopes_of("entity", row[0]))

    def relations(self) -> Iterator[RelationRow]:
        for row in self.streamed(self.RELATION_ROWS):
            yield relation_row(row, self._scopes_of("relation", row[0]))

    def memories(self) -> Iterator[MemoryRow]:
        for row in self.streamed(f"SELECT {MEMORY_COLUMNS} FROM memories ORDER BY id"):
            mid = row[0]
            entities = self.all(self.MEMORY_ENTITIES, (mid,))
            triples = [self._triple(rid) for (rid,) in self.all(self.MEMORY_RELATIONS, (mid,))]
            yield memory_row(row, self._scopes_of("memory", mid), entities, triples)

    def vectors(self) -> Iterator[VectorRow]:
        for row in self.streamed(f"SELECT {VECTOR_COLUMNS} FROM vectors ORDER BY kind, item_id"):
            kind, item, model, revision = row[:4]
            key: int | str | list[str] | None
            if kind == "memory":
                key = item
            elif kind == "entity":
                found = self.first(self.ENTITY_NAME, (item,))
                key = found[0] if found else None
            else:
                key = self._triple(item)
            if key is None:
                continue  # a vector of a row that no longer exists
            # A long text's windows: chunk 0 is in `vectors`, the others (same model) follow it.
            chunks = self.all(self.LATER_WINDOWS, (kind, item, model, revision))
            yield vector_row(row, key, chunks)

    # -- import -----------------------------------------------------------------------------

    def next_id(self, table: IdTable, at_least: int) -> int:
        name = id_table(table)
        top = self.number(f"SELECT max(id) FROM {name}")
        return max(top, self.number(self.SEQ, (name,)), at_least) + 1

    def id_free(self, table: IdTable, item: int) -> bool:
        return self.first(self.ID_TAKEN.format(table=id_table(table)), (item,)) is None

    def _scope_id(self, name: str) -> int | None:
        row = self.first(self.SCOPE_ID, (name,))
        return int(row[0]) if row else None

    def add_scope(self, name: str) -> int:
        found = self._scope_id(name)
        return found if found is not None else self.insert_id(self.ADD_SCOPE, (name,))

    def link_scopes(self, kind: Scoped, item: int, names: Sequence[str]) -> None:
        sql = self.LINK_SCOPE.format(table=SCOPE_LINKS[kind], kind=kind)
        for name in names:
            self.run(sql, (item, self.add_scope(name)))

    def entity_id(self, name: str) -> int | None:
        row = self.first(self.ENTITY_ID, (name,))
        return int(row[0]) if row else None

    def add_entity(self, row: EntityRow) -> int:
        return self.insert_id(self.ADD_ENTITY, entity_values(row))

    def relation_id(self, source_id: int, relation_type: str, target_id: int) -> int | None:
        row = self.first(self.RELATION_ID, (source_id, relation_type, target_id))
        return int(row[0]) if row else None

    def add_relation(self, row: RelationRow, source_id: int, target_id: int) -> int:
        values = (row.id, source_id, target_id, row.relation_type, row.metadata, row.created_at)
        return self.insert_id(self.ADD_RELATION, values)

    def memory_present(self, memory_id: int, content: str, created_at: float) -> bool:
        return self.first(self.MEMORY_PRESENT, (memory_id, content, created_at)) is not None

    def add_memory(self, row: MemoryRow) -> int:
        return self.insert_id(self.ADD_MEMORY, memory_values(row))

    def link_memory(
        self, memory_id: int, entity_ids: Sequence[int], relation_ids: Sequence[int]
    ) -> None:
        for eid in entity_ids:
            self.run(self.LINK_ENTITY, (memory_id, eid))
        for rid in relation_ids:
            self.run(self.LINK_RELATION, (memory_id, rid))
