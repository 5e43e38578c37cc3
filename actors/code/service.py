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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import trio

from ...protocol.errors import BadArgument, DomainError, Unavailable
from ...supervisors import trace
from ...supervisors.context import ServiceKey
from ...supervisors.git import GitError, git
from ...supervisors.supervisor import first_leaf
from .anchors import (
    MAX_PATH,
    AnchorError,
    CodeTarget,
    TargetState,
    candidates,
    check_wanted,
    find_all,
    near_all,
    resolve_all,
    state_of,
    states_in_place,
)
from .checkout import Listing, checked_stat, has_control, resolve_path, stat_files
from .diff import file_change_diff
from .files import CheckoutDir, Unsafe
from .index import CodeIndex, FileRow, MatchRow, SymbolRow
from .languages import language_for
from .pool import PIPELINE, ParserPool
from .wire import CHANGED, ParseJob, ParseResult

BATCH = 256  # parse results written per transaction
# Files sent to one worker at a time: several per frame saves the server and the
# workers a round trip per file (see `_batches`).
MAX_PARSE_BATCH = 16
# Reasons that say nothing about the file itself: such files are parsed again next time.
_TRANSIENT = (
    "parser workers are down",
    "no parser worker answered",
    "parser worker stopped",
    CHANGED,
)
# Reasons a status check parses a file again before answering: the file may be fine.
_RETRIED = (*_TRANSIENT, "parser worker")

Progress = Callable[[int, int], None]
# path -> (size, mtime_ns) of every file the index holds for one checkout.
FileMap = dict[str, tuple[int, int]]
# A file to parse: (path, language, its lstat).
ToParse = tuple[str, str, os.stat_result]
T = TypeVar("T")


@dataclass
class RefreshReport:
    root: Path
    source_files: int  # supported files in the checkout
    indexed: int  # files covered by the index (at most max_files)
    parsed: int  # files (re)parsed by this refresh
    seconds: float
    truncated: bool
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason), whole index


@dataclass
class _Changes:
    """How the files on disk differ from the index."""

    todo: list[ToParse]  # new or changed files, to parse
    links: list[FileRow]  # symlinks not yet recorded as such
    deleted: list[str]  # indexed paths no longer listed
    listed: int  # files listed (and stat'ed)

    @property
    def any(self) -> bool:
        return bool(self.todo or self.links or self.deleted)


