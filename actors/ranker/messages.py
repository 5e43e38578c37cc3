"""What the Ranker actor accepts (see ``service.Ranker.serve``)."""

from __future__ import annotations

import numpy as np

from ...protocol.messages import Request
from .rank import Params


class Recall(Request, tag=True, frozen=True):
    """Rank memories for ``query`` (its embedding ``qvec``; ``tvec``: that of the query
    without its names, `rerank.topic_query`) within ``scopes`` (scope row ids;
    None: every scope), optionally of one ``memory_type``; at most ``limit``.

    ``lexical`` holds the FTS5 candidates the caller fetched beforehand. The
    answer is a list of (memory id, score), best first; a failure is a
    `RankerError` (the caller then ranks lexically).
    """

    query: str
    qvec: np.ndarray
    scopes: tuple[int, ...] | None
    memory_type: str | None
    limit: int
    params: Params
    lexical: list[tuple[int, float]] | None = None
    explain: bool = False  # answer (ranking, reasons) with reasons per memory id
    tvec: np.ndarray | None = None  # the embedding of `rerank.topic_query` (None: no names)


RankerRequest = Recall
