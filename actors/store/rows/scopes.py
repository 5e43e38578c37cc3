"""Where scopes are linked, the same on both backends (`interfaces.scopes`)."""

from __future__ import annotations

from ..interfaces.upkeep import Scoped

# The table linking each kind of row to its scopes (names from here, never from input).
SCOPE_LINKS: dict[Scoped, str] = {
    "entity": "entity_scopes",
    "relation": "relation_scopes",
    "memory": "memory_scopes",
}


def scope_link(kind: Scoped) -> tuple[str, str]:
    """(table, item column) linking rows of ``kind`` to their scopes."""
    return SCOPE_LINKS[kind], f"{kind}_id"
