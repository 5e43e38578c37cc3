"""The knowledge graph: entities, the directed relations between them, their observations.

The interface every store backend implements (`sqlite.graph`, `pg.graph`): arguments and
results are msgspec Structs or plain values, never rows, cursors or SQL.

An entity is identified by its name exactly (``Alice`` and ``alice`` are two entities);
``canonical`` (`documents.canonical_name`) is the key of the forgiving lookups. An
observation is a memory of type ``observation`` linked to its entity. What a call sees is
a `View` (the scope ids it reads): a row linked to a read scope, or to none, is visible.
Methods taking a list of ids or names accept any number of them (the backend splits
long lists itself).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

import msgspec

Direction = Literal["outgoing", "incoming", "both"]
RowKind = Literal["entity", "relation"]


class View(msgspec.Struct, frozen=True):
    """The scopes one call reads (``read_ids``) and writes (``write_ids``), by id;
    ``sees_all``: every scope of the store is read, so every row is visible."""

    read_ids: tuple[int, ...]
    write_ids: tuple[int, ...]
    sees_all: bool


class Entity(msgspec.Struct, frozen=True):
    id: int
    name: str
    kind: str
    canonical: str
    visible: bool = True


class Observation(msgspec.Struct, frozen=True):
    entity_id: int
    memory_id: int
    content: str


class Edge(msgspec.Struct, frozen=True):
    """A relation by ids."""

    id: int
    source_id: int
    relation_type: str
    target_id: int


class Link(msgspec.Struct, frozen=True):
    """A relation by its endpoints' names (what an answer shows)."""

    id: int
    source: str
    relation_type: str
    target: str


class NamedRelation(msgspec.Struct, frozen=True):
    """A relation with its endpoints' names (and kinds)."""

    id: int
    source_id: int
    source: str
    source_kind: str
    relation_type: str
    target_id: int
    target: str
    target_kind: str


class Found(msgspec.Struct, frozen=True):
    """A relation found by (source, type, target): its id and whether the view sees it."""

    id: int
    visible: bool


class Counts(msgspec.Struct, frozen=True):
    entities: int
    relations: int
    observations: int
    entity_types: int
    relation_types: int


class NewEntity(msgspec.Struct, frozen=True):
    id: int
    name: str
    canonical: str
    kind: str


class NewObservation(msgspec.Struct, frozen=True):
    id: int
    content: str
    entity_id: int


class Graph(Protocol):
    """The knowledge graph's lookups and reads of a tool call, in one transaction of the
    store (`ReadTx.graph`): views, entities by name or id, observations, pages, counts."""

    def view(self, read: Sequence[str], write: Sequence[str]) -> View:
        """The `View` of scopes named ``read`` and ``write`` (scopes that do not exist are left out)."""
        ...

    def entity_named(self, name: str) -> Entity | None:
        """The entity named exactly ``name``, whatever its scopes."""
        ...

    def entities_canonical(self, canonical: str, limit: int) -> list[Entity]:
        """Up to ``limit`` entities whose canonical name is ``canonical``, by id, whatever their scopes."""
        ...

    def entities_by_names(self, names: Sequence[str], view: View) -> list[Entity]:
        """The entities named exactly so (``visible`` per ``view``), any order."""
        ...

    def entities_by_ids(self, ids: Sequence[int]) -> list[Entity]:
        """The entities of ``ids`` that exist, any order."""
        ...

    def names_near(self, canonicals: Sequence[str], view: View, limit: int) -> list[str]:
        """Up to ``limit`` names of visible entities with one of ``canonicals``, by id."""
        ...

    def observations(self, entity_ids: Sequence[int], view: View) -> list[Observation]:
        """The visible observations of the entities, by entity id then memory id."""
        ...

    def observation_texts(self, entity_ids: Sequence[int], view: View) -> list[tuple[int, str]]:
        """(entity id, text) of the visible observations, as `observations` orders them."""
        ...

    def observation_counts(self, entity_ids: Sequence[int], view: View) -> dict[int, int]:
        """The number of visible observations of each entity that has any."""
        ...

    def count_entities(self, view: View, kind: str | None) -> int: ...

    def entity_page(self, view: View, kind: str | None, offset: int, limit: int) -> list[Entity]:
        """Visible entities (of ``kind`` when given), by id."""
        ...

    def relations_of(self, entity_id: int, view: View) -> list[NamedRelation]:
        """Visible relations of an entity: outgoing first, then by id."""
        ...

    def degree(self, entity_id: int, view: View) -> tuple[int, int]:
        """(incoming, outgoing) visible relations of an entity."""
        ...

    def counts(self, view: View) -> Counts: ...

    def find_relations(
        self,
        view: View,
        source_id: int | None,
        target_id: int | None,
        relation_type: str | None,
        offset: int,
        limit: int,
    ) -> tuple[int, list[Link]]:
        """(how many visible relations match, a page of them by id)."""
        ...

    def type_counts(self, view: View, what: RowKind) -> list[tuple[str, int]]:
        """Entity types or relation types with their visible counts, most first, then by type."""
        ...

    def relation(
        self, source_id: int, relation_type: str, target_id: int, view: View
    ) -> Found | None: ...

    def relation_metadata(self, relation_id: int) -> str | None:
        """A relation's metadata JSON text (None: no such relation)."""
        ...

    def without_vectors(self, kind: RowKind, ids: Sequence[int]) -> set[int]:
        """The ids of ``ids`` whose rows have no vector."""
        ...


