"""The ranker's client handle as its callers see it: `RANKER` and `RankerHandle`.

Kept apart from ``service`` (numpy, igraph) so that a caller (the memory
tools) can name the handle without loading the ranker.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ...supervisors.context import ServiceKey


class RankerHandle(Protocol):
    """What `service.Ranker` offers its callers."""

    async def recall(
        self,
        query: str,
        scope_ids: Sequence[int] | None = None,
        memory_type: str | None = None,
        limit: int = 10,
        *,
        use_graph: bool | None = None,
        use_lexical: bool | None = None,
        explain: bool = False,
    ) -> list[tuple[int, float]]:
        """Memory ids and scores, best first (``warnings`` attribute: list of str; ``reasons``:
        memory id -> why it was ranked, filled when ``explain``)."""
        ...

    def stats(self) -> dict[str, object]: ...


RANKER: ServiceKey[RankerHandle] = ServiceKey("ranker")
