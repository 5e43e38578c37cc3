"""TRANSITIONAL: which database a raw store connection talks to.

Nothing new may ask this: each storage interface has a SQLite and a PostgreSQL
implementation, chosen once where the store is opened (`backends.tx_factory`). The
last callers are the shims that wrap a raw connection into a `interfaces.StoreTx`;
this module goes with them.
"""

from __future__ import annotations

POSTGRESQL = "postgresql"


def is_postgres(conn: object) -> bool:
    """Whether ``conn`` is a `pg.conn.PgConnection` (else a ``sqlite3.Connection``)."""
    return getattr(conn, "dialect", None) == POSTGRESQL
