"""Defect 4 of issue #11: a checkout file swapped for a symlink (or one of its
directories swapped for a symlink to elsewhere) between the check and the
read must never give the content of the file outside the checkout."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
from gitrepo import make_repo
from memtrio.actors.code import worker
from memtrio.actors.code.checkout import resolve_path
from memtrio.actors.code.files import CheckoutDir, Symlink, Unsafe, read_file
from memtrio.actors.code.index import CodeIndex, index_path
from memtrio.actors.code.service import CodeService
from memtrio.actors.code.wire import ParseJob, ParseResult
from memtrio.protocol.errors import DomainError

INSIDE = "def inside_fn():\n    pass\n"
OUTSIDE = "def outside_secret_fn():\n    pass\n\n\nclass OutsideSecretClass:\n    pass\n"
SECRETS = ("outside_secret_fn", "OutsideSecretClass")


class InlinePool:
    """A parser pool that runs the real worker code in a thread, with a hook before each job."""

    workers = 1

    def __init__(self, before: Callable[[ParseJob], None] | None = None) -> None:
        self.before = before

    async def parse(self, job: ParseJob) -> ParseResult:
        if self.before is not None:
            self.before(job)
        return await trio.to_thread.run_sync(worker.handle, job)

    async def parse_batch(self, jobs: list[ParseJob]) -> list[ParseResult]:
        return [await self.parse(job) for job in jobs]


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A checkout with x.py and d/y.py, and an outside directory with the same names."""
    root = make_repo(tmp_path / "repo", {"x.py": INSIDE, "d/y.py": INSIDE})
    outside = tmp_path / "outside"
    (outside / "d").mkdir(parents=True)
    (outside / "x.py").write_text(OUTSIDE)
    (outside / "d" / "y.py").write_text(OUTSIDE)
    return root, outside


def swap_file(root: Path, outside: Path) -> None:
    """Replace x.py by a symlink to the outside file, atomically (rename over it)."""
    tmp = root / ".x.tmp"
    tmp.symlink_to(outside / "x.py")
    os.rename(tmp, root / "x.py")


def swap_dir(root: Path, outside: Path) -> None:
    """Replace the directory d by a symlink to the outside directory."""
    os.rename(root / "d", root / ".d.old")
    (root / "d").symlink_to(outside / "d")


def leaked(text: object) -> bool:
    return any(secret in str(text) for secret in SECRETS)


