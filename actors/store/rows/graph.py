"""The knowledge graph's rows, the same on both backends (`interfaces.graph`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..interfaces.graph import Edge, Entity, Found, Link, NamedRelation, Observation


def entity(row: Sequence[Any], visible: bool = True) -> Entity:
    """(id, name, kind, canonical name[, ...]) as an `Entity`."""
    return Entity(row[0], row[1], row[2], row[3], visible)


def seen_entity(row: Sequence[Any]) -> Entity:
    """(id, name, kind, canonical name, visible) as an `Entity`."""
    return entity(row, bool(row[4]))


def observation(row: Sequence[Any]) -> Observation:
    """(entity id, memory id, content) as an `Observation`."""
    return Observation(*row)


def edge(row: Sequence[Any]) -> Edge:
    """(id, source id, relation type, target id) as an `Edge`."""
    return Edge(*row)


def link(row: Sequence[Any]) -> Link:
    """(id, source name, relation type, target name) as a `Link`."""
    return Link(*row)


def named(row: Sequence[Any]) -> NamedRelation:
    """(id, source id, name, kind, relation type, target id, name, kind) as a `NamedRelation`."""
    return NamedRelation(*row)


def found(row: Sequence[Any] | None) -> Found | None:
    """(id, visible) as a `Found`; no row: None."""
    return None if row is None else Found(row[0], bool(row[1]))


def relation_filter(
    source_id: int | None, target_id: int | None, relation_type: str | None
) -> list[tuple[str, int | str]]:
    """The (column, value) pairs a `Graph.find_relations` sets, in a fixed order."""
    given = (("r.source_id", source_id), ("r.target_id", target_id))
    found: list[tuple[str, int | str]] = [(col, v) for col, v in given if v is not None]
    if relation_type is not None:
        found.append(("r.relation_type", relation_type))
    return found
