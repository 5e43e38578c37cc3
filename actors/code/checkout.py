"""Git checkouts: their roots, their source files, and the path rules.

Every code tool works inside one checkout (``git rev-parse --show-toplevel``
of the ``root`` argument or of the server's startup directory), so each linked
worktree is its own checkout. Paths given by callers are refused when they
contain ``..``, go through a symlink, or resolve outside the checkout.
"""

from __future__ import annotations

import errno
import math
import os
import stat
import time
from pathlib import Path

import trio

from ...protocol.errors import BadArgument, DomainError, Forbidden, NotFound, Unavailable
from ...supervisors.git import GitError, git
from .files import CheckoutDir, Symlink, Unsafe
from .languages import language_for

# Directory -> (checkout root, monotonic time found): `git rev-parse` costs a few
# milliseconds per call and a directory's checkout practically never changes.
_ROOTS: dict[str, tuple[Path, float]] = {}
ROOT_CACHE_SECONDS = 30.0


async def checkout_root(
    root: str | None, default: Path, default_name: str = "the server's directory"
) -> Path:
    """The checkout root for a tool's ``root`` argument (absolute) or ``default`` (named
    ``default_name`` in a refusal)."""
    key = root if root is not None else str(default)
    cached = _ROOTS.get(key)
    if (
        cached is not None
        and time.monotonic() - cached[1] < ROOT_CACHE_SECONDS
        and os.path.isdir(cached[0])
    ):
        return cached[0]
    found = await _checkout_root(root, default, default_name)
    _ROOTS[key] = (found, time.monotonic())
    return found


async def _checkout_root(root: str | None, default: Path, default_name: str) -> Path:
    if root is not None:
        if not os.path.isabs(root):
            raise BadArgument(f"root must be an absolute directory path, not {root!r}")
        start = Path(root)
        if not start.is_dir():
            raise BadArgument(f"root {root!r} is not a directory")
    else:
        start = default
    try:
        top = (
            (await git(["rev-parse", "--show-toplevel"], start))
            .decode("utf-8", "surrogateescape")
            .strip()
        )
    except GitError:
        if root is not None:  # the caller named it: say what it lacks, not "pass root"
            raise BadArgument(
                f"root {root!r} is not inside a Git checkout (no Git repository in it or above "
                "it); point root at a directory of a checkout, or run `git init` there first"
            ) from None
        raise BadArgument(
            f"{default_name} {str(default)!r} is not inside a Git checkout; "
            "pass root as an absolute directory inside one"
        ) from None
    found = Path(os.path.realpath(top))
    # A repository's own config can move its work tree anywhere (core.worktree):
    # the checkout must contain the directory the caller pointed at.
    start_real = os.path.realpath(start)
    if start_real != str(found) and not start_real.startswith(str(found).rstrip("/") + "/"):
        where = f"root {root!r}" if root is not None else f"{default_name} {str(default)!r}"
        raise Forbidden(
            f"{where} is not inside the work tree {str(found)!r} that its Git configuration names; refused"
        )
    return found


async def list_files(root: Path) -> list[str]:
    """Tracked and untracked, not ignored files of a checkout (relative, '/'-separated)."""
    out = await git(["ls-files", "-co", "--exclude-standard", "-z", "--full-name"], root)
    names = out.split(b"\0")
    seen: set[str] = set()
    files: list[str] = []
    for raw in names:
        if not raw:
            continue
        name = raw.decode("utf-8", "surrogateescape")
        if name not in seen:
            seen.add(name)
            files.append(name)
    files.sort()
    return files


# A cached listing is reused at most this long, even when no directory changed
# (a new file in a directory that holds only ignored files changes no watched mtime).
LISTING_MAX_AGE = 10.0


class Listing:
    """The source files of one checkout, from `git ls-files`, reused while unchanged.

    ``git ls-files`` costs several milliseconds per call, more than the rest of
    a warm refresh. Adding, removing or renaming a file changes the mtime of its
    directory, so the listing is reused while the mtime of every directory
    holding a listed file (and its ancestors), of their ``.gitignore`` files and
    of Git's index and exclude files are unchanged, and at most
    `LISTING_MAX_AGE` seconds.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files: list[tuple[str, str]] = []
        self.total = 0
        self._stamps: dict[str, int] = {}
        self._taken = -math.inf
        self._git_dir: str | None = None

    def _watched(self, files: list[str]) -> list[str]:
        base = str(self.root)
        dirs = {""}
        for name in files:
            cut = name.rfind("/")
            while cut > 0:
                parent = name[:cut]
                if parent in dirs:
                    break
                dirs.add(parent)
                cut = parent.rfind("/")
        paths = []
        for d in dirs:
            path = f"{base}/{d}" if d else base
            paths.append(path)
            paths.append(f"{path}/.gitignore")
        if self._git_dir:
            paths.append(f"{self._git_dir}/index")
            paths.append(f"{self._git_dir}/info/exclude")
        return paths

    def changed(self) -> bool:
        """Whether the listing must be taken again (a watched mtime changed, or it is
        older than `LISTING_MAX_AGE`); stats files: call it in a thread."""
        if time.monotonic() - self._taken > LISTING_MAX_AGE:
            return True
        for path, stamp in self._stamps.items():
            try:
                now = os.stat(path).st_mtime_ns
            except OSError:
                now = -1
            if now != stamp:
                return True
        return False

    async def current(self) -> list[tuple[str, str]]:
        """The checkout's supported files (path, language), sorted."""
        if not await trio.to_thread.run_sync(self.changed):
            return self.files
        if self._git_dir is None:
            out = await git(["rev-parse", "--absolute-git-dir"], self.root)
            self._git_dir = out.decode("utf-8", "surrogateescape").strip()
        taken = time.monotonic()
        names = await list_files(self.root)

        def stamp() -> dict[str, int]:
            stamps = {}
            for path in self._watched(names):
                try:
                    stamps[path] = os.stat(path).st_mtime_ns
                except OSError:
                    stamps[path] = -1
            return stamps

        # Stamps taken after the listing: a change in between is seen next time.
        self._stamps = await trio.to_thread.run_sync(stamp)
        self._taken = taken
        self.files = source_files(names)
        return self.files


