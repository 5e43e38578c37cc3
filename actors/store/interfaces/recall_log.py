"""The recall log and access counts: what was recalled, when, and how often each row was returned.

The interface every store backend implements (`sqlite.recall_log`, `pg.recall_log`): arguments and
results are msgspec Structs or plain values, never rows, cursors or SQL.
"""

from __future__ import annotations

from typing import Protocol


class RecallLog(Protocol):
    """The recall log and access counts, in one transaction of the store (`StoreTx.recall_log`)."""
