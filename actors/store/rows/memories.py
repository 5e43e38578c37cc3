"""A memory's rows, the same on both backends (`interfaces.memories`, `interfaces.browse`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..interfaces.memories import LinkedEntity, LinkedRelation, MemoryRow

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
