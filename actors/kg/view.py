"""The scopes one graph call sees and writes, and the scope ids that apply them.

Scopes follow the memory tools' rules (``store.domain.scopes``): reads see the
entities, relations and observations of the selected scopes (the current
repository plus ``global``); writes go to the current scope. A row linked to
no scope at all is visible everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..store.interfaces import ReadTx
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

    def __init__(self, tx: ReadTx, view: View) -> None:
        self.view = view
        self.ids: ScopeIds = tx.graph.view(view.selection, view.writable)
        self.read_ids = list(self.ids.read_ids)
        self.write_ids = list(self.ids.write_ids)
        # Every scope of the store is read (one repository, or none but ``global``):
        # every row is visible, linked to a read scope or to none, so no filter is needed.
        self.sees_all = self.ids.sees_all