def test_defect4_checkout_dir_refuses_symlinks_on_the_path(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    checked = os.lstat(root / "x.py")
    swap_file(root, outside)
    with pytest.raises(Symlink):
        read_file(str(root), "x.py", 1 << 20, (checked.st_dev, checked.st_ino))
    swap_dir(root, outside)
    with CheckoutDir(str(root)) as tree, pytest.raises(Symlink):
        tree.lstat("d/y.py")
    for bad in ("../outside/x.py", "./x.py", "d//y.py", ""):
        with pytest.raises(Unsafe):
            read_file(str(root), bad, 1 << 20)


def test_defect4_a_replaced_file_is_not_read(layout: tuple[Path, Path]) -> None:
    """Another regular file in place of the checked one (a different inode) is refused."""
    root, _ = layout
    checked = os.lstat(root / "x.py")
    (root / ".x.new").write_text("def other():\n    pass\n")
    os.rename(root / ".x.new", root / "x.py")
    with pytest.raises(Unsafe, match="replaced"):
        read_file(str(root), "x.py", 1 << 20, (checked.st_dev, checked.st_ino))


@pytest.mark.parametrize("swap", [swap_file, swap_dir], ids=["file", "directory"])
def test_defect4_worker_never_reads_through_a_swapped_symlink(
    layout: tuple[Path, Path], swap: Callable[[Path, Path], None]
) -> None:
    root, outside = layout
    rel = "x.py" if swap is swap_file else "d/y.py"
    checked = os.lstat(root / rel)
    swap(root, outside)
    result = worker.handle(
        ParseJob(rel, "python", root=str(root), dev=checked.st_dev, ino=checked.st_ino)
    )
    assert result.outline is None
    assert result.skipped == "changed while being read (symlink)"
    # Without the server's (dev, ino) the walk alone still refuses the link.
    unchecked = worker.handle(ParseJob(rel, "python", root=str(root)))
    assert unchecked.outline is None and "symlink" in unchecked.skipped
    # A job naming no checkout is never read by name.
    assert worker.handle(ParseJob(str(outside / "x.py"), "python")).outline is None


@pytest.mark.parametrize("swap", [swap_file, swap_dir], ids=["file", "directory"])
async def test_defect4_outline_swapped_between_check_and_open(
    layout: tuple[Path, Path], home: Path, swap: Callable[[Path, Path], None]
) -> None:
    """The swap happens after code_outline's checks, just before the worker opens the file."""
    root, outside = layout
    rel = "x.py" if swap is swap_file else "d/y.py"
    swapped: list[str] = []

    def before(job: ParseJob) -> None:
        if not swapped:
            swap(root, outside)
            swapped.append(job.path)

    service = CodeService(CodeIndex(index_path(home)), InlinePool(before), 100)
    try:
        checked = resolve_path(root, rel)
        with pytest.raises(DomainError) as refused:
            await service.file_outline(root, checked)
        assert swapped == [rel]
        assert "changed while being read" in str(refused.value)
        # The refusal is not remembered: once the checkout is sane again it is outlined.
        if swap is swap_dir:
            (root / "d").unlink()
            os.rename(root / ".d.old", root / "d")
        else:
            (root / "x.py").unlink()
        (root / rel).write_text(INSIDE + "\n\ndef again():\n    pass\n")
        _, _, rows = await service.file_outline(root, rel)
        assert [r[1] for r in rows] == ["inside_fn", "again"]
    finally:
        service.index.close()


async def test_defect4_indexer_reads_nothing_through_symlinks(
    layout: tuple[Path, Path], home: Path
) -> None:
    """A tracked file under a directory swapped for a symlink, and symlinked files, stay unread."""
    root, outside = layout
    (root / "link.py").symlink_to(outside / "x.py")
    swap_dir(root, outside)  # d/y.py is still in Git's index
    service = CodeService(CodeIndex(index_path(home)), InlinePool(), 100)
    try:
        report = await service.refresh(root, want_skipped=True)
        assert dict(report.skipped) == {"d/y.py": "symlink", "link.py": "symlink"}
        for query in SECRETS:
            rows, total = await service.find(root, query, None, 20)
            assert (rows, total) == ([], 0)
        with pytest.raises(DomainError, match="symlink"):
            await service.file_outline(root, "d/y.py")
    finally:
        service.index.close()


async def test_defect4_racing_symlink_swaps_never_leak(
    layout: tuple[Path, Path], home: Path
) -> None:
    """A thread flips x.py between the file and a symlink out of the checkout for about
    1.5 s while outlines are requested; no outline may hold the outside text."""
    root, outside = layout
    stop = threading.Event()
    real = root / ".x.real"
    real.write_text(INSIDE)

    def flip() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            (root / ".x.tmp").unlink(missing_ok=True)
            if n % 2:
                (root / ".x.tmp").symlink_to(outside / "x.py")
            else:
                (root / ".x.tmp").write_text(INSIDE if n % 4 else INSIDE + "# edited\n")
            os.rename(root / ".x.tmp", root / "x.py")

    service = CodeService(CodeIndex(index_path(home)), InlinePool(), 100)
    outlines = refusals = 0
    thread = threading.Thread(target=flip, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            try:
                rel = resolve_path(root, "x.py")
                _, _, rows = await service.file_outline(root, rel)
            except DomainError as exc:
                assert not leaked(exc), exc
                refusals += 1
                continue
            assert not leaked(rows), rows
            outlines += 1
    finally:
        stop.set()
        thread.join()
        service.index.close()
    assert outlines + refusals > 0
