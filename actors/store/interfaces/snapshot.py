"""Bulk reads for the in-memory indexes (the ranker's graph, the vector index): every row of a kind, or those changed.

The interface every store backend implements (`sqlite.snapshot`, `pg.snapshot`): arguments and
results are msgspec Structs or plain values, never rows, cursors or SQL.

Kinds are ``memory``, ``entity`` and ``relation``. An argument ``ids=None`` means every
item of the kind; a list means those ids only (any length: an implementation splits it
as its database needs; ids not in the store are left out of the result). Texts are
``str`` whatever the row holds (SQLite keeps any bytes in a TEXT column: invalid UTF-8
is replaced, never a failed read); other values are handed over as stored (`Stored`:
SQLite keeps any value in any column), and the reader (``ranker.stored``) converts them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal, Protocol

import msgspec

Kind = Literal["memory", "entity", "relation"]
# A value as a row holds it: SQLite keeps any type in any column (a BLOB where a text
# belongs, written by hand or by an older memtrio).
Stored = str | bytes | int | float | None


class MemoryItem(msgspec.Struct, frozen=True):
    """A memory's attributes the ranker keeps (``content`` only when asked for, else None)."""

    id: int
    memory_type: str
    created_at: Stored
    content: str | None = None


class EntityItem(msgspec.Struct, frozen=True):
    id: int
    canonical_name: str


class RelationItem(msgspec.Struct, frozen=True):
    id: int
    source_id: int
    target_id: int


class TextEnds(msgspec.Struct, frozen=True):
    """The shape of a memory's text without the whole of it (`Snapshot.text_ends`)."""

    id: int
    length: int  # characters
    tail: str  # the last 3 characters, trailing white space removed first
    head: str  # the first ``head`` characters


class Snapshot(Protocol):
    """Bulk reads for the in-memory indexes (the ranker's graph, the vector index), in one transaction of the store (`StoreTx.snapshot`)."""

    def change_mark(self) -> int:
        """The store's change counter as this transaction sees it: it moves on every write
        to a table a cache reads, by any process (schema triggers: `store.sqlite.schema`
        ``change_mark``), and never goes down. A cache that read its rows at mark ``m``
        is current while the mark is ``m`` or every write past ``m`` was told to it
        (`store.marks`)."""
        ...

    def keeps_graph(self) -> bool:
        """Whether a reader may hold the whole memory/entity/relation graph in memory (a
        local store, SQLite), or should read the neighbourhood it needs at each use (a
        store shared by many processes and possibly far larger, PostgreSQL: `peers`)."""
        ...

    def scope_ids(self) -> dict[str, int]:
        """Scope name -> its id, every scope."""
        ...

    def item_scopes(self, kind: Kind, ids: list[int] | None = None) -> Iterator[tuple[int, int]]:
        """(item id, scope id) of each scope of the items of ``kind``."""
        ...

    def memories(self, ids: list[int] | None = None, text: bool = False) -> Iterator[MemoryItem]:
        """The memories' attributes (``text``: with their content)."""
        ...

    def memory_texts(self, dated_only: bool = False) -> Iterator[tuple[int, str]]:
        """(id, content) of every memory; ``dated_only``: only those whose text holds four
        ASCII digits in a row (a year: a text without one has no date, `ranker.dates`)."""
        ...

    def entities(self, ids: list[int] | None = None) -> Iterator[EntityItem]: ...

    def relations(
        self, ids: list[int] | None = None, touching: list[int] | None = None
    ) -> Iterator[RelationItem]:
        """Relations by id, or (``touching``) those whose source or target is one of these
        entities; both None: every relation."""
        ...

    def memory_entities(
        self, memories: list[int] | None = None, entities: list[int] | None = None
    ) -> Iterator[tuple[int, int]]:
        """(memory id, entity id) links: of these memories, of these entities, or (both
        given) those between them; both None: every link."""
        ...

    def memory_relations(
        self, memories: list[int] | None = None, relations: list[int] | None = None
    ) -> Iterator[tuple[int, int]]:
        """(memory id, relation id) links, as `memory_entities`."""
        ...

    def peers(self, kind: Kind, ids: list[int], peer: Kind, limit: int) -> list[tuple[int, int]]:
        """(id, peer id): for each item of ``kind`` in ``ids``, its first ``limit`` linked
        items of kind ``peer`` by id (memory-entity, memory-relation, entity-memory,
        entity-relation (as source or target), relation-memory). A hub gives ``limit``."""
        ...

    def vector_count(self, kind: Kind, model: str, revision: str, dim: int) -> int:
        """How many rows `vector_rows` gives."""
        ...

    def vector_rows(
        self, kind: Kind, model: str, revision: str, dim: int
    ) -> Iterator[tuple[int, bytes]]:
        """(item id, float32 bytes) of every stored window of the kind under the model:
        chunk 0 of each item, then the other windows of long texts (counted only under a
        chunk 0 of the same model: a set is whole or absent). Streamed: consume it inside
        the transaction."""
        ...

    def item_windows(
        self, kind: Kind, ids: list[int], model: str, revision: str, dim: int
    ) -> dict[int, list[bytes]]:
        """item id -> its stored windows under the model, chunk 0 first (items without a
        chunk 0 of the model are absent)."""
        ...

    def nearest_memories(
        self, query: list[float], model: str, revision: str, n: int
    ) -> list[tuple[int, float]] | None:
        """The ``n`` memories nearest ``query`` by the store's own vector index (cosine, the
        best window of each), best first; None when the store has no such index for this
        vector (SQLite; PostgreSQL below or above 384 dimensions): the reader's answers."""
        ...

    def text_ends(self, ids: list[int], head: int) -> list[TextEnds]:
        """The length, last characters and first ``head`` characters of these memories."""
        ...
