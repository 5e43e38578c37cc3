"""Dashboard reads: overviews, listings and details across concepts, for the web UI.

The interface every store backend implements (`sqlite.browse`, `pg.browse`): arguments and
results are msgspec Structs or plain values, never rows, cursors or SQL.
"""

from __future__ import annotations

from typing import Protocol


class Browse(Protocol):
    """Dashboard reads, in one transaction of the store (`StoreTx.browse`)."""
