"""The store's errors, as code outside the backends catches them without naming a driver.

Each backend maps its driver's errors onto these where they leave it (the transaction's
begin, its op, its commit: `connections.StoreConnection.errors`), the driver's own error kept as
``__cause__`` (as Django's ``DatabaseErrorWrapper`` does): a traceback in the trace log
still shows it, and a backend's own code may look at it (`db.unavailable`).
"""

from __future__ import annotations


class StoreError(Exception):
    """The store refused or failed an operation; nothing of its transaction was written."""


class StoreConflict(StoreError):
    """A constraint of the store refused a row (a duplicate, a missing referenced row)."""


class StoreOperationalError(StoreError):
    """The store could not carry the operation out now (a full or read-only disk, a query
    the full-text engine refused, an interrupted statement): the store itself is sound."""


class StoreBusy(StoreOperationalError):
    """A lock was not granted in time (another writer held it): try again."""


class StoreConnectionLost(StoreOperationalError):
    """The connection to the store's server is gone: nothing of the transaction was
    committed; the next use of the store reconnects."""


__all__ = [
    "StoreBusy",
    "StoreConflict",
    "StoreConnectionLost",
    "StoreError",
    "StoreOperationalError",
]
