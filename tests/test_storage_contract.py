"""The storage contract: every storage interface, driven directly, on SQLite and on PostgreSQL.

Each concept's cases live in ``test_storage_contract_<concept>.py`` and use the ``direct``
fixture (tests/conftest.py): a fresh store of each backend opened without its actors
(`direct.Direct`). A new backend passes when every case passes on it.
"""

from __future__ import annotations

import pytest
from memtrio.actors.store.direct import Direct
from memtrio.actors.store.interfaces import StoreTx


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
