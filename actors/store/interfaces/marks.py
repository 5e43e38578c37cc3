"""Id high-water marks: ids are never reused, even after the row with the highest one is deleted.

The interface every store backend implements (`sqlite.marks`, `pg.marks`): arguments and
results are msgspec Structs or plain values, never rows, cursors or SQL.
"""

from __future__ import annotations

from typing import Literal, Protocol

# The tables whose ids are never reused.
MarkedTable = Literal["memories", "entities", "relations"]
MARKED_TABLES: tuple[MarkedTable, ...] = ("memories", "entities", "relations")


class IdMarks(Protocol):
    """Id high-water marks, in one transaction of the store (`StoreTx.marks`)."""

    def high_mark(self, table: MarkedTable) -> int:
        """The highest id ``table`` has ever given (0 if none): never below its rows' ids,
        and not lowered when the row with it is deleted."""
        ...

    def next_id(self, table: MarkedTable) -> int:
        """The id the next row of ``table`` inserted without one gets (the caller holds the
        write lock): `high_mark` + 1."""
        ...
