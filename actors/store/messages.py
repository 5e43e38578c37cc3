"""What the StoreWriter actor accepts (see ``writer.serve_store_writer``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import msgspec

from ...protocol.messages import Request
from .interfaces import StoreTx


class Transact(Request, frozen=True, tag=True):
    """Run ``op(tx)`` in one write transaction on the only write connection, ``tx`` the
    transaction seen through the storage interfaces (`interfaces.StoreTx`).

    The answer is ``op``'s value (a `Written`'s ``value``, its changes going to
    the store's listeners); an exception ``op`` raises fails the request and
    rolls the transaction back. ``name`` labels the write in the trace log.
    """

    op: Callable[[StoreTx], object]
    name: str = ""


StoreRequest = Transact


class Change(msgspec.Struct, frozen=True):
    """One committed change, for listeners.

    - ``kind``: ``memory``, ``entity`` or ``relation``; or ``reset`` (many rows
      changed at once, e.g. flush or import: reload everything from the store).
    - ``id``: the row id (0 for ``reset``).
    - ``deleted``: the row is gone (its vector too).
    - ``vector``: the float32 bytes stored in ``vectors`` (and
      ``vector_chunks``) in the same transaction, with ``model`` and
      ``revision``: one vector per window of the row's text, back to back
      (one for a short text); None when no vector is stored for the row now
      (embeddings off, or the stale one was dropped).
    """

    kind: Literal["memory", "entity", "relation", "reset"]
    id: int = 0
    deleted: bool = False
    vector: bytes | None = None
    model: str | None = None
    revision: str | None = None


class RunMaintenance(Request, frozen=True, tag=True):
    """Run the store's maintenance now (checkpoint, incremental vacuum, FTS5 merge),
    whatever its interval; the answer is the run's `maintenance.MaintenanceReport`."""


MaintenanceRequest = RunMaintenance
