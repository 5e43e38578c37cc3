"""Rows a storage contract test starts from, written through the storage interfaces (the
import interface, `interfaces.upkeep.Import`, which keeps the ids it is given), so that the
same setup runs on every backend in its own dialect and no test writes SQL.

Rows no interface would write (text that is not UTF-8, a window under another model's
first one) are tests/test_sqlite_rows.py's, on SQLite only.
"""

from __future__ import annotations

from collections.abc import Sequence

from memtrio.actors.store.interfaces import StoreTx
from memtrio.actors.store.interfaces.upkeep import EntityRow, MemoryRow, RelationRow


def scope(tx: StoreTx, name: str) -> int:
    """The id of scope ``name`` (made if new: ids count up from 1 in a new store)."""
    return tx.imports.add_scope(name)


def memory(
    tx: StoreTx,
    mid: int,
    content: str,
    memory_type: str = "observation",
    created_at: float = 0.0,
    scopes: Sequence[str] = (),
) -> None:
    tx.imports.add_memory(
        MemoryRow(
            id=mid, content=content, memory_type=memory_type, importance=0.0,
            created_at=created_at, updated_at=created_at, last_accessed_at=None,
            access_count=0,
        )
    )  # fmt: skip
    tx.imports.link_scopes("memory", mid, list(scopes))


def entity(
    tx: StoreTx,
    eid: int,
    name: str,
    kind: str = "entity",
    canonical: str | None = None,
    created_at: float = 0.0,
    scopes: Sequence[str] = (),
) -> None:
    tx.imports.add_entity(
        EntityRow(
            id=eid, name=name, canonical_name=name.lower() if canonical is None else canonical,
            kind=kind, created_at=created_at, updated_at=created_at,
        )
    )  # fmt: skip
    tx.imports.link_scopes("entity", eid, list(scopes))


def relation(
    tx: StoreTx,
    rid: int,
    source_id: int,
    relation_type: str,
    target_id: int,
    created_at: float = 0.0,
    scopes: Sequence[str] = (),
) -> None:
    row = RelationRow(
        id=rid, source="", relation_type=relation_type, target="", metadata="{}",
        created_at=created_at,
    )  # fmt: skip
    tx.imports.add_relation(row, source_id, target_id)
    tx.imports.link_scopes("relation", rid, list(scopes))


def mentions(
    tx: StoreTx, mid: int, entities: Sequence[int] = (), relations: Sequence[int] = ()
) -> None:
    """Link memory ``mid`` to the entities and relations it mentions."""
    tx.imports.link_memory(mid, list(entities), list(relations))
