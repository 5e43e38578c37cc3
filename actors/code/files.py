"""Reading the files of a checkout without following symlinks.

A checkout can change while memtrio reads it: a file checked to be a regular
file can be swapped for a symlink, or one of its directories for a symlink
to elsewhere, between the check and the open. So a checkout file is never
opened by its name: `CheckoutDir` opens the checkout root from ``/`` and
then each directory below it, one component at a time relative to the one
before, with ``O_NOFOLLOW``; the file itself is opened the same way (and
``O_NONBLOCK``, so a FIFO swapped in cannot block), checked with ``fstat``
(a regular file, and the very file the caller checked: same device and
inode) and read from that descriptor. Nothing is ever resolved through a
symlink, so what is read is inside the checkout.

Used by the indexer's stat pass and by the parser workers; it imports only
the standard library (worker processes start fast).
"""

from __future__ import annotations

import errno
import os
import stat

# O_PATH (Linux): a directory only searchable (mode --x) can still be walked.
_DIR_FLAGS = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


# Directory descriptors a `CheckoutDir` keeps open before it closes those off
# the current path (a sorted walk never comes back to a directory it left).
MAX_OPEN_DIRS = 64


class Unsafe(Exception):
    """A path that is not read: the message is why ("symlink", "not a regular file", ...)."""


class Symlink(Unsafe):
    """The path or one of its directories is a symlink."""

    def __init__(self) -> None:
        super().__init__("symlink")


def _component(name: str) -> str:
    if name in ("", ".", "..") or "\0" in name:
        raise Unsafe("not a plain path inside the checkout")
    return name


def _open_at(name: str, dir_fd: int | None, flags: int) -> int:
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        # With O_NOFOLLOW on a single component, ELOOP means it is a symlink;
        # a symlink to a directory opened with O_DIRECTORY may say ENOTDIR.
        if exc.errno == errno.ELOOP or (exc.errno == errno.ENOTDIR and _is_link(name, dir_fd)):
            raise Symlink() from None
        raise


def _is_link(name: str, dir_fd: int | None) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


class CheckoutDir:
    """The directory tree of one checkout, walked without following symlinks.

    Directory descriptors are cached while the object lives (one refresh's stat
    pass, or one file in a worker); use it as a context manager to close them.
    """

    def __init__(self, root: str) -> None:
        if not os.path.isabs(root):
            raise Unsafe("the checkout root is not absolute")
        self.root = root
        self._dirs: dict[str, int] = {}

    def __enter__(self) -> CheckoutDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for fd in self._dirs.values():
            os.close(fd)
        self._dirs.clear()

    def _root(self) -> int:
        fd = os.open("/", _DIR_FLAGS)
        try:
            for part in self.root.split("/"):
                if part:
                    # The root is a real path: a symlink in it means it was swapped.
                    child = _open_at(_component(part), fd, _DIR_FLAGS)
                    os.close(fd)
                    fd = child
        except BaseException:
            os.close(fd)
            raise
        return fd

    def dir_fd(self, reldir: str) -> int:
        """A descriptor of the directory ``reldir`` ('' for the root); owned by this object.

        Error handling: `Unsafe` when a component is a symlink or ``.``/``..``;
        `OSError` (missing, not a directory, no permission) otherwise.
        """
        fd = self._dirs.get(reldir)
        if fd is not None:
            return fd
        if len(self._dirs) >= MAX_OPEN_DIRS:
            self._forget_all_but(reldir)
        if reldir == "":
            fd = self._root()
        else:
            parent, _, name = reldir.rpartition("/")
            fd = _open_at(_component(name), self.dir_fd(parent), _DIR_FLAGS)
        self._dirs[reldir] = fd
        return fd

    def _forget_all_but(self, reldir: str) -> None:
        """Close the cached directories that are not ``reldir``'s ancestors."""
        keep = {""}
        cut = reldir.find("/")
        while cut > 0:
            keep.add(reldir[:cut])
            cut = reldir.find("/", cut + 1)
        for name in [d for d in self._dirs if d not in keep]:
            os.close(self._dirs.pop(name))

    def lstat(self, rel: str) -> os.stat_result:
        """``lstat`` of the checkout file ``rel``, reached without following any symlink."""
        parent, _, name = rel.rpartition("/")
        return os.stat(_component(name), dir_fd=self.dir_fd(parent), follow_symlinks=False)

    def open(self, rel: str, expect: tuple[int, int] | None = None) -> int:
        """A read-only descriptor of the regular file ``rel`` (the caller closes it).

        ``expect`` is the (st_dev, st_ino) the caller checked: another file
        found there is refused.

        Error handling: `Unsafe` for a symlink anywhere on the path, a file
        that is not regular, or one that is not ``expect``; `OSError` otherwise.
        """
        parent, _, name = rel.rpartition("/")
        fd = _open_at(_component(name), self.dir_fd(parent), _FILE_FLAGS)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise Unsafe("not a regular file")
            if expect is not None and (st.st_dev, st.st_ino) != expect:
                raise Unsafe("replaced since it was checked")
        except BaseException:
            os.close(fd)
            raise
        return fd


def read_file(
    root: str, rel: str, limit: int, expect: tuple[int, int] | None = None
) -> tuple[bytes | None, os.stat_result]:
    """The bytes of the checkout file ``rel`` (None when larger than ``limit``) and its fstat.

    Error handling: as `CheckoutDir.open`.
    """
    with CheckoutDir(root) as tree:
        fd = tree.open(rel, expect)
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if st.st_size > limit:
            return None, st
        data = fh.read(limit + 1)
    if len(data) > limit:  # grew since fstat
        return None, st
    return data, st
