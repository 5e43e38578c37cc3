"""Id high-water marks: ids are never reused, even after the row with the highest one is deleted.

The interface every store backend implements (`sqlite.marks`, `pg.marks`): arguments and
results are msgspec Structs or plain values, never rows, cursors or SQL.
"""

from __future__ import annotations

from typing import Protocol


class IdMarks(Protocol):
    """Id high-water marks, in one transaction of the store (`StoreTx.marks`)."""
