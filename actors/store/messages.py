"""What the StoreWriter actor accepts (see ``writer.serve_store_writer``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from ...protocol.messages import Request


class Transact(Request, tag=True):
    """Run ``op(conn)`` in one write transaction on the only write connection.

    The answer is ``op``'s value (a `Written`'s ``value``, its changes going to
    the store's listeners); an exception ``op`` raises fails the request and
    rolls the transaction back. ``name`` labels the write in the trace log.
    """

    op: Callable[[sqlite3.Connection], object]
    name: str = ""


StoreRequest = Transact


class RunMaintenance(Request, tag=True):
    """Run the store's maintenance now (checkpoint, incremental vacuum, FTS5 merge),
    whatever its interval; the answer is the run's `maintenance.MaintenanceReport`."""


MaintenanceRequest = RunMaintenance