class CodeService:
    def __init__(self, index: CodeIndex, pool: ParserPool, max_files: int) -> None:
        self.index = index
        self.pool = pool
        self.max_files = max_files
        self._db_limiter = trio.CapacityLimiter(1)
        self._locks: dict[Path, trio.Lock] = {}
        self._maps: dict[Path, tuple[int, FileMap]] = {}
        self._truncated: dict[Path, tuple[int, int]] = {}
        self._listings: dict[Path, Listing] = {}
        # The paths the last refresh indexed from each checkout's listing (the listing's
        # first max_files files), with that listing's file list (by identity).
        self._listed: dict[Path, tuple[list[tuple[str, str]], frozenset[str]]] = {}
        self._counts: dict[Path, tuple[int, int]] = {}

    async def db(self, fn: Callable[..., T], *args: object) -> T:
        return await trio.to_thread.run_sync(fn, *args, limiter=self._db_limiter)

    def _lock(self, root: Path) -> trio.Lock:
        lock = self._locks.get(root)
        if lock is None:
            lock = self._locks[root] = trio.Lock()
        return lock

    async def _file_map(self, root: Path) -> tuple[int, FileMap]:
        cached = self._maps.get(root)
        if cached is None:

            def load() -> tuple[int, FileMap]:
                cid = self.index.checkout_id(str(root))
                return cid, self.index.file_map(cid)

            cached = self._maps[root] = await self._guarded(load)
        return cached

    async def _guarded(self, fn: Callable[..., T], *args: object) -> T:
        """Run a database call.

        Error handling: a corrupt index file is deleted and recreated (empty), and
        the call fails with `Unavailable` asking to retry (the next call rebuilds
        what it needs); any other SQLite failure (busy, disk full, read-only)
        becomes `Unavailable` naming it and leaves the file alone.
        """
        try:
            return await self.db(fn, *args)
        except sqlite3.DatabaseError as exc:
            if not _is_corruption(exc):
                raise Unavailable(
                    f"the code index {self.index.path} failed: {exc}; retry later"
                ) from None
            trace.warning("code", "index_corrupt", path=str(self.index.path), error=str(exc))
            self._maps.clear()
            self._counts.clear()
            await self.db(self.index.recreate)
            raise Unavailable(
                "the code index was corrupt and has been recreated; retry the call"
            ) from None

    async def _store(
        self, cid: int, known: FileMap, rows: list[FileRow], deleted: Sequence[str] = ()
    ) -> None:
        """Write parse results and drop ``deleted`` in one transaction, then remember
        what the index now holds in ``known``."""
        await self._guarded(self.index.apply, cid, rows, deleted)
        for path in deleted:
            known.pop(path, None)
        for path, _, size, mtime, _ in rows:
            known[path] = (size, mtime)

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
            cid, known = await self._file_map(root)
            listing, changes = await self._scan(root, known)
            total = len(listing)
            truncated = total > self.max_files
            if changes.links or changes.deleted:
                await self._store(cid, known, changes.links, changes.deleted)
            if changes.todo:
                bulk = await self._guarded(self.index.begin_bulk, len(changes.todo))
                try:
                    await self._parse_all(root, cid, known, changes.todo, progress)
                finally:
                    if bulk:  # the lookup indexes are built again, also when cancelled
                        with trio.CancelScope(shield=True):
                            await self._guarded(self.index.create_lookup_indexes)
            indexed = changes.listed
            if changes.any or self._counts.get(root) != (total, indexed):
                await self._guarded(self.index.set_counts, cid, total, indexed, time.time())
                self._counts[root] = (total, indexed)
            self._truncated[root] = (total, indexed) if truncated else (0, 0)
            skipped = await self._guarded(self.index.skipped_files, cid) if want_skipped else []
            report = RefreshReport(
                root,
                total,
                indexed,
                len(changes.todo),
                time.perf_counter() - t0,
                truncated,
                skipped,
            )
            if changes.todo:
                trace.event(
                    "code",
                    "refreshed",
                    root=str(root),
                    files=indexed,
                    parsed=len(changes.todo),
                    seconds=round(report.seconds, 3),
                    truncated=truncated,
                )
            return report

    def _listing(self, root: Path) -> Listing:
        listing = self._listings.get(root)
        if listing is None:
            listing = self._listings[root] = Listing(root)
        return listing

    async def _scan(self, root: Path, known: FileMap) -> tuple[list[tuple[str, str]], _Changes]:
        """The checkout's listing and how its files differ from ``known``. While the
        listing is unchanged (no Git call needed), one thread call does it all: the
        listing check, the stat pass and the comparison. Called under the checkout's lock."""
        cached = self._listing(root)

        def compare(files: list[tuple[str, str]]) -> _Changes:
            return _compare(stat_files(root, files[: self.max_files]), known)

        def unchanged() -> tuple[list[tuple[str, str]], _Changes] | None:
            if cached.changed():
                return None
            return cached.files, compare(cached.files)

        got = await trio.to_thread.run_sync(unchanged)
        if got is None:
            files = await cached.current()
            got = files, await trio.to_thread.run_sync(compare, files)
        files = got[0]
        if self._listed.get(root, (None,))[0] is not files:
            self._listed[root] = (files, frozenset(path for path, _ in files[: self.max_files]))
        return got

    async def _parse_all(
        self,
        root: Path,
        cid: int,
        known: FileMap,
        todo: list[ToParse],
        progress: Progress | None,
    ) -> None:
        """Parse ``todo`` through the pool while one task writes the results in batches.

        Error handling: a `DomainError` of the writer (the index failed) is raised
        as itself, not inside an exception group.
        """
        send, receive = trio.open_memory_channel[list[FileRow]](math.inf)
        batches = iter(_batches(todo, self.pool.workers))

        async def parse_some(send: trio.MemorySendChannel[list[FileRow]]) -> None:
            async with send:
                for batch in batches:
                    results = await self.pool.parse_batch(
                        [_job(root, path, language, st) for path, language, st in batch]
                    )
                    await send.send(
                        [
                            (path, language, st.st_size, st.st_mtime_ns, result)
                            for (path, language, st), result in zip(batch, results, strict=True)
                        ]
                    )

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._write_all, cid, known, receive, len(todo), progress)
                async with send:
                    # One job more per worker than its pipe holds keeps every pipe full.
                    for _ in range(max(1, (PIPELINE + 1) * self.pool.workers)):
                        nursery.start_soon(parse_some, send.clone())
        except BaseExceptionGroup as group:
            errors, others = group.split(DomainError)
            if errors is not None and others is None:
                raise first_leaf(errors) from None
            raise

    async def _write_all(
        self,
        cid: int,
        known: FileMap,
        receive: trio.MemoryReceiveChannel[list[FileRow]],
        total: int,
        progress: Progress | None,
    ) -> None:
        batch: list[FileRow] = []
        done = 0
        async for rows in receive:
            for row in rows:
                batch.append(_stored_row(*row))
                done += 1
                if progress is not None:
                    progress(done, total)
            if len(batch) >= BATCH:
                await self._store(cid, known, batch)
                batch = []
        if batch:
            await self._store(cid, known, batch)

    # -- answering -------------------------------------------------------------

    def truncation(self, root: Path) -> tuple[int, int]:
        """(source files, indexed files) when the last refresh hit max_files, else (0, 0)."""
        return self._truncated.get(root, (0, 0))

    async def file_outline(self, root: Path, rel: str) -> tuple[str, str, list[SymbolRow]]:
        """(language, coverage, symbol rows) of one file, re-indexed first when it changed."""
        language = language_for(rel)
        if language is None:
            raise BadArgument(
                f"{rel}: unsupported file type (supported: see the code tools' documentation)"
            )
        st = checked_stat(root, rel)
        async with self._lock(root):
            cid, known = await self._file_map(root)
            if known.get(rel) != (st.st_size, st.st_mtime_ns):
                result = await self.pool.parse(_job(root, rel, language, st))
                row = _stored_row(rel, language, st.st_size, st.st_mtime_ns, result)
                await self._store(cid, known, [row])
            entry = await self._guarded(self.index.file_entry, cid, rel)
        if entry is None:
            raise Unavailable(f"{rel} could not be indexed")
        fid, language, _, _, coverage, skipped = entry
        if skipped is not None:
            why = f"{rel} is not indexed: {skipped}"
            raise Unavailable(why) if skipped.startswith(_TRANSIENT) else BadArgument(why)
        rows = await self._guarded(self.index.file_symbols, fid)
        return language, coverage or "complete", rows

    async def find(
        self, root: Path, query: str, kind: str | None, limit: int
    ) -> tuple[list[MatchRow], int]:
        await self.refresh(root)
        cid, _ = await self._file_map(root)
        return await self._guarded(self.index.find, cid, query, kind, limit)

    # -- code anchors ------------------------------------------------------------

    async def _settle(self, root: Path, cid: int, paths: set[str]) -> None:
        """Parse again the files among ``paths`` that the last parse of failed for a
        reason that says nothing about the file (a worker crashed, hung or was down).

        Error handling: `Unavailable` naming the file when it fails again.
        """

        def failed() -> list[tuple[str, str]]:
            out = []
            for path in sorted(paths):
                entry = self.index.file_state(cid, path)
                if entry is not None and entry[1] is not None and entry[1].startswith(_RETRIED):
                    out.append((path, entry[1]))
            return out

        retry = await self._guarded(failed)
        if not retry:
            return
        async with self._lock(root):
            _, known = await self._file_map(root)
            for path, _ in retry:
                known[path] = (-1, -1)  # differs from any file on disk: parsed again
        await self.refresh(root)
        still = await self._guarded(failed)
        if still:
            path, reason = still[0]
            raise Unavailable(
                f"the code of {path} could not be read ({reason}), so its anchors' status is"
                " not known; retry"
            )

    async def resolve_targets(
        self, root: Path, wanted: Sequence[tuple[str, str]]
    ) -> list[CodeTarget]:
        """The targets of explicit anchors: (path relative to ``root`` or absolute
        inside it, symbol or "" for the whole file), without duplicates.

        Error handling: `AnchorError` (a `BadArgument`) naming the anchor when its
        path is refused by the path rules, is not a supported source file, is not
        indexed, or its symbol is not in the file or is ambiguous.
        """
        checked = check_wanted(wanted)
        rels = []
        for number, (path, symbol) in enumerate(checked, start=1):
            rel = await trio.to_thread.run_sync(_relative, root, number, path)
            if language_for(rel) is None:
                raise AnchorError(
                    f"code anchor {rel}: not a supported source file; anchor a source file"
                    " (see the code tools' languages), or leave code out"
                )
            rels.append((rel, symbol))
        if not rels:
            return []
        cid = await _indexed(self, root)
        await self._settle(root, cid, {rel for rel, _ in rels})
        return await self._guarded(resolve_all, self.index, cid, rels)

    async def find_targets(self, root: Path, text: str, limit: int = 8) -> list[CodeTarget]:
        """The files and symbols a memory's text names, each resolving to exactly one
        file or symbol of the checkout (ambiguous and unknown names give nothing), at
        most ``limit``. Reads at most `anchors.MAX_TEXT` characters, in a worker thread
        and in time linear in the text, and looks up at most `anchors.MAX_CANDIDATES` names."""
        found = await trio.to_thread.run_sync(candidates, text)
        if not found or limit <= 0:
            return []
        cid = await _indexed(self, root)
        _, known = await self._file_map(root)
        return await self._guarded(find_all, self.index, cid, found, list(known), limit)

    async def target_states(self, root: Path, targets: Sequence[CodeTarget]) -> list[TargetState]:
        """The status of each target, in order: fresh, changed, moved or deleted.

        Error handling: `Unavailable` when a target's file could not be parsed
        (a worker crashed or hung on it) twice in a row.
        """
        if not targets:
            return []
        async with self._lock(root):
            settled = await self._guarded(self._states_in_place, root, targets)
        if settled is not None:
            return settled
        cid = await _indexed(self, root)
        await self._settle(root, cid, {t.path for t in targets})

        def states() -> list[TargetState]:
            return [state_of(self.index, cid, target) for target in targets]

        return await self._guarded(states)

    def _states_in_place(  # noqa: C901
        self, root: Path, targets: Sequence[CodeTarget]
    ) -> list[TargetState] | None:
        """The statuses of ``targets`` when the index already holds the working tree's
        version of each target's file and each is ``fresh`` or ``changed`` in place
        (`anchors.states_in_place`), else None (the caller refreshes and checks everything).

        Up to date means: the checkout's listing is unchanged since the last refresh
        took it (no file added, removed or newly ignored), the file is among the
        files that refresh indexed, its size and mtime on disk are those the index
        holds, and its last parse did not fail for a reason that says nothing about
        the file. Those files' statuses are then what a full refresh would give, so
        the other files of the checkout are not stat'ed. Runs in the database thread,
        under the checkout's lock.
        """
        cached = self._maps.get(root)
        listing = self._listings.get(root)
        listed = self._listed.get(root)
        if cached is None or listing is None or listed is None or listed[0] is not listing.files:
            return None
        if listing.changed():
            return None
        cid, known = cached
        paths = sorted({t.path for t in targets})
        with CheckoutDir(str(root)) as tree:
            for path in paths:
                if path not in listed[1] or (held := known.get(path)) is None:
                    return None
                try:
                    st = tree.lstat(path)
                except (Unsafe, OSError):
                    return None
                if not stat.S_ISREG(st.st_mode) or held != (st.st_size, st.st_mtime_ns):
                    return None
        entries = self.index.file_states(cid, paths)
        for path in paths:
            entry = entries.get(path)
            if entry is None or (entry[1] is not None and entry[1].startswith(_RETRIED)):
                return None
        states = []
        for state in states_in_place(self.index, cid, targets):
            if state is None:
                return None  # moved or deleted: decided by the whole, refreshed, index
            states.append(state)
        return states

    async def head_commit(self, root: Path) -> str:
        """The commit checked out at ``root`` (HEAD), or "" outside Git or before the first commit."""
        try:
            out = await git(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], root)
        except (GitError, OSError):
            return ""
        sha = out.decode("ascii", "replace").strip()
        return sha if len(sha) in (40, 64) and all(c in "0123456789abcdef" for c in sha) else ""

    async def near(self, root: Path, code: str) -> list[tuple[str, str]]:
        """(path, symbol) pairs of the code around ``code`` (a path, ``path:symbol``,
        or a symbol name): the file or the symbols it names; a file's symbols, a
        symbol's nested symbols; and the files that import that file (one hop of the
        index: imports; call sites are not indexed). A name nothing in the index
        matches comes back as ("", name). At most `anchors.MAX_NEAR` pairs.

        Error handling: `BadArgument` for an empty, over-long or control-character ``code``.
        """
        code = code.strip()
        if not code or len(code) > MAX_PATH or has_control(code):
            raise BadArgument(
                f"code must be a file path or a symbol name of at most {MAX_PATH} characters"
            )
        cid = await _indexed(self, root)
        _, known = await self._file_map(root)
        return await self._guarded(near_all, self.index, cid, code, list(known))

    async def anchor_diff(self, root: Path, commit: str, path: str, limit: int) -> str:
        """The structural diff (`code_diff`'s symbol lines) of ``path`` from ``commit`` to
        the working tree, at most ``limit`` symbol lines; "" when no symbol changed
        (or ``commit`` is "")."""
        if not commit:
            return ""
        return await file_change_diff(self.pool, root, commit, path, limit)


