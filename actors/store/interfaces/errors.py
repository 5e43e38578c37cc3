"""The store's errors, as feature code may catch them without naming a database driver."""

from __future__ import annotations

import sqlite3

# An operation the store could not carry out now (a full or read-only disk, a lock not
# granted in time, a lost PostgreSQL server: `pg.conn.PgOperationalError` is one too).
# Nothing of the failed transaction was written.
StoreOperationalError = sqlite3.OperationalError

__all__ = ["StoreOperationalError"]
