"""Vectors' checks and rows, the same on both backends (`interfaces.vectors`)."""

from __future__ import annotations

from collections.abc import Iterator

from ..interfaces.vectors import Windows

# The table of each kind of item a vector belongs to (names from here, never from input).
TABLES = {"memory": "memories", "entity": "entities", "relation": "relations"}


def item_table(kind: str) -> str:
    """The table of ``kind``'s items; an unknown kind: ValueError."""
    try:
        return TABLES[kind]
    except KeyError:
        raise ValueError(f"no such kind of item: {kind!r}") from None


def later_windows(windows: Windows) -> Iterator[tuple[int, bytes]]:
    """(chunk, bytes) of each window after the first (the first is the ``vectors`` row)."""
    return enumerate(windows.chunks[1:], start=1)
