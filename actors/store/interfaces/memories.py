"""Memories: insert (with their scopes, entities, relations), read, update, delete, list, count.

The interface every store backend implements (`sqlite.memories`, `pg.memories`): arguments and
results are msgspec Structs or plain values, never rows, cursors or SQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import msgspec


class MemoryRow(msgspec.Struct, frozen=True):
    """One stored memory (without its scopes and links)."""

    id: int
    content: str
    memory_type: str
    importance: float
    created_at: float
    updated_at: float
    last_accessed_at: float | None
    access_count: int

    def as_dict(self) -> dict[str, Any]:
        """The row as the tools' results hold it (field name -> value)."""
        return {f: getattr(self, f) for f in self.__struct_fields__}


class MemoryEdit(msgspec.Struct, frozen=True):
    """The attributes an update sets (None: unchanged)."""

    content: str | None = None
    memory_type: str | None = None
    importance: float | None = None


class LinkedEntity(msgspec.Struct, frozen=True):
    id: int
    name: str
    kind: str


class LinkedRelation(msgspec.Struct, frozen=True):
    id: int
    source: str
    relation: str
    target: str


class StoreCounts(msgspec.Struct, frozen=True):
    """Rows of the store, by what a person calls them (``stats``, ``doctor``): ``edges``
    are relations, ``anchors`` the code anchors of the memories counted."""

    memories: int
    scopes: int
    entities: int
    edges: int
    vectors: int
    recall_log: int
    anchors: int  # code anchors of the memories counted (`interfaces.anchors`)

    def as_dict(self) -> dict[str, int]:
        return {f: getattr(self, f) for f in self.__struct_fields__}


class MemoryReads(Protocol):
    """What a read transaction may ask of `Memories` (`ReadTx.memories`): nothing that writes."""

    def get(self, memory_id: int) -> MemoryRow | None: ...

    def entities_of(self, memory_id: int) -> list[LinkedEntity]:
        """The entities a memory mentions, by name (byte order)."""
        ...

    def relations_of(self, memory_id: int) -> list[LinkedRelation]:
        """The relations a memory states, by relation id."""
        ...

    def page(
        self, scopes: Sequence[int], memory_type: str | None, limit: int, offset: int
    ) -> list[MemoryRow]:
        """The memories visible in the scope ids ``scopes`` (of ``memory_type``, compared
        without case, if given: ASCII letters on SQLite, all letters on PostgreSQL, as the
        other paths that filter by type), newest id first."""
        ...

    def counts(self) -> StoreCounts:
        """Every row of the store, counted."""
        ...

    def visible_counts(self, scopes: Sequence[int]) -> StoreCounts:
        """What a reader of the scope ids ``scopes`` sees, counted: rows linked to one of them
        or to none; the scopes themselves; vectors and code anchors of the rows seen; the
        recall log (every session's queries) is not counted (0)."""
        ...


class Memories(MemoryReads, Protocol):
    """Memories, in one transaction of the store (`StoreTx.memories`).

    Visibility in a selection of scope ids: a memory linked to one of them, or to none
    (an unscoped, legacy memory is seen everywhere).
    """

    def insert(
        self, content: str, memory_type: str, importance: float, ts: float, scopes: Sequence[int]
    ) -> int:
        """A new memory created and updated at ``ts``, linked to the scope ids ``scopes``: its id
        (above every id the store ever gave a memory)."""
        ...

    def link_entity(self, memory_id: int, entity_id: int) -> str:
        """Link the memory to an entity (once; linking again changes nothing): the entity's
        name as stored."""
        ...

    def link_relation(self, memory_id: int, relation_id: int) -> None:
        """Link the memory to a relation (once; linking again changes nothing)."""
        ...

    def update(self, memory_id: int, edit: MemoryEdit, ts: float) -> None:
        """Set the attributes ``edit`` gives and ``updated_at`` to ``ts``."""
        ...

    def delete(self, memory_id: int) -> bool:
        """Delete a memory (its links and vectors go with it); whether it existed."""
        ...
