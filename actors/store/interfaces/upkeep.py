"""Maintenance and whole-store work: statistics, integrity checks, export and import in bulk, flush.

The interface every store backend implements (`sqlite.upkeep`, `pg.upkeep`): arguments and
results are msgspec Structs or plain values, never rows, cursors or SQL.
"""

from __future__ import annotations

from typing import Protocol


class Upkeep(Protocol):
    """Maintenance and whole-store work, in one transaction of the store (`StoreTx.upkeep`)."""