class GraphEdges(Protocol):
    """The knowledge graph's relations walked or paged by id, in one transaction of the store
    (`ReadTx.graph_edges`): the traversal's edges, an export's pages."""

    def entities_after(self, view: View, after_id: int, limit: int) -> list[Entity]:
        """Up to ``limit`` visible entities with an id above ``after_id``, by id."""
        ...

    def relations_after(self, view: View, after_id: int, limit: int) -> list[Link]:
        """Up to ``limit`` visible relations with an id above ``after_id``, by id."""
        ...

    def relations_touching(
        self, entity_ids: Sequence[int], view: View, sources_only: bool
    ) -> list[Link]:
        """Visible relations with an endpoint (or the source) among ``entity_ids``, by id."""
        ...

    def edges(
        self,
        node_ids: Sequence[int],
        view: View,
        outgoing: bool,
        relation_type: str | None,
    ) -> list[Edge]:
        """Visible relations whose source (``outgoing``) or target is among ``node_ids``, by id."""
        ...

    def edges_named(self, node_id: int, view: View, outgoing: bool) -> list[NamedRelation]:
        """Visible relations whose source (``outgoing``) or target is ``node_id``, by type then id."""
        ...

    def relation_ids_touching(self, entity_id: int, view: View) -> list[int]:
        """Ids of the visible relations with ``entity_id`` at either end."""
        ...


class GraphWrites(Protocol):
    """The knowledge graph's writes, in one write transaction of the store
    (`StoreTx.graph_writes`): entities, observations, relations and their scopes."""

    def next_ids(self) -> tuple[int, int]:
        """(next entity id, next memory id), as the id sequences would give them (the caller
        holds the write lock)."""
        ...

    def insert_batch(
        self,
        entities: Sequence[NewEntity],
        observations: Sequence[NewObservation],
        ts: float,
        scope_id: int,
    ) -> None:
        """Insert entities and observations with the ids given, linked to ``scope_id``."""
        ...

    def create_entity(self, name: str, canonical: str, kind: str, ts: float) -> int: ...

    def add_observation(self, entity_id: int, content: str, ts: float, scope_id: int) -> int: ...

    def link(self, kind: RowKind, row_id: int, scope_ids: Sequence[int]) -> None:
        """Link an entity or relation to each scope (already linked ones stay)."""
        ...

    def set_kind(self, entity_id: int, kind: str, ts: float) -> None: ...

    def touch(self, entity_ids: Sequence[int], ts: float) -> None: ...

    def observation_elsewhere(self, memory_id: int, entity_id: int) -> bool:
        """True when the memory is linked to an entity other than ``entity_id``."""
        ...

    def delete_memory(self, memory_id: int) -> None: ...

    def unlink_observation(self, memory_id: int, entity_id: int) -> None: ...

    def linked_memories(self, entity_id: int) -> list[int]:
        """The memories linked to an entity (any type, any scope)."""
        ...

    def delete_entity(self, entity_id: int) -> None:
        """Delete an entity (its relations and links go with it)."""
        ...

    def create_relation(
        self, source_id: int, target_id: int, relation_type: str, metadata: str, ts: float
    ) -> int: ...

    def set_relation_metadata(self, relation_id: int, metadata: str) -> None: ...

    def delete_relation(self, relation_id: int) -> None: ...

    def duplicate_observations(self, view: View) -> list[tuple[int, list[int]]]:
        """(entity id, memory ids) of visible observations repeated on one entity."""
        ...


class GraphMerge(Protocol):
    """The steps of merging one entity into another, in one write transaction of the store
    (`StoreTx.graph_merge`)."""

    def copy_scopes(self, from_entity: int, to_entity: int) -> None: ...

    def move_memories(self, from_entity: int, to_entity: int) -> list[int]:
        """Re-link the memories of one entity to another; the memory ids."""
        ...

    def all_edges_of(self, entity_id: int) -> list[Edge]:
        """Every relation with ``entity_id`` at either end, by id, whatever its scopes."""
        ...

    def repoint_relation(self, relation_id: int, source_id: int, target_id: int) -> None:
        """Move a relation's ends (its vector, whose document names the old ends, goes)."""
        ...

    def fold_relation(self, relation_id: int, into: int) -> None:
        """Give relation ``into`` the memories and scopes of ``relation_id``, then delete it."""
        ...
