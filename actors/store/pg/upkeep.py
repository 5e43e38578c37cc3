"""`interfaces.upkeep.Upkeep` on PostgreSQL, in PostgreSQL's own dialect (`PgConnection.native`)."""

from __future__ import annotations

from .conn import PgConnection


class PgUpkeep:
    def __init__(self, conn: PgConnection) -> None:
        self.conn = conn
