"""`interfaces.browse.Browse` on PostgreSQL, in PostgreSQL's own dialect (`PgConnection.native`)."""

from __future__ import annotations

from .conn import PgConnection


class PgBrowse:
    def __init__(self, conn: PgConnection) -> None:
        self.conn = conn