# -- code anchors (see `anchors`) ---------------------------------------------------
# Each method takes the checkout root (as `checkout.checkout_root` gives it) and
# first brings that checkout's index up to date (only changed files are parsed).


async def _indexed(service: CodeService, root: Path) -> int:
    await service.refresh(root)
    cid, _ = await service._file_map(root)
    return cid


def _relative(root: Path, number: int, path: str) -> str:
    try:
        return resolve_path(root, path)
    except DomainError as exc:
        raise AnchorError(f"code anchor {number} ({path!r}): {exc}") from None


def _compare(stats: list[tuple[str, str, os.stat_result | None]], known: FileMap) -> _Changes:
    """What differs between the files on disk (``stats``, see `stat_files`) and the index."""
    todo: list[ToParse] = []
    links: list[FileRow] = []
    current: set[str] = set()
    for path, language, st in stats:
        current.add(path)
        if st is None:  # a symlink: recorded as not indexed, never followed
            if known.get(path) != (-1, -1):
                links.append((path, language, -1, -1, ParseResult(skipped="symlink")))
        elif known.get(path) != (st.st_size, st.st_mtime_ns):
            todo.append((path, language, st))
    deleted = [path for path in known if path not in current]
    return _Changes(todo, links, deleted, len(current))


def _batches(todo: list[ToParse], workers: int) -> list[list[ToParse]]:
    """``todo`` cut into parse batches of up to `MAX_PARSE_BATCH` files, each at most
    a quarter of a worker's share of what remains: a small refresh still spreads
    over every worker, and the last batches are small, so the workers finish
    together instead of one parsing a full batch while the others wait."""
    out = []
    at = 0
    while at < len(todo):
        size = max(1, min(MAX_PARSE_BATCH, (len(todo) - at) // (4 * workers)))
        out.append(todo[at : at + size])
        at += size
    return out


def _stored_row(path: str, language: str, size: int, mtime: int, result: ParseResult) -> FileRow:
    """The index row of a parse result: the size and mtime the worker read (when it
    read the file), none for a failure that says nothing about the file (so it is
    parsed again at the next refresh)."""
    if result.size >= 0:
        size, mtime = result.size, result.mtime_ns
    if result.outline is None and result.skipped.startswith(_TRANSIENT):
        size = mtime = -1
    return (path, language, size, mtime, result)


def _job(root: Path, rel: str, language: str, st: os.stat_result) -> ParseJob:
    """Parse the checkout file ``rel`` if it is still the file ``st`` describes."""
    return ParseJob(rel, language, root=str(root), dev=st.st_dev, ino=st.st_ino)


def _is_corruption(exc: sqlite3.DatabaseError) -> bool:
    if isinstance(exc, sqlite3.OperationalError):
        return False  # busy, locked, disk full, read-only: the file itself is fine
    text = str(exc).lower()
    return any(word in text for word in ("malformed", "not a database", "corrupt", "quick_check"))


CODE: ServiceKey[CodeService] = ServiceKey("code")
