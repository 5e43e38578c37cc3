"""Stored embeddings: the vectors of memories, entities and relations, window by window.

The interface every store backend implements (`sqlite.vectors`, `pg.vectors`): arguments and
results are msgspec Structs or plain values, never rows, cursors or SQL.

Three tables are behind it:

- ``vectors`` / ``vector_chunks``: the local model's windows of a memory, an entity or a
  relation (``kind``), chunk 0 in ``vectors`` and the others in ``vector_chunks``; a set is
  whole or absent (writing or deleting chunk 0 deletes the item's other windows);
- ``entity_embeddings``: the clients' own entity vectors (the vector tools), one an entity;
- the texts those vectors are made of (the documents of ``memtrio reembed`` and the
  ranker's lazy embedding) and the scope-filtered entity reads of the vector tools.

A stored row may be unusable (written by hand, by an older memtrio): `EntityEmbedding.vec`,
`StoredWindow.dim` and ``vec`` are given back as stored, and the feature code checks them.

Visibility (`Visibility`): the ids of the scopes a call reads, or ``None`` when it sees every
row of the store; a row linked to no scope at all is visible everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import msgspec


class Windows(msgspec.Struct, frozen=True):
    """The windows of one item to store: ``dim`` float32 values each (little-endian bytes),
    in order, made by ``model`` at ``revision``."""

    model: str
    revision: str
    dim: int
    chunks: list[bytes]


class EntityEmbedding(msgspec.Struct, frozen=True):
    """One row of ``entity_embeddings`` (a client's vector of an entity), as stored."""

    entity_id: int
    model: str
    dim: int
    vec: bytes


class StoredWindow(msgspec.Struct, frozen=True):
    """One stored window of the local model (``chunk`` 0: the ``vectors`` row), as stored."""

    kind: str
    item_id: int
    chunk: int
    dim: object
    vec: object


class EntityRef(msgspec.Struct, frozen=True):
    """An entity as the vector tools name it."""

    id: int
    name: str
    kind: str
    canonical: str


class MemoryText(msgspec.Struct, frozen=True):
    id: int
    content: str


class EntityText(msgspec.Struct, frozen=True):
    id: int
    name: str
    kind: str


class RelationText(msgspec.Struct, frozen=True):
    id: int
    source: str
    relation_type: str
    target: str


Visibility = list[int] | None


class VectorReads(Protocol):
    """What a read transaction may ask of `Vectors` (`ReadTx.vectors`): nothing that writes."""

    def windows_of(
        self, kind: str, ids: Sequence[int], model: str, revision: str, dim: int
    ) -> dict[int, list[bytes]]:
        """The stored windows of ``ids`` (any number) under ``model``/``revision``/``dim``,
        chunk 0 first; items without chunk 0 of that model are absent."""
        ...

    def lacking(self, kind: str, model: str, revision: str, after: int, limit: int) -> list[int]:
        """Ids of ``kind`` greater than ``after``, ascending, at most ``limit``, that have no
        window of ``model``/``revision``."""
        ...

    def count_lacking(self, kind: str, model: str, revision: str) -> int:
        """How many items of ``kind`` have no window of ``model``/``revision``."""
        ...

    def existing(self, kind: str, ids: Sequence[int]) -> set[int]:
        """Those of ``ids`` whose memory, entity or relation (``kind``) still exists."""
        ...

    def memory_texts(self, ids: Sequence[int]) -> list[MemoryText]:
        """The contents of the memories ``ids`` that exist, by id."""
        ...

    def entity_texts(self, ids: Sequence[int]) -> list[EntityText]:
        """Name and type of the entities ``ids`` that exist, by id."""
        ...

    def relation_texts(self, ids: Sequence[int]) -> list[RelationText]:
        """Source name, type and target name of the relations ``ids`` that exist, by id."""
        ...

    def windows_after(self, after: tuple[str, int] | None, limit: int) -> list[StoredWindow]:
        """The next ``limit`` rows of ``vectors`` (chunk 0) after the key (kind, item id),
        in key order: a whole-table scan, a batch at a time (doctor)."""
        ...

    def chunks_after(self, after: tuple[str, int, int] | None, limit: int) -> list[StoredWindow]:
        """`windows_after` for ``vector_chunks`` (key: kind, item id, chunk)."""
        ...


class Vectors(VectorReads, Protocol):
    """The local model's stored windows, in one transaction of the store (`ReadTx.vectors`)."""

    def put(self, kind: str, item_id: int, windows: Windows, *, replace: bool) -> bool:
        """Store an item's windows (replacing its old set). With ``replace=False`` an existing
        set of the same model and revision is kept: False then, else True."""
        ...

    def drop(self, kind: str, item_id: int) -> None:
        """Delete an item's windows (none: nothing happens)."""
        ...


class EmbeddingReads(Protocol):
    """What a read transaction may ask of `Embeddings` (`ReadTx.embeddings`): nothing that writes."""

    def embeddings_of(self, ids: Sequence[int]) -> dict[int, EntityEmbedding]:
        """The stored embeddings of ``ids`` (any number; those that have one)."""
        ...

    def embeddings_after(self, after: int, dim: int | None, limit: int) -> list[EntityEmbedding]:
        """The next ``limit`` embeddings by entity id after ``after`` (of dimension ``dim``;
        None: of any): a whole-table scan, a batch at a time."""
        ...

    def embedding_counts(self, dim: int) -> tuple[int, int]:
        """(embeddings of dimension ``dim``, embeddings of any other dimension)."""
        ...

    def visible_entities(
        self, ids: Sequence[int], scopes: Visibility, entity_type: str | None
    ) -> dict[int, EntityRef]:
        """The entities of ``ids`` (any number) visible in ``scopes`` (of exactly
        ``entity_type`` when given), by id."""
        ...

    def embedded_entities(self, dim: int, scopes: Visibility, entity_type: str | None) -> set[int]:
        """Ids of the visible entities (of ``entity_type``) with an embedding of ``dim``."""
        ...

    def count_embedded(self, dim: int, scopes: Visibility) -> int:
        """How many visible entities have an embedding of ``dim``."""
        ...

    def relation_ends(self, scopes: Visibility) -> list[tuple[int, int]]:
        """(source id, target id) of every visible relation."""
        ...


class Embeddings(EmbeddingReads, Protocol):
    """The clients' entity embeddings, and the entities the vector tools read as a scope
    selection sees them, in one transaction of the store (`ReadTx.embeddings`)."""

    def put_embedding(
        self, entity_id: int, model: str, dim: int, vec: bytes, updated_at: float
    ) -> bool:
        """Store (or replace) an entity's embedding; True when it had none before."""
        ...

    def delete_embedding(self, entity_id: int) -> bool:
        """Delete an entity's embedding; True when it had one."""
        ...
