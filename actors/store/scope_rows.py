"""TRANSITIONAL: the ``scopes`` table's operations as functions of a raw connection, for the
callers of other areas not yet converted to `interfaces.StoreTx` (``tx.scopes``).

Each one runs the storage interface (`interfaces.scopes.Scopes`) of the connection's
backend: no SQL here. `as_tx` sees a raw connection (or a `StoreTx`, unchanged) through
the interfaces. This module goes once every caller holds a `StoreTx`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

from .dialect import is_postgres
from .interfaces import StoreTx


def as_tx(conn: Any) -> StoreTx:
    """``conn`` seen through the storage interfaces: a `StoreTx` as it is; a raw
    connection (``sqlite3.Connection`` or `pg.conn.PgConnection`) in its backend's."""
    if hasattr(conn, "memories") and hasattr(conn, "scopes"):
        return cast(StoreTx, conn)  # a StoreTx already
    if is_postgres(conn):
        from .pg.tx import tx as pg_tx  # psycopg: PostgreSQL stores only

        return pg_tx(conn)
    from .sqlite.tx import tx as sqlite_tx

    return sqlite_tx(conn)


def ensure_scope(conn: StoreTx | Any, name: str) -> int:
    return as_tx(conn).scopes.ensure(name)


def scope_ids(conn: StoreTx | Any, names: Iterable[str]) -> dict[str, int]:
    """Ids of the scopes that exist (never creates one)."""
    return as_tx(conn).scopes.ids(list(names))


def memory_scope_names(conn: StoreTx | Any, memory_id: int) -> list[str]:
    return as_tx(conn).scopes.of_memory(memory_id)


def scope_counts(conn: StoreTx | Any) -> dict[str, int]:
    """Every stored scope with its number of memories (0 for scopes of entities only)."""
    return as_tx(conn).scopes.memory_counts()
