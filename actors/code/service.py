"""`CodeService`: refreshes the code index of a checkout and answers from it.

The tools (and ``memtrio code index``) hold this handle as
`CODE`. A refresh lists the checkout's files with Git,
stats them, and re-parses, through the parser pool, only the files whose size
or mtime differ from what the index holds; results are written in batches, in
one database thread, while the workers keep parsing.

Concurrency: one refresh per checkout at a time (a per-checkout lock); the
SQLite connection is used from one thread at a time (a capacity limiter of 1).
"""

from __future__ import annotations

import math
import os
import sqlite3
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from ...protocol.tools import ToolError
from ...supervisors import trace
from ...supervisors.context import ServiceKey
from .checkout import Listing, stat_files
from .files import CheckoutDir, Symlink, Unsafe
from .index import CodeIndex
from .languages import language_for
from .pool import PIPELINE, ParserPool
from .wire import CHANGED, ParseJob, ParseResult

BATCH = 256  # parse results written per transaction
# Reasons that say nothing about the file itself: such files are parsed again next time.
_TRANSIENT = (
    "parser workers are down",
    "no parser worker answered",
    "parser worker stopped",
    CHANGED,
)

Progress = Callable[[int, int], None]


@dataclass
class RefreshReport:
    root: Path
    source_files: int  # supported files in the checkout
    indexed: int  # files covered by the index (at most max_files)
    parsed: int  # files (re)parsed by this refresh
    seconds: float
    truncated: bool
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason), whole index


