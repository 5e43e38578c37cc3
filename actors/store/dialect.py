"""Which database a store connection talks to, for the few statements that differ.

Most of the store's SQL is shared (`pg.sql` rewrites its SQLite spellings);
full text, JSON rows, id high-water marks and PRAGMAs differ in meaning, and
their call sites branch on `is_postgres` to the statements of `pg.fts`.
"""

from __future__ import annotations

POSTGRESQL = "postgresql"


def is_postgres(conn: object) -> bool:
    """Whether ``conn`` is a `pg.conn.PgConnection` (else a ``sqlite3.Connection``)."""
    return getattr(conn, "dialect", None) == POSTGRESQL
