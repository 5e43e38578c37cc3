"""Who may change a row of the store: the ownership rule every write path checks.

A row (a memory, an entity, a relation) belongs to its *owner scopes*:

- a memory: the scopes it is linked to (``memory_scopes``), chosen by its author;
- a relation: its own scopes plus the scopes of the memories that state it
  (``memory_relations``);
- an entity: its own scopes plus the owner scopes of every relation touching
  it and of every memory linked to it (its observations and mentions).

Dependents count because a change of the row shows through them: retyping,
renaming, re-pointing or deleting an entity changes what another repository's
relation or observation of it reads as. A row without any owner scope
(unscoped, from old imports) is owned by everyone, like ``global``.

A server may write its current scope and ``global`` (``ScopePolicy.writable``).
A row is *owned here* when every owner scope is writable here; otherwise it is
*shared* with the others (its *foreign* scopes). Then:

- its attributes (an entity's name and type, a relation's metadata and
  endpoints, a memory's content, type, importance and links, the rows it is
  merged into) change only where it is owned: `Ownership.require` raises
  `SharedRow`, a `Forbidden` error naming the foreign scope. Callers check before
  they change anything, and a call is one transaction, so a refusal changes
  nothing;
- linking it into a writable scope is allowed and keeps its attributes;
  `Ownership.kept` words the warning when the caller asked for another value;
- deleting an entity or relation that is shared unlinks it from the writable
  scopes only (`Ownership.release`); a shared memory cannot be deleted here
  (its scopes were chosen by its author, like its content).

Every write path of the store goes through this module: the memory tools
(``actors.memory``), the graph tools (``kg.writer``'s `Writer`) and the CLI
commands that call them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, Literal, TypeVar

from ....protocol.errors import Forbidden
from ....protocol.plural import noun
from ..interfaces import ReadTx, StoreTx
from ..interfaces.scopes import RowKind

Kind = RowKind

MAX_NAMED = 3


class SharedRow(Forbidden):
    """A change of a row shared with a scope this server may not write (nothing was changed)."""


def _quoted(names: Sequence[str]) -> str:
    shown = ", ".join(f"`{n}`" for n in names[:MAX_NAMED])
    return shown + (f" and {len(names) - MAX_NAMED} more" if len(names) > MAX_NAMED else "")


Tx = TypeVar("Tx", bound=ReadTx)


class Ownership(Generic[Tx]):
    """The ownership rule for one transaction of a server that may write ``writable``.

    Built inside the transaction, after the call has created the scopes it
    writes (scope ids are resolved once); every method reads the rows as they
    are now, so a check sees the earlier changes of the same call. The checks read
    (any transaction); `release` writes, so only an `Ownership` of a `StoreTx` has it.
    """

    def __init__(self, tx: Tx, writable: Sequence[str]) -> None:
        self.tx = tx
        self.writable = list(dict.fromkeys(writable))
        ids = self.tx.scopes.ids(self.writable)
        self.writable_ids = [ids[name] for name in self.writable if name in ids]

    def describe_writable(self) -> str:
        return " and ".join(f"`{s}`" for s in self.writable)

    # -- the check ---------------------------------------------------------------

    def foreign(self, kind: Kind, item: int) -> list[str]:
        """The owner scopes of the row that this server may not write, by name (empty: owned here)."""
        # With no writable scope stored yet (``writable_ids`` empty) every owner scope is
        # foreign: a row of another repository never reads as owned here.
        return self.tx.scopes.foreign_owners(kind, item, self.writable_ids)

    def owned(self, kind: Kind, item: int) -> bool:
        """True when every owner scope of the row is writable here (or it has none).

        Each part of the owner union is its own EXISTS, so no union is built
        and a shared row is found at its first foreign link.
        """
        return not self.tx.scopes.has_foreign_owner(kind, item, self.writable_ids)

    def require(self, kind: Kind, item: int, label: str, action: str, where: str = "") -> None:
        """Refuse (`SharedRow`) to ``action`` on the row unless it is owned here.

        ``label`` names the row for a person (``entity 'X'``); ``action`` says
        what was asked (``change its entityType to `service```).
        """
        foreign = self.foreign(kind, item)
        if foreign:
            raise self.refusal(label, action, foreign, where)

    def refusal(
        self, label: str, action: str, foreign: Sequence[str], where: str = ""
    ) -> SharedRow:
        prefix = f"{where}: " if where else ""
        return SharedRow(
            f"{prefix}cannot {action}: {label} is shared with {noun(len(foreign), 'scope')} {_quoted(foreign)}, which this "
            f"server may not modify (it may only write {self.describe_writable()}), so it is read-only "
            "here: a shared row changes only from a server that may write every scope it belongs to. "
            "Nothing was changed"
        )

    def kept(
        self, label: str, attribute: str, kept: str, asked: str, foreign: Sequence[str]
    ) -> str:
        """The warning of a link that kept a shared row's attribute instead of the one asked for."""
        return (
            f"{label} keeps its {attribute} {kept} (not {asked}): it is shared with {noun(len(foreign), 'scope')} "
            f"{_quoted(foreign)}, which this server may not modify, so its {attribute} is owned by "
            "that repository too and was kept"
        )

    # -- deletes ---------------------------------------------------------------------

    def release(self: Ownership[StoreTx], kind: Literal["entity", "relation"], item: int) -> None:
        """Remove a shared entity or relation from the writable scopes only.

        The row is first linked to its foreign owner scopes (the scopes of the
        relations and memories that depend on it), so it never ends up without
        a scope, which would make it visible everywhere; then its links to the
        writable scopes go. Another repository's view does not change.
        """
        if self.writable_ids:  # else linked to no writable scope: nothing to release
            self.tx.scopes.release(kind, item, self.writable_ids)
