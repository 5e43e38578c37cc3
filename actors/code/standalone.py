"""The code service outside a server: for tools and tests that index a checkout directly.

`standalone_service` opens ``home``'s code index and runs the parser workers under a
supervisor of their own, as the server's code feature does, and ends both on exit.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from ...supervisors.supervisor import Supervisor
from .index import CodeIndex, index_path
from .pool import ParserPool
from .service import CodeService
from .wire import ParseJob, ParseResult


@asynccontextmanager
async def standalone_service(
    home: Path,
    *,
    workers: int = 2,
    file_timeout: float = 10.0,
    max_files: int = 20_000,
    name: str = "code",
) -> AsyncIterator[tuple[CodeService, Supervisor]]:
    """The code service on ``home``'s index and the supervisor of its parser workers
    (``code.parsers`` is its child); both stopped, and the index closed, on exit."""
    pool = ParserPool(workers, file_timeout)
    service = CodeService(CodeIndex(index_path(home)), pool, max_files)
    sup = Supervisor(name, pool.children())
    async with trio.open_nursery() as nursery:
        await nursery.start(sup.run)
        try:
            yield service, sup
        finally:
            await sup.stop()
            service.index.close()


def count_parses(service: CodeService) -> list[str]:
    """The paths ``service``'s parser pool is asked to parse from now on (a spy on the
    one pool, for tests and the evaluation's "no re-parse" figure)."""
    parsed: list[str] = []
    original = service.pool.parse_batch

    async def counting(jobs: list[ParseJob]) -> list[ParseResult]:
        parsed.extend(job.path for job in jobs)
        return await original(jobs)

    service.pool.parse_batch = counting  # type: ignore[method-assign]  # a spy on one instance
    return parsed
