"""The storage contract: every storage interface, driven directly, on SQLite and on PostgreSQL.

Each concept's cases live in ``test_storage_contract_<concept>.py`` and use the ``direct``
fixture (tests/conftest.py): a fresh store of each backend opened without its actors
(`direct.Direct`). A new backend passes when every case passes on it.
"""

from __future__ import annotations

import sqlite3

import pytest
import seed
from memtrio.actors.store.direct import Direct
from memtrio.actors.store.interfaces import StoreTx
from memtrio.actors.store.interfaces.errors import (
    StoreBusy,
    StoreConflict,
    StoreConnectionLost,
    StoreError,
    StoreOperationalError,
)


def test_each_transaction_sees_its_backend_through_the_interfaces(direct: Direct) -> None:
    seen = direct.read(lambda tx: tx.backend)
    assert seen == direct.backend.name
    assert direct.write(lambda tx: tx.backend) == seen


def test_a_failed_write_commits_nothing_and_the_store_goes_on(direct: Direct) -> None:
    class Refused(Exception):
        pass

    def fails(tx: StoreTx) -> None:
        raise Refused

    with pytest.raises(Refused):
        direct.write(fails)
    assert direct.write(lambda tx: 1) == 1


def test_a_refused_row_is_the_stores_conflict_with_the_drivers_error_as_its_cause(
    direct: Direct,
) -> None:
    """A driver's error leaves the store as the store's own (`interfaces.errors`), the
    driver's error chained as ``__cause__``; nothing of the failed write is kept."""
    direct.write(lambda tx: seed.entity(tx, 7, "kept"))
    with pytest.raises(StoreConflict) as refused:
        direct.write(lambda tx: (seed.entity(tx, 8, "x"), seed.entity(tx, 7, "again")))
    assert not isinstance(refused.value, (sqlite3.Error, OSError))
    assert refused.value.__cause__ is not None
    assert type(refused.value.__cause__).__module__.split(".")[0] in ("sqlite3", "psycopg")
    kept = direct.read(lambda tx: tx.graph.entities_by_ids([7, 8]))
    assert [(e.id, e.name) for e in kept] == [(7, "kept")]


def _unrunnable(tx: StoreTx) -> None:
    """A statement no store can run (no placeholder: nothing to translate), on the
    transaction's connection."""
    run = getattr(tx.conn, "native", None) or tx.conn.execute
    run("SELECT nothing FROM no_such_table")


def test_a_statement_the_store_cannot_run_is_the_stores_error_on_reads_and_writes(
    direct: Direct,
) -> None:
    for run in (direct.read, direct.write):
        with pytest.raises(StoreError) as failed:
            run(_unrunnable)
        assert not isinstance(failed.value, sqlite3.Error)
        assert failed.value.__cause__ is not None
    with pytest.raises(StoreOperationalError):  # a read transaction writes nothing
        direct.read(lambda tx: tx.scopes.ensure("no"))  # what the type checker refuses too
    assert direct.write(lambda tx: 1) == 1  # the store goes on


def test_the_stores_errors_are_its_own_not_a_drivers() -> None:
    for cls in (StoreError, StoreConflict, StoreOperationalError, StoreBusy, StoreConnectionLost):
        assert all(base.__module__ in (StoreError.__module__, "builtins") for base in cls.__mro__)
