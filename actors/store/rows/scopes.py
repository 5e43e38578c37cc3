"""Where scopes are linked, the same on both backends (`interfaces.scopes`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from ..interfaces.upkeep import Scoped
from .sql import Rows

# The table linking each kind of row to its scopes (names from here, never from input).
SCOPE_LINKS: dict[Scoped, str] = {
    "entity": "entity_scopes",
    "relation": "relation_scopes",
    "memory": "memory_scopes",
}


def scope_link(kind: Scoped) -> tuple[str, str]:
    """(table, item column) linking rows of ``kind`` to their scopes."""
    return SCOPE_LINKS[kind], f"{kind}_id"


class ScopesBase(Rows):
    """`interfaces.scopes.Scopes`' shared bodies; each backend names its statements and
    writes the ownership queries (`foreign_owners`, `has_foreign_owner`, `release`)."""

    SCOPE_ID: ClassVar[str]  # (name,)
    ADD: ClassVar[str]  # (name,): the id
    OF_MEMORY: ClassVar[str]  # (memory id,): (name,) rows by name
    MEMORY_COUNTS = (
        "SELECT s.name, count(ms.memory_id) FROM scopes s"
        " LEFT JOIN memory_scopes ms ON ms.scope_id = s.id GROUP BY s.id"
    )

    def ensure(self, name: str) -> int:
        # The caller holds the write lock: no other writer inserts the name in between.
        row = self.first(self.SCOPE_ID, (name,))
        return int(row[0]) if row else self.insert_id(self.ADD, (name,))

    def ids(self, names: Sequence[str]) -> dict[str, int]:
        out: dict[str, int] = {}
        for part in self.parts(list(dict.fromkeys(names))):
            test, params = self.one_of(part)
            out.update(
                (n, int(i))
                for n, i in self.all(f"SELECT name, id FROM scopes WHERE name {test}", params)
            )
        return out

    def of_memory(self, memory_id: int) -> list[str]:
        return [r[0] for r in self.all(self.OF_MEMORY, (memory_id,))]

    def memory_counts(self) -> dict[str, int]:
        return {r[0]: int(r[1]) for r in self.all(self.MEMORY_COUNTS)}
