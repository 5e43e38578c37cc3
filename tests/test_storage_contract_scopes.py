"""The scopes concept (`interfaces.scopes.Scopes`) on both backends, and the ownership rule
(`store.domain.ownership`) that reads it: a row of another repository stays read-only even when
none of the scopes this server may write exists yet."""

from __future__ import annotations

import pytest
from memtrio.actors.store.direct import Direct
from memtrio.actors.store.domain.memories import delete_memory, get_memory
from memtrio.actors.store.domain.ownership import Ownership, SharedRow
from memtrio.actors.store.domain.scopes import ScopePolicy
from memtrio.actors.store.interfaces import StoreTx

A = "repo:/a/.git"
B = "repo:/b/.git"


def _b_rows(tx: StoreTx) -> tuple[int, int, int]:
    """B's memory, entity and relation, each linked to B's scope only."""
    b = tx.scopes.ensure(B)
    memory = tx.memories.insert("B's note", "fact", 0.5, 1.0, [b])
    x = tx.graph_writes.create_entity("X", "x", "entity", 1.0)
    y = tx.graph_writes.create_entity("Y", "y", "entity", 1.0)
    tx.graph_writes.link("entity", x, [b])
    tx.graph_writes.link("entity", y, [b])
    rel = tx.graph_writes.create_relation(x, y, "uses", "{}", 1.0)
    tx.graph_writes.link("relation", rel, [b])
    return memory, x, rel


def test_rows_of_another_repository_are_foreign_before_any_writable_scope_exists(
    direct: Direct,
) -> None:
    memory, x, rel = direct.write(_b_rows)

    def check(tx: StoreTx) -> None:
        assert tx.scopes.ids([A, "global"]) == {}  # neither writable scope exists yet
        own = Ownership(tx, [A, "global"])
        for kind, item in (("memory", memory), ("entity", x), ("relation", rel)):
            assert own.foreign(kind, item) == [B], kind  # type: ignore[arg-type]  # a RowKind
            assert not own.owned(kind, item), kind  # type: ignore[arg-type]  # a RowKind
        with pytest.raises(SharedRow, match=r"repo:/b/\.git"):
            own.require("entity", x, "entity 'X'", "rename it")

    direct.read(check)


def test_forget_refuses_another_repositorys_memory_before_any_writable_scope_exists(
    direct: Direct,
) -> None:
    memory, _, _ = direct.write(_b_rows)
    policy = ScopePolicy(A)  # may write A and global, neither stored yet; reads B explicitly
    with pytest.raises(SharedRow, match=r"repo:/b/\.git"):
        direct.write(lambda tx: delete_memory(tx, memory, policy, [B, "global"]))
    assert direct.read(lambda tx: get_memory(tx, memory)) is not None  # nothing was deleted


def test_empty_writable_lists_every_owner_as_foreign(direct: Direct) -> None:
    memory, x, rel = direct.write(_b_rows)

    def check(tx: StoreTx) -> None:
        assert tx.scopes.foreign_owners("entity", x, []) == [B]
        assert tx.scopes.has_foreign_owner("relation", rel, [])
        assert tx.scopes.foreign_owners("memory", memory, []) == [B]
        b = tx.scopes.ids([B])[B]
        assert tx.scopes.foreign_owners("memory", memory, [b]) == []
        assert not tx.scopes.has_foreign_owner("memory", memory, [b])

    direct.read(check)
