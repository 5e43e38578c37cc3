"""Maintenance and whole-store work: statistics, integrity checks, export and import in bulk, flush.

The interface every store backend implements (`sqlite.upkeep`, `pg.upkeep`): arguments and
results are msgspec Structs or plain values, never rows, cursors or SQL.

SQLite's upkeep (WAL checkpoints, FTS5 merges, the incremental vacuum) has no work to do on
PostgreSQL, whose autovacuum keeps its tables: there those methods report nothing done.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Literal, Protocol

import msgspec

from .memories import StoreCounts

# The tables whose rows an import may give ids of its own.
IdTable = Literal["entities", "relations", "memories"]
# What a scope is linked to (`Upkeep.link_scopes`).
Scoped = Literal["entity", "relation", "memory"]


class Checkpoint(msgspec.Struct, frozen=True, kw_only=True):
    """A PASSIVE WAL checkpoint: ``busy`` when a reader or writer kept it from finishing;
    frames in the WAL and frames copied into the database."""

    busy: bool
    wal_frames: int
    checkpointed: int


class FlushCounts(msgspec.Struct, frozen=True, kw_only=True):
    """The rows a flush deleted."""

    deleted_memories: int
    deleted_entities: int
    deleted_relations: int


class ScopeRow(msgspec.Struct, frozen=True, kw_only=True):
    id: int
    name: str


class EntityRow(msgspec.Struct, frozen=True, kw_only=True):
    """An entity as exported and imported (``scopes``: its scope names, sorted)."""

    id: int
    name: str
    canonical_name: str
    kind: str
    created_at: float
    updated_at: float
    scopes: list[str] = []


class RelationRow(msgspec.Struct, frozen=True, kw_only=True):
    """A relation by its ends' names (``source_id``/``target_id``: the store's ids, on import)."""

    id: int
    source: str
    relation_type: str
    target: str
    metadata: str  # JSON text
    created_at: float
    scopes: list[str] = []


class MemoryRow(msgspec.Struct, frozen=True, kw_only=True):
    """A memory with its scopes, the names of its entities and its relations' triples
    (each list sorted), as exported."""

    id: int
    content: str
    memory_type: str
    importance: float
    created_at: float
    updated_at: float
    last_accessed_at: float | None
    access_count: int
    scopes: list[str] = []
    entities: list[str] = []
    relations: list[list[str]] = []


class VectorRow(msgspec.Struct, frozen=True, kw_only=True):
    """An item's vector of one model: every window's float32 values, in order.
    ``key``: a memory's id, an entity's name, a relation's [source, type, target]."""

    kind: str
    key: int | str | list[str]
    model: str
    revision: str
    dim: int
    vec: bytes


class Upkeep(Protocol):
    """The whole store's counts and data version, in one transaction of the store
    (`ReadTx.upkeep`)."""

    def counts(self) -> StoreCounts:
        """How many rows of each kind the store holds."""
        ...

    def data_version(self) -> int:
        """A number that moves when anyone commits (outside a transaction)."""
        ...


class Health(Protocol):
    """The database's health as ``memtrio doctor`` reports it, in one write transaction of
    the store (`StoreTx.health`)."""

    def report(self) -> dict[str, str | int]:
        """What ``memtrio doctor`` reports of the database, in the order it shows it: at
        least ``schema_version``, ``latest_schema_version``, ``integrity`` and
        ``fts_integrity`` (``ok`` when sound), and the backend's own facts (journal mode,
        free pages; server version, extensions; size in bytes). Needs a write transaction
        (SQLite's FTS5 integrity check is written as an insert)."""
        ...


class FileUpkeep(Protocol):
    """The upkeep steps of a store that is a file memtrio keeps itself (SQLite: WAL checkpoints,
    incremental vacuum, full-text index merges), in one transaction of the store
    (`StoreTx.file_upkeep`): only a backend with `Capability.FILE_UPKEEP` offers them."""

    def auto_vacuum(self) -> str:
        """``none``, ``full`` or ``incremental`` (SQLite's mode; PostgreSQL: ``none``)."""
        ...

    def free_pages(self) -> int:
        """Free pages in the database file (PostgreSQL: 0)."""
        ...

    def vacuum_step(self, pages: int) -> tuple[int, int]:
        """Give up to ``pages`` free pages back to the file system: (freed, left)."""
        ...

    def fts_tables(self) -> list[str]:
        """The full-text indexes that `fts_merge_step` merges (PostgreSQL: none)."""
        ...

    def fts_merge_step(self, table: str, pages: int) -> bool:
        """One bounded merge of the full-text index ``table`` (one of `fts_tables`) towards
        a single segment; True when it is merged."""
        ...

    def checkpoint(self) -> Checkpoint:
        """A PASSIVE WAL checkpoint, outside any transaction (PostgreSQL: nothing to do)."""
        ...


class Export(Protocol):
    """The whole store's records streamed for an export, in one read transaction of the store
    (`ReadTx.export`)."""

    def record_version(self) -> int:
        """The SQLite schema version whose records the store holds (an export's header)."""
        ...

    def scopes(self) -> Iterator[ScopeRow]:
        """Every scope, by id (streamed, as the export methods below)."""
        ...

    def entities(self) -> Iterator[EntityRow]:
        """Every entity with its scopes, by id."""
        ...

    def relations(self) -> Iterator[RelationRow]:
        """Every relation with its scopes, by id."""
        ...

    def memories(self) -> Iterator[MemoryRow]:
        """Every memory with its scopes, entities and relations, by id."""
        ...

    def vectors(self) -> Iterator[VectorRow]:
        """Every stored vector of an item that exists, by kind and item id."""
        ...


class Import(Protocol):
    """The whole store's writes: importing exported records, and the flush, in one write
    transaction of the store (`StoreTx.imports`)."""

    def flush(self, writable: Sequence[str], everything: bool) -> FlushCounts:
        """Delete every row (``everything``), or the memories whose scopes are all in
        ``writable`` and the relations and entities of only those scopes that nothing
        refers to any more."""
        ...

    def next_id(self, table: IdTable, at_least: int) -> int:
        """An id above every id ``table`` holds or gave (AUTOINCREMENT's high mark) and
        above ``at_least``."""
        ...

    def id_free(self, table: IdTable, item: int) -> bool:
        """No row of ``table`` has the id ``item``."""
        ...

    def add_scope(self, name: str) -> int:
        """The id of the scope ``name`` (exactly), created when missing."""
        ...

    def link_scopes(self, kind: Scoped, item: int, names: Sequence[str]) -> None:
        """Add the scopes ``names`` (created when missing) to the ``kind`` ``item``."""
        ...

    def entity_id(self, name: str) -> int | None:
        """The id of the entity named exactly ``name``."""
        ...

    def add_entity(self, row: EntityRow) -> int:
        """Insert the entity ``row`` with its id (not its scopes); its id."""
        ...

    def relation_id(self, source_id: int, relation_type: str, target_id: int) -> int | None:
        """The id of the relation (source, type, target)."""
        ...

    def add_relation(self, row: RelationRow, source_id: int, target_id: int) -> int:
        """Insert the relation ``row`` with its id between those entities; its id."""
        ...

    def memory_present(self, memory_id: int, content: str, created_at: float) -> bool:
        """A memory of that id, content and creation time exists."""
        ...

    def add_memory(self, row: MemoryRow) -> int:
        """Insert the memory ``row`` with its id (not its links); its id."""
        ...

    def link_memory(
        self, memory_id: int, entity_ids: Sequence[int], relation_ids: Sequence[int]
    ) -> None:
        """Link a memory to those entities and relations (links already there are kept)."""
        ...
