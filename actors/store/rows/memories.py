"""A memory's rows, the same on both backends (`interfaces.memories`, `interfaces.browse`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from ..interfaces.memories import LinkedEntity, LinkedRelation, MemoryEdit, MemoryRow, StoreCounts
from .sql import Params, Rows

# The columns of a `MemoryRow` (alias ``m``), in its order.
COLUMNS = (
    "m.id, m.content, m.memory_type, m.importance, m.created_at, m.updated_at,"
    " m.last_accessed_at, m.access_count"
)


def memory_row(row: Sequence[Any]) -> MemoryRow:
    """A row of `COLUMNS` as a `MemoryRow`."""
    return MemoryRow(*row)


def linked_entity(row: Sequence[Any]) -> LinkedEntity:
    """(id, name, kind) as a `LinkedEntity`."""
    return LinkedEntity(*row)


def linked_relation(row: Sequence[Any]) -> LinkedRelation:
    """(id, source name, relation type, target name) as a `LinkedRelation`."""
    return LinkedRelation(*row)


# Every row of the store, counted, in `StoreCounts`' order (the same SQL on both backends).
COUNTS = """SELECT (SELECT count(*) FROM memories), (SELECT count(*) FROM scopes),
    (SELECT count(*) FROM entities), (SELECT count(*) FROM relations),
    (SELECT count(*) FROM vectors), (SELECT count(*) FROM recall_log),
    (SELECT count(*) FROM memory_anchors)"""


def seen(table: str, col: str, alias: str, scope_in: str) -> str:
    """SQL true for a row (``alias``) linked through ``table`` (its column ``col``) to a scope
    id that is ``scope_in`` (the dialect's test of a list of ids), or to none."""
    return (
        f"(EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id AND x.scope_id {scope_in})"
        f" OR NOT EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id))"
    )


def visible_counts_sql(scope_in: str) -> str:
    """One statement counting what a reader of the scope ids that are ``scope_in`` sees (the
    columns of `StoreCounts` but ``recall_log``)."""
    rows = {
        "memory": f"SELECT m.id FROM memories m WHERE {seen('memory_scopes', 'memory_id', 'm', scope_in)}",
        "entity": f"SELECT e.id FROM entities e WHERE {seen('entity_scopes', 'entity_id', 'e', scope_in)}",
        "relation": f"SELECT r.id FROM relations r WHERE {seen('relation_scopes', 'relation_id', 'r', scope_in)}",
    }
    vectors = " OR ".join(
        f"(v.kind = '{kind}' AND v.item_id IN ({sql}))" for kind, sql in rows.items()
    )
    return f"""SELECT
    (SELECT count(*) FROM ({rows["memory"]}) q),
    (SELECT count(*) FROM scopes WHERE id {scope_in}),
    (SELECT count(*) FROM ({rows["entity"]}) q),
    (SELECT count(*) FROM ({rows["relation"]}) q),
    (SELECT count(*) FROM vectors v WHERE {vectors}),
    (SELECT count(*) FROM memory_anchors a WHERE a.memory_id IN ({rows["memory"]}))"""


class MemoriesBase(Rows):
    """`interfaces.memories.Memories`' shared bodies; each backend names the statements and
    writes `link_scopes`, `page` and `visible_counts` in its own way."""

    INSERT: ClassVar[str]  # (content, type, importance, created, updated): the id
    LINK_ENTITY: ClassVar[str]  # (memory id, entity id), once
    ENTITY_NAME: ClassVar[str]  # (entity id,)
    LINK_RELATION: ClassVar[str]  # (memory id, relation id), once
    GET: ClassVar[str]  # (memory id,)
    ENTITIES_OF: ClassVar[str]  # (memory id,): (id, name, kind) by name
    RELATIONS_OF: ClassVar[str]  # (memory id,): (id, source, type, target) by id
    UPDATE: ClassVar[str]  # (content, type, importance, ts, memory id)
    DELETE: ClassVar[str]  # (memory id,)

    def link_scopes(self, memory_id: int, scopes: Sequence[int]) -> None:
        raise NotImplementedError

    def scope_in(self, scopes: Sequence[int]) -> tuple[str, Params]:
        """The dialect's test that a scope id is one of ``scopes``, and its parameters."""
        raise NotImplementedError

    def insert(
        self, content: str, memory_type: str, importance: float, ts: float, scopes: Sequence[int]
    ) -> int:
        memory_id = self.insert_id(self.INSERT, (content, memory_type, importance, ts, ts))
        self.link_scopes(memory_id, scopes)
        return memory_id

    def link_entity(self, memory_id: int, entity_id: int) -> str:
        self.run(self.LINK_ENTITY, (memory_id, entity_id))
        return str(self.one(self.ENTITY_NAME, (entity_id,))[0])

    def link_relation(self, memory_id: int, relation_id: int) -> None:
        self.run(self.LINK_RELATION, (memory_id, relation_id))

    def get(self, memory_id: int) -> MemoryRow | None:
        row = self.first(self.GET, (memory_id,))
        return None if row is None else memory_row(row)

    def entities_of(self, memory_id: int) -> list[LinkedEntity]:
        return [linked_entity(r) for r in self.all(self.ENTITIES_OF, (memory_id,))]

    def relations_of(self, memory_id: int) -> list[LinkedRelation]:
        return [linked_relation(r) for r in self.all(self.RELATIONS_OF, (memory_id,))]

    def update(self, memory_id: int, edit: MemoryEdit, ts: float) -> None:
        self.run(self.UPDATE, (edit.content, edit.memory_type, edit.importance, ts, memory_id))

    def delete(self, memory_id: int) -> bool:
        return self.run(self.DELETE, (memory_id,)).rowcount > 0

    def counts(self) -> StoreCounts:
        return StoreCounts(*(int(v) for v in self.one(COUNTS)))

    def visible_counts(self, scopes: Sequence[int]) -> StoreCounts:
        scope_in, params = self.scope_in(scopes)
        row = self.one(visible_counts_sql(scope_in), params)
        memories, scope_count, entities, edges, vectors, anchors = (int(v) for v in row)
        return StoreCounts(
            memories, scope_count, entities, edges, vectors, recall_log=0, anchors=anchors
        )
