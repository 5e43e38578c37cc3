"""The embedder's client handle as its callers see it: `EMBEDDER`, `Embedder`,
the `EmbedResult` it answers and the errors it raises.

Kept apart from ``pool`` and ``model`` (numpy, onnxruntime) so that a caller
(the memory tools, the CLI) can name the handle without loading the embedder.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ...protocol.errors import Unavailable
from ...supervisors.context import ServiceKey

if TYPE_CHECKING:
    import numpy as np


class EmbeddingError(Unavailable):
    """Embedding failed; the message says why and what to do (retrying later may succeed)."""


class EmbedderUnavailable(EmbeddingError):
    """The model cannot be loaded (or embeddings are misconfigured)."""


class EmbedderCrashed(EmbeddingError):
    """The worker embedding this batch crashed; it was restarted, a retry may succeed."""


class EmbedderTimeout(EmbeddingError):
    """No answer within ``[embedding] timeout``."""


@dataclass(frozen=True)
class EmbedResult:
    """Vectors of a request's texts.

    ``vectors`` holds the windows of every text in order: one row per text
    when the request allowed one window (``max_chunks = 1``), else
    ``counts[i]`` consecutive rows for text ``i`` (see `rows`).
    ``truncated[i]``: text ``i`` had content that no window covers.
    """

    vectors: np.ndarray  # float32 (rows, dim), L2-normalised
    truncated: list[bool]
    model: str
    revision: str
    counts: list[int] | None = None  # windows per text; None = one each
    max_chunks: int = 1

    def offsets(self) -> list[int]:
        """Row offset of each text's first window, plus the total at the end."""
        counts = self.counts or [1] * len(self.truncated)
        out = [0]
        for c in counts:
            out.append(out[-1] + c)
        return out

    def rows(self, i: int) -> np.ndarray:
        """The windows of text ``i``: float32 (count, dim)."""
        if self.counts is None:
            return self.vectors[i : i + 1]
        start = sum(self.counts[:i])
        return self.vectors[start : start + self.counts[i]]

    @property
    def warnings(self) -> list[str]:
        """One line per truncated text (for a tool's ``warnings`` field)."""
        limit = (
            "the embedding model's token limit"
            if self.max_chunks <= 1
            else f"{self.max_chunks} embedding windows"
        )
        return [f"text {i} was truncated to {limit}" for i, cut in enumerate(self.truncated) if cut]


class Embedder(Protocol):
    """What `pool.EmbedderPool` offers its callers."""

    @property
    def model(self) -> str: ...

    @property
    def revision(self) -> str: ...

    @property
    def dim(self) -> int: ...

    @property
    def max_tokens(self) -> int: ...

    def describe(self) -> dict[str, Any]: ...

    async def load(self) -> None: ...

    async def embed(
        self, texts: list[str], max_chunks: int = 1, *, query: bool = False
    ) -> EmbedResult: ...


EMBEDDER: ServiceKey[Embedder] = ServiceKey("embedder")
