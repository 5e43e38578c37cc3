"""The ``code`` argument of the memory and knowledge-graph tools: anchors a caller gives."""

from __future__ import annotations

from typing import Annotated

import msgspec

from ..store.interfaces.anchors import MAX_ANCHOR_PATH, MAX_ANCHOR_SYMBOL, MAX_ANCHORS

__all__ = ["Code", "CodeArg"]


# One code anchor: a file relative to the repository root, and a symbol in it as
# ``find_symbol`` names it ("RetryPolicy.backoff"); no symbol: the whole file. (No
# docstring: msgspec would put it in every tool's schema, and tools/list has a budget.)
class CodeArg(msgspec.Struct, forbid_unknown_fields=True):
    path: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_ANCHOR_PATH)]
    symbol: Annotated[str, msgspec.Meta(max_length=MAX_ANCHOR_SYMBOL)] = ""


Code = Annotated[
    list[CodeArg],
    msgspec.Meta(
        max_length=MAX_ANCHORS,
        description="absent: found in text; []: none",
    ),
]
