"""What the parser workers accept (see ``pool.ParserPool``)."""

from __future__ import annotations

import msgspec

from ...protocol.messages import Request
from .wire import ParseJob, ParseResult


class Parse(Request, frozen=True, tag=True):
    """Outline a batch of files; the answer is one `ParseResult` per job, in order
    (never an error: a file that cannot be parsed is answered with the reason it
    was skipped).

    ``results`` holds the answers of the first jobs as they come in: a batch
    whose worker process is lost part-way goes back to the mailbox and another
    worker resumes it after them.
    """

    jobs: list[ParseJob]
    results: list[ParseResult] = msgspec.field(default_factory=list)


ParserRequest = Parse