def source_files(files: list[str]) -> list[tuple[str, str]]:
    """(path, language) of the supported files among ``files``."""
    out = []
    for name in files:
        lang = language_for(name)
        if lang is not None:
            try:
                name.encode("utf-8")
            except UnicodeEncodeError:
                continue  # a path that is not UTF-8 cannot be named in results
            out.append((name, lang))
    return out


def stat_files(
    root: Path, files: list[tuple[str, str]]
) -> list[tuple[str, str, os.stat_result | None]]:
    """lstat each file, following no symlink: (path, language, stat) of the regular files,
    (path, language, None) of those that are (or go through) a symlink."""
    out: list[tuple[str, str, os.stat_result | None]] = []
    with CheckoutDir(str(root)) as tree:
        for name, lang in files:
            try:
                st = tree.lstat(name)
            except Symlink:
                out.append((name, lang, None))
                continue
            except (Unsafe, OSError):
                continue  # deleted since the listing (or a removed tracked file)
            if stat.S_ISREG(st.st_mode):
                out.append((name, lang, st))
            elif stat.S_ISLNK(st.st_mode):
                out.append((name, lang, None))
            # directories (submodules) and other types are not files to index
    return out


def has_control(path: str) -> bool:
    return any(ord(c) < 32 or ord(c) == 127 for c in path)


def show_path(path: str) -> str:
    """A path as printed in results: quoted and escaped when it has control characters."""
    if not has_control(path) and '"' not in path[:1]:
        try:
            path.encode("utf-8")
            return path
        except UnicodeEncodeError:
            pass
    out = []
    for ch in path:
        code = ord(ch)
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif code < 32 or code == 127:
            out.append({"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(ch, f"\\x{code:02x}"))
        elif 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8
            out.append(f"\\x{code - 0xDC00:02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def resolve_path(root: Path, path: str) -> str:  # noqa: C901
    """The checkout-relative form of a caller's ``path``, after the safety rules.

    Error handling: raises a `DomainError` saying which rule refused the path
    (`Forbidden` for a path leaving the checkout or through a symlink, `NotFound`
    for a missing file, `BadArgument` for a path that names no regular file).
    """
    if not path or "\0" in path:
        raise BadArgument(
            "path must be a file path relative to the checkout root (or absolute inside it)"
        )
    parts = path.replace("\\", "/").split("/")
    if ".." in parts:
        raise Forbidden(
            f"path {path!r} contains '..'; give a path inside the checkout without '..'"
        )
    if os.path.isabs(path):
        rel = os.path.relpath(os.path.normpath(path), root)
        if rel == ".." or rel.startswith("../") or os.path.isabs(rel):
            # maybe root was reached through a symlink: compare real paths
            raise Forbidden(f"path {path!r} is outside the checkout {str(root)!r}")
    else:
        rel = os.path.normpath(path)
    rel = rel.replace(os.sep, "/")
    if rel in (".", "") or rel.startswith("../"):
        raise BadArgument(f"path {path!r} does not name a file inside the checkout")
    # Refuse symlinks anywhere along the path, walking from the root without
    # following any (the file is checked again the same way when it is read).
    parts = rel.split("/")
    with CheckoutDir(str(root)) as tree:
        for i in range(1, len(parts) + 1):
            prefix = "/".join(parts[:i])
            try:
                st = tree.lstat(prefix)
            except Symlink:
                st = None
            except Unsafe as exc:
                raise Forbidden(f"cannot read {rel}: {exc}") from None
            except FileNotFoundError:
                raise NotFound(f"no such file in the checkout: {rel}") from None
            except OSError as exc:
                raise unreadable(rel, exc) from None
            if st is None or stat.S_ISLNK(st.st_mode):
                raise Forbidden(
                    f"path {path!r} goes through a symlink ({prefix}); symlinks are refused"
                )
    assert st is not None  # rel names at least one part, and a None was refused above
    if not stat.S_ISREG(st.st_mode):
        raise BadArgument(f"path {path!r} is not a regular file")
    return rel


def checked_stat(root: Path, rel: str) -> os.stat_result:
    """lstat of a caller's file ``rel`` (already through `resolve_path`), reached
    without following symlinks; a regular file.

    Error handling: a `DomainError` saying why the file is refused.
    """
    try:
        with CheckoutDir(str(root)) as tree:
            st = tree.lstat(rel)
    except Symlink:
        raise Forbidden(f"path {rel!r} goes through a symlink; symlinks are refused") from None
    except Unsafe as exc:
        raise Forbidden(f"cannot read {rel}: {exc}") from None
    except OSError as exc:
        raise unreadable(rel, exc) from None
    if not stat.S_ISREG(st.st_mode):
        raise BadArgument(f"path {rel!r} is not a regular file")
    return st


def unreadable(rel: str, exc: OSError) -> DomainError:
    """A caller's file that the operating system refuses to read, as whose fault it is."""
    message = f"cannot read {rel}: {exc.strerror}"
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return NotFound(message)
    if exc.errno in (errno.EACCES, errno.EPERM):
        return Forbidden(message)
    return Unavailable(message)
