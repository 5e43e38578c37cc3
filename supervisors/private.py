"""Private files and directories: what memtrio writes is readable by its owner only.

The home holds memory text, queries and code structure, so every directory
memtrio creates is ``0700`` and every file ``0600``, whatever the umask: the
database (SQLite gives its ``-wal``, ``-shm`` and ``-journal`` files the mode of
the database file), the code index, the trace log, export files. Files are
created here, with ``os.open(..., 0o600)`` and an ``fchmod``, before anything
else (SQLite, a log handler) opens them, so they are never readable by others,
not even for a moment.

Existing paths are not changed behind the user's back: `audit` lists those
that group or others can access, and `tighten` (``memtrio doctor --fix``)
removes those permission bits. Neither follows a symbolic link: a link in the
home is reported, never changed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

DIR_MODE = 0o700
FILE_MODE = 0o600
# Permission bits for group and others: none of them on a private path.
OPEN_BITS = 0o077


def make_dir(path: Path) -> None:
    """Create ``path`` and its missing parents as ``0700``; an existing directory is left as it is.

    Error handling: raises the `OSError` of the first directory that cannot be
    created, or `NotADirectoryError` when ``path`` exists and is not a directory.
    """
    missing: list[Path] = []
    current = path
    while not os.path.lexists(current):
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, DIR_MODE)
        except FileExistsError:
            continue  # created meanwhile by another process
        os.chmod(directory, DIR_MODE)  # the umask may have removed bits the owner needs
    if not path.is_dir():
        raise NotADirectoryError(20, "Not a directory", str(path))


def create_file(path: Path) -> bool:
    """Create ``path`` empty and ``0600`` unless something exists there; True if it was created.

    Used before SQLite opens a database, so that the database (and the journal
    files SQLite derives from it) is private from the start. Never creates
    through a symbolic link.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
    except FileExistsError:
        return False
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)
    return True


def _opener(path: str, flags: int) -> int:
    """An ``open(..., opener=)`` that creates a missing file ``0600`` whatever the umask."""
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return os.open(path, flags & ~os.O_CREAT)
    os.fchmod(fd, FILE_MODE)
    return fd


def open_file(
    path: Path, mode: str = "a", encoding: str | None = None, buffering: int = -1
) -> IO[Any]:
    """`open` for writing or appending; a file it creates is ``0600``."""
    return open(path, mode, buffering, encoding, opener=_opener)  # noqa: SIM115 - the caller owns it


@contextlib.contextmanager
def replace_file(path: Path, binary: bool = False) -> Iterator[IO[Any]]:
    """Write ``path`` as a new private file that replaces the old one only when the block succeeds.

    The data goes to a temporary ``0600`` file beside ``path``, which is renamed
    over it at the end (so a failed export never leaves half a file, and the
    result is private even if ``path`` existed with looser permissions). A path
    that is not a regular file (``/dev/stdout``, a pipe) is written in place.

    Error handling: the temporary file is created before the block runs, so an
    unwritable destination fails at once with its `OSError`; on any failure the
    temporary file is removed and ``path`` is left as it was.
    """
    mode = "wb" if binary else "w"
    kwargs: dict[str, Any] = {} if binary else {"encoding": "utf-8", "newline": "\n"}
    if os.path.islink(path):
        path = Path(os.path.realpath(path))  # replace what the link points to, not the link
    try:
        existing = os.stat(path)
    except FileNotFoundError:
        existing = None
    if existing is not None and not stat.S_ISREG(existing.st_mode):
        with open(path, mode, **kwargs) as out:
            yield out
        return
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    out = open(temp, mode, opener=_exclusive_opener, **kwargs)  # noqa: SIM115 - closed below
    try:
        yield out
        out.flush()
        os.fsync(out.fileno())
        out.close()
        os.replace(temp, path)
    except BaseException:
        out.close()
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def _exclusive_opener(path: str, flags: int) -> int:
    fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, FILE_MODE)
    os.fchmod(fd, FILE_MODE)
    return fd


# -- audit -------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    """A path that group or others can access, or a symbolic link that was not followed."""

    path: Path
    mode: int  # permission bits now
    expected: int  # DIR_MODE or FILE_MODE; 0 for a symbolic link
    target: str = ""  # where a symbolic link points

    @property
    def is_link(self) -> bool:
        return bool(self.target)

    def describe(self) -> str:
        if self.is_link:
            return f"{self.path}: a symbolic link to {self.target} (not followed, not changed)"
        return f"{self.path}: mode {self.mode:04o}, expected {self.expected:04o}"


def audit(paths: list[Path]) -> list[Finding]:
    """Every path under ``paths`` (each walked when it is a directory) that is not private.

    Symbolic links are reported and never followed, except a top-level path
    itself: a home may be a link to its real directory, which is then examined
    (and reported by its real path) besides the link.
    """
    findings: list[Finding] = []
    seen: set[tuple[int, int]] = set()
    for top in paths:
        if os.path.islink(top):
            findings.append(Finding(top, 0, 0, os.readlink(top)))
            top = Path(os.path.realpath(top))
        try:
            info = os.stat(top)
        except OSError:
            continue
        _audit_one(top, info, findings, seen)
        if stat.S_ISDIR(info.st_mode):
            for root, dirs, files in os.walk(top, followlinks=False):
                for name in sorted(dirs + files):
                    path = Path(root) / name
                    try:
                        entry = os.lstat(path)
                    except OSError:
                        continue
                    if stat.S_ISLNK(entry.st_mode):
                        findings.append(Finding(path, 0, 0, os.readlink(path)))
                    else:
                        _audit_one(path, entry, findings, seen)
    return findings


def _audit_one(
    path: Path, info: os.stat_result, findings: list[Finding], seen: set[tuple[int, int]]
) -> None:
    key = (info.st_dev, info.st_ino)
    if key in seen:
        return
    seen.add(key)
    mode = stat.S_IMODE(info.st_mode)
    expected = DIR_MODE if stat.S_ISDIR(info.st_mode) else FILE_MODE
    if mode & OPEN_BITS:
        findings.append(Finding(path, mode, expected))


def tighten(finding: Finding) -> int:
    """Remove group and other permissions from a finding's path; its new mode.

    Never follows a symbolic link (the path is opened with ``O_NOFOLLOW`` and
    changed with ``fchmod``): a path that became a link since the audit is left
    alone.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(finding.path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(exc.errno, "a symbolic link; not changed", str(finding.path)) from None
        # Not openable (no read permission): lchmod semantics by hand.
        info = os.lstat(finding.path)
        if stat.S_ISLNK(info.st_mode):
            raise OSError(errno.ELOOP, "a symbolic link; not changed", str(finding.path)) from None
        new = stat.S_IMODE(info.st_mode) & ~OPEN_BITS
        os.chmod(finding.path, new)
        return new
    try:
        new = stat.S_IMODE(os.fstat(fd).st_mode) & ~OPEN_BITS
        os.fchmod(fd, new)
    finally:
        os.close(fd)
    return new
