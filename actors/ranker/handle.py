"""The ranker's client handle as its callers see it: `RANKER`, `RankerHandle` and `Ranked`.

Kept apart from ``service`` (numpy, igraph) so that a caller (the memory
tools) can name the handle without loading the ranker.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from ...supervisors.context import ServiceKey


class Ranked(list[tuple[int, float]]):
    """A list of (memory id, score), best first, with ``warnings`` (list of str) and
    ``reasons`` (memory id -> why it was ranked; filled on request)."""

    warnings: list[str]
    reasons: dict[int, list[str]]

    def __init__(
        self,
        items: Iterable[tuple[int, float]] = (),
        warnings: list[str] | None = None,
        reasons: dict[int, list[str]] | None = None,
    ) -> None:
        super().__init__(items)
        self.warnings = warnings or []
        self.reasons = reasons or {}


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
    ) -> Ranked:
        """Memory ids and scores, best first, with their `Ranked.warnings` and (when
        ``explain``) `Ranked.reasons`."""
        ...

    def stats(self) -> dict[str, object]: ...


RANKER: ServiceKey[RankerHandle] = ServiceKey("ranker")
