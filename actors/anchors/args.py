"""The ``code`` argument of the memory and knowledge-graph tools: anchors a caller gives."""

from __future__ import annotations

from typing import Annotated

import msgspec

from ..store.interfaces.anchors import MAX_ANCHOR_PATH, MAX_ANCHOR_SYMBOL, MAX_ANCHORS

__all__ = ["Code", "CodeArg"]


class CodeArg(msgspec.Struct, forbid_unknown_fields=True):
    path: Annotated[
        str,
        msgspec.Meta(
            min_length=1,
            max_length=MAX_ANCHOR_PATH,
            description="the file, relative to the repository's root (POSIX slashes)",
        ),
    ]
    symbol: Annotated[
        str,
        msgspec.Meta(
            max_length=MAX_ANCHOR_SYMBOL,
            description='a symbol in it as find_symbol names it ("RetryPolicy.backoff"); "" or absent: the whole file',
        ),
    ] = ""


Code = Annotated[
    list[CodeArg],
    msgspec.Meta(
        max_length=MAX_ANCHORS,
        description="the code it describes (anchors, checked for staleness later); absent: found in "
        "the text (paths and names that resolve to one file or symbol); []: none",
    ),
]
