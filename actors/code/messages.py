"""What the parser workers accept (see ``pool.ParserPool``)."""

from __future__ import annotations

from ...protocol.messages import Request
from .wire import ParseJob


class Parse(Request, tag=True):
    """Outline one file; the answer is a `ParseResult` (never an error: a file that cannot
    be parsed is answered with the reason it was skipped)."""

    job: ParseJob


ParserRequest = Parse
