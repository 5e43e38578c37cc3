"""The scopes one graph call sees and writes, and the scope ids that apply them.

Scopes follow the memory tools' rules (``store.scopes``): reads see the
entities, relations and observations of the selected scopes (the current
repository plus ``global``); writes go to the current scope. A row linked to
no scope at all is visible everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..store import backends
from ..store.dialect import POSTGRESQL
from ..store.interfaces import StoreTx
from ..store.interfaces.graph import View as ScopeIds


@dataclass
class View:
    """The scopes one call reads (``selection``) and may write (``writable``, ``current`` first)."""

    selection: list[str]
    writable: list[str]
    current: str


class Scoped:
    """A `View` resolved to scope ids inside the transaction (`interfaces.graph.View`): what
    the graph's reads of this call see."""

    def __init__(self, tx: StoreTx | Any, view: View) -> None:
        tx = as_tx(tx)
        self.view = view
        self.ids: ScopeIds = tx.graph.view(view.selection, view.writable)
        self.read_ids = list(self.ids.read_ids)
        self.write_ids = list(self.ids.write_ids)
        # Every scope of the store is read (one repository, or none but ``global``):
        # every row is visible, linked to a read scope or to none, so no filter is needed.
        self.sees_all = self.ids.sees_all

    # TRANSITIONAL: the SQL visibility filters of the callers not yet behind the storage
    # interfaces (kg.search, actors.vectors); the graph's own SQL is in store/*/graph.py.
    def _vis(self, table: str, col: str, alias: str) -> str:
        if self.sees_all:
            return "(1 = 1)"
        inner = ",".join(str(int(i)) for i in self.read_ids) or "NULL"
        return (
            f"(EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id AND x.scope_id IN ({inner}))"
            f" OR NOT EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id))"
        )

    def entity(self, alias: str = "e") -> str:
        return self._vis("entity_scopes", "entity_id", alias)

    def relation(self, alias: str = "r") -> str:
        return self._vis("relation_scopes", "relation_id", alias)

    def memory(self, alias: str = "m") -> str:
        return self._vis("memory_scopes", "memory_id", alias)


def as_tx(tx: StoreTx | Any) -> StoreTx:
    """``tx``, or TRANSITIONAL: a raw connection (of a caller not yet converted: kg.search,
    actors.vectors) seen as a `StoreTx`."""
    if hasattr(tx, "graph"):
        return tx  # type: ignore[no-any-return]  # a StoreTx (Any when the caller's is untyped)
    url = POSTGRESQL if getattr(tx, "dialect", None) == POSTGRESQL else None
    return backends.tx_factory(url)(tx)
