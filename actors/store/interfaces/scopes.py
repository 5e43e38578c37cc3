"""Scopes: ids by name (created on demand), a row's scopes, counts per scope, and the owner
scopes of a row (what the ownership rule, `store.domain.ownership`, reads).

The interface every store backend implements (`sqlite.scopes`, `pg.scopes`): arguments and
results are msgspec Structs or plain values, never rows, cursors or SQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

# A row that has owner scopes: a memory, an entity or a relation.
RowKind = Literal["memory", "entity", "relation"]


class ScopeReads(Protocol):
    """What a read transaction may ask of `Scopes` (`ReadTx.scopes`): nothing that writes."""

    def ids(self, names: Sequence[str]) -> dict[str, int]:
        """The ids of those of ``names`` that exist, by name (never creates one)."""
        ...

    def of_memory(self, memory_id: int) -> list[str]:
        """The names of a memory's scopes, sorted (empty: unscoped, or no such memory)."""
        ...

    def memory_counts(self) -> dict[str, int]:
        """Every stored scope with its number of memories (0 for scopes of entities only)."""
        ...

    def foreign_owners(self, kind: RowKind, item: int, writable: Sequence[int]) -> list[str]:
        """The owner scopes of the row (see `store.domain.ownership`) whose ids are not in
        ``writable``, by name, sorted. ``writable`` may be empty (then every owner scope is
        foreign: never read as SQL's ``NOT IN (NULL)``, which excludes every row)."""
        ...

    def has_foreign_owner(self, kind: RowKind, item: int, writable: Sequence[int]) -> bool:
        """Whether `foreign_owners` is not empty, found at the first foreign link."""
        ...


class Scopes(ScopeReads, Protocol):
    """Scopes, in one transaction of the store (`StoreTx.scopes`).

    Scope names compare exactly (``repo:/A`` and ``repo:/a`` are two scopes).
    """

    def ensure(self, name: str) -> int:
        """The id of the scope ``name``, created if it does not exist (a write)."""
        ...

    def release(
        self, kind: Literal["entity", "relation"], item: int, writable: Sequence[int]
    ) -> None:
        """Link the row to its foreign owner scopes, then unlink it from the scopes
        ``writable`` (see `Ownership.release`). ``writable`` may be empty."""
        ...