class CodeService:
    def __init__(self, index: CodeIndex, pool: ParserPool, max_files: int) -> None:
        self.index = index
        self.pool = pool
        self.max_files = max_files
        self._db_limiter = trio.CapacityLimiter(1)
        self._locks: dict[Path, trio.Lock] = {}
        self._maps: dict[Path, tuple[int, dict[str, tuple[int, int]]]] = {}
        self._truncated: dict[Path, tuple[int, int]] = {}
        self._listings: dict[Path, Listing] = {}
        self._counts: dict[Path, tuple[int, int]] = {}

    async def db(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await trio.to_thread.run_sync(fn, *args, limiter=self._db_limiter)

    def _lock(self, root: Path) -> trio.Lock:
        lock = self._locks.get(root)
        if lock is None:
            lock = self._locks[root] = trio.Lock()
        return lock

    async def _file_map(self, root: Path) -> tuple[int, dict[str, tuple[int, int]]]:
        cached = self._maps.get(root)
        if cached is None:

            def load() -> tuple[int, dict[str, tuple[int, int]]]:
                cid = self.index.checkout_id(str(root))
                return cid, self.index.file_map(cid)

            cached = self._maps[root] = await self._guarded(load)
        return cached

    async def _guarded(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run a database call.

        Error handling: a corrupt index file is deleted and recreated (empty), and
        the call fails with a `ToolError` asking to retry (the next call rebuilds
        what it needs); any other SQLite failure (busy, disk full, read-only)
        becomes a `ToolError` naming it and leaves the file alone.
        """
        try:
            return await self.db(fn, *args)
        except sqlite3.DatabaseError as exc:
            if not _is_corruption(exc):
                raise ToolError(
                    f"the code index {self.index.path} failed: {exc}; retry later"
                ) from None
            trace.warning("code", "index_corrupt", path=str(self.index.path), error=str(exc))
            self._maps.clear()
            self._counts.clear()
            await self.db(self.index.recreate)
            raise ToolError(
                "the code index was corrupt and has been recreated; retry the call"
            ) from None

    # -- refreshing ------------------------------------------------------------

    async def refresh(
        self, root: Path, progress: Progress | None = None, want_skipped: bool = False
    ) -> RefreshReport:
        """Bring the index of ``root`` up to date with the files on disk.

        ``want_skipped`` also lists every file of the index that is not indexed
        (and why) in the report.
        """
        async with self._lock(root):
            t0 = time.perf_counter()
            listing = self._listings.get(root)
            if listing is None:
                listing = self._listings[root] = Listing(root)
            listing = await listing.current()
            total = len(listing)
            truncated = total > self.max_files
            listing = listing[: self.max_files]
            stats = await trio.to_thread.run_sync(stat_files, root, listing)
            cid, known = await self._file_map(root)
            todo: list[tuple[str, str, os.stat_result]] = []
            links: list[tuple[str, str, int, int, ParseResult]] = []
            current: set[str] = set()
            for path, language, st in stats:
                current.add(path)
                if st is None:  # a symlink: recorded as not indexed, never followed
                    if known.get(path) != (-1, -1):
                        links.append((path, language, -1, -1, ParseResult(skipped="symlink")))
                elif known.get(path) != (st.st_size, st.st_mtime_ns):
                    todo.append((path, language, st))
            deleted = [path for path in known if path not in current]
            if links or deleted:
                await self._guarded(self.index.apply, cid, links, deleted)
                for path in deleted:
                    known.pop(path, None)
                for path, _, size, mtime, _ in links:
                    known[path] = (size, mtime)
            if todo:
                await self._parse_all(root, cid, known, todo, progress)
            indexed = len(current)
            if todo or links or deleted or self._counts.get(root) != (total, indexed):
                await self._guarded(self.index.set_counts, cid, total, indexed, time.time())
                self._counts[root] = (total, indexed)
            self._truncated[root] = (total, indexed) if truncated else (0, 0)
            skipped = await self._guarded(self.index.skipped_files, cid) if want_skipped else []
            report = RefreshReport(
                root, total, indexed, len(todo), time.perf_counter() - t0, truncated, skipped
            )
            if todo:
                trace.event(
                    "code",
                    "refreshed",
                    root=str(root),
                    files=indexed,
                    parsed=len(todo),
                    seconds=round(report.seconds, 3),
                    truncated=truncated,
                )
            return report

    async def _parse_all(
        self,
        root: Path,
        cid: int,
        known: dict[str, tuple[int, int]],
        todo: list[tuple[str, str, os.stat_result]],
        progress: Progress | None,
    ) -> None:
        send, receive = trio.open_memory_channel[tuple[str, str, int, int, ParseResult]](math.inf)
        jobs = iter(todo)
        done = 0

        async def parse_some(send: trio.MemorySendChannel) -> None:
            async with send:
                for path, language, st in jobs:
                    result = await self.pool.parse(_job(root, path, language, st))
                    await send.send((path, language, st.st_size, st.st_mtime_ns, result))

        async def write_all() -> None:
            nonlocal done
            batch: list[tuple[str, str, int, int, ParseResult]] = []

            async def flush() -> None:
                rows = []
                for path, language, size, mtime, result in batch:
                    if result.size >= 0:
                        size, mtime = result.size, result.mtime_ns
                    if result.outline is None and result.skipped.startswith(_TRANSIENT):
                        size = mtime = -1  # try again at the next refresh
                    rows.append((path, language, size, mtime, result))
                await self._guarded(self.index.apply, cid, rows, ())
                for path, _, size, mtime, _ in rows:
                    known[path] = (size, mtime)
                batch.clear()

            async for item in receive:
                batch.append(item)
                done += 1
                if progress is not None:
                    progress(done, len(todo))
                if len(batch) >= BATCH:
                    await flush()
            if batch:
                await flush()

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(write_all)
                async with send:
                    # One job more per worker than its pipe holds keeps every pipe full.
                    for _ in range(max(1, (PIPELINE + 1) * self.pool.workers)):
                        nursery.start_soon(parse_some, send.clone())
        except BaseExceptionGroup as group:
            # A database failure reported by the writer: raise it as itself.
            errors, others = group.split(ToolError)
            if errors is not None and others is None:
                first: BaseException = errors
                while isinstance(first, BaseExceptionGroup):
                    first = first.exceptions[0]
                raise first from None
            raise

    # -- answering -------------------------------------------------------------

    def truncation(self, root: Path) -> tuple[int, int]:
        """(source files, indexed files) when the last refresh hit max_files, else (0, 0)."""
        return self._truncated.get(root, (0, 0))

    async def file_outline(self, root: Path, rel: str) -> tuple[str, str, list[tuple[Any, ...]]]:
        """(language, coverage, symbol rows) of one file, re-indexed first when it changed."""
        language = language_for(rel)
        if language is None:
            raise ToolError(
                f"{rel}: unsupported file type (supported: see the code tools' documentation)"
            )
        st = _checked_stat(root, rel)
        async with self._lock(root):
            cid, known = await self._file_map(root)
            if known.get(rel) != (st.st_size, st.st_mtime_ns):
                result = await self.pool.parse(_job(root, rel, language, st))
                size, mtime = (
                    (result.size, result.mtime_ns)
                    if result.size >= 0
                    else (st.st_size, st.st_mtime_ns)
                )
                if result.outline is None and result.skipped.startswith(_TRANSIENT):
                    size = mtime = -1
                await self._guarded(
                    self.index.apply, cid, [(rel, language, size, mtime, result)], ()
                )
                known[rel] = (size, mtime)
            entry = await self._guarded(self.index.file_entry, cid, rel)
        if entry is None:
            raise ToolError(f"{rel} could not be indexed")
        fid, language, _, _, coverage, skipped = entry
        if skipped is not None:
            raise ToolError(f"{rel} is not indexed: {skipped}")
        rows = await self._guarded(self.index.file_symbols, fid)
        return language, coverage or "complete", rows

    async def find(
        self, root: Path, query: str, kind: str | None, limit: int
    ) -> tuple[list[tuple[Any, ...]], int]:
        await self.refresh(root)
        cid, _ = await self._file_map(root)
        return await self._guarded(self.index.find, cid, query, kind, limit)


def _job(root: Path, rel: str, language: str, st: os.stat_result) -> ParseJob:
    """Parse the checkout file ``rel`` if it is still the file ``st`` describes."""
    return ParseJob(rel, language, root=str(root), dev=st.st_dev, ino=st.st_ino)


def _checked_stat(root: Path, rel: str) -> os.stat_result:
    """lstat of a caller's file, reached without following symlinks; a regular file.

    Error handling: `ToolError` saying why the file is refused.
    """
    try:
        with CheckoutDir(str(root)) as tree:
            st = tree.lstat(rel)
    except Symlink:
        raise ToolError(f"path {rel!r} goes through a symlink; symlinks are refused") from None
    except Unsafe as exc:
        raise ToolError(f"cannot read {rel}: {exc}") from None
    except OSError as exc:
        raise ToolError(f"cannot read {rel}: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ToolError(f"path {rel!r} is not a regular file")
    return st


def _is_corruption(exc: sqlite3.DatabaseError) -> bool:
    if isinstance(exc, sqlite3.OperationalError):
        return False  # busy, locked, disk full, read-only: the file itself is fine
    text = str(exc).lower()
    return any(word in text for word in ("malformed", "not a database", "corrupt", "quick_check"))


CODE: ServiceKey[CodeService] = ServiceKey("code")
