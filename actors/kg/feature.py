"""The knowledge-graph feature: 26 tools over the memory store (no actors of its own)."""

from __future__ import annotations

from ...supervisors.context import AppContext, NoActors
from .tools import TOOLS

INSTRUCTIONS = (
    "memtrio knowledge graph: entities {name, entityType, observations}, relations {from, to, relationType} "
    "in active voice, with the reference memory server's tools (create_entities, search_nodes, open_nodes, ...) "
    "and more (find_path, get_neighbors, merge_entities, ...). Large answers are paginated: pass offset and "
    "limit, follow nextOffset (null on the last page); mode=summary (observation counts) or names keeps pages small. A call takes "
    "at most 1,000 items; names are at most 1,024 bytes, observations 65,536. Observations are memories, so "
    "recall finds them too."
)


class _GraphFeature:
    name = "kg"

    def setup(self, app: AppContext) -> NoActors:
        app.add_tools(TOOLS)
        if any(app.registry.get(t.name) is not None for t in TOOLS):
            app.instructions.append(INSTRUCTIONS)
        return NoActors()


FEATURE = _GraphFeature()
