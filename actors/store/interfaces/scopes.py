"""Scopes: ids by name (created on demand), a row's scopes, counts per scope.

The interface every store backend implements (`sqlite.scopes`, `pg.scopes`): arguments and
results are msgspec Structs or plain values, never rows, cursors or SQL.
"""

from __future__ import annotations

from typing import Protocol


class Scopes(Protocol):
    """Scopes, in one transaction of the store (`StoreTx.scopes`)."""
