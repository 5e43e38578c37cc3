"""`interfaces.snapshot.Snapshot` on PostgreSQL, in PostgreSQL's own dialect (`PgConnection.native`)."""

from __future__ import annotations

from .conn import PgConnection


class PgSnapshot:
    def __init__(self, conn: PgConnection) -> None:
        self.conn = conn
