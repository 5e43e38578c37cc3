"""The runtime file of a running ``memtrio serve``: how a ``memtrio mcp`` child finds it.

``memtrio serve`` opens an *attach endpoint* besides its public listener
(``actors.net.owner``) and writes where it is to ``$MEMTRIO_HOME/run/serve.json``: its pid, host,
port and attach secret, the public url, the dashboard's url (with its token, when it
serves one), the start time and the memtrio version. The
file is private (``0600`` in a ``0700`` directory, as everything in the home,
see ``supervisors.private``) since the secret opens a session; it is replaced
atomically, so a reader never sees half of it. It is removed when the listener
stops, and only if it is still this process's file (another ``memtrio serve``
may have replaced it meanwhile).

The file steers where an agent's session goes, so it is believed only when no
one else could have written it (`read`): the file and ``run/`` belong to this
user, neither is a symbolic link, the file is private, ``run/`` and the
directories above it are not writable by others (``supervisors.trust``).
Otherwise `Untrusted` says why. The secret itself never leaves the machine's
files: the child and the endpoint prove to each other that they hold it
(``actors.net.proof``).

A process killed without a chance to clean up leaves the file behind: the
``memtrio mcp`` child that finds it checks that its pid is alive and that its
endpoint proves itself (``actors.net.attach``), and removes a stale one.

This module is the file alone (no transport), so the child imports little.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Annotated

import msgspec

from ...supervisors import private, trust

RUN_DIR = "run"
RUNTIME_FILE = "serve.json"
# The longest runtime file read (a real one is about 300 bytes).
MAX_SIZE = 65536


class Runtime(msgspec.Struct, forbid_unknown_fields=False):
    """What ``run/serve.json`` holds."""

    pid: Annotated[int, msgspec.Meta(ge=1, le=2**31 - 1)]
    host: Annotated[str, msgspec.Meta(max_length=255)]
    port: Annotated[int, msgspec.Meta(ge=1, le=65535)]
    # The attach endpoint's secret, hex; "" in the file of an older memtrio serve, which
    # wrote a bearer token instead (a child never sends that one: it serves embedded).
    secret: str = ""
    url: str = ""  # the public endpoint of the server ("" if it has none)
    ui: str = ""  # the dashboard's URL with its per-launch token ("" without --ui)
    started: float = 0.0  # when the server started (seconds since the epoch)
    version: str = ""


class Untrusted(Exception):
    """The runtime file, or a directory it is in, could have been written by someone else."""


_decoder = msgspec.json.Decoder(Runtime)


def runtime_path(home: Path) -> Path:
    """Where ``memtrio serve`` of ``home`` says where it listens."""
    return home / RUN_DIR / RUNTIME_FILE


def check_run_dir(home: Path) -> None:
    """Raise `Untrusted` unless only this user can write ``run/`` and the directories above it.

    ``run/`` must also be a real directory of this user's, not a symbolic link.
    """
    run = home / RUN_DIR
    try:
        info = os.lstat(run)
    except OSError as exc:
        raise Untrusted(f"{run} cannot be examined ({exc.strerror or exc})") from None
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise Untrusted(f"{run} is not a directory (a symbolic link or a file)")
    if info.st_uid != os.geteuid():
        raise Untrusted(f"{run} belongs to another user (uid {info.st_uid})")
    problem = trust.directory_problem(run)
    if problem is not None:
        raise Untrusted(problem)


def publish(home: Path, runtime: Runtime) -> Path:
    """Write ``runtime`` to the runtime file (private, replaced atomically); its path.

    Error handling: an `OSError` (an unwritable home) propagates; `Untrusted` when
    others could replace ``run/`` (the file is then not written).
    """
    path = runtime_path(home)
    private.make_dir(path.parent)
    check_run_dir(home)
    if os.path.islink(path):
        os.unlink(path)  # replace the link itself, never what it points to
    with private.replace_file(path, binary=True) as out:
        out.write(msgspec.json.encode(runtime) + b"\n")
    return path


def _read_private(path: Path) -> bytes:
    """The bytes of ``path``, opened without following a link, if it is this user's private file.

    Error handling: `FileNotFoundError` when there is none; `Untrusted` otherwise.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise Untrusted(
            f"{path} cannot be opened ({exc.strerror or exc}; a symbolic link?)"
        ) from None
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Untrusted(f"{path} is not a regular file")
        if info.st_uid != os.geteuid():
            raise Untrusted(f"{path} belongs to another user (uid {info.st_uid})")
        mode = stat.S_IMODE(info.st_mode)
        if mode & trust.OPEN_BITS:
            raise Untrusted(f"{path} is readable or writable by group or others (mode {mode:04o})")
        return file.read(MAX_SIZE)


def read(home: Path) -> tuple[Runtime | None, bytes]:
    """The runtime file of ``home``: (its content or None when it is not valid, its raw bytes).

    ``(None, b"")`` when there is no file (or ``run/``).

    Error handling: raises `Untrusted` (saying why) when the file or a directory it
    is in could have been written by someone else (see `check_run_dir`).
    """
    path = runtime_path(home)
    if not os.path.lexists(path.parent):
        return None, b""
    check_run_dir(home)
    try:
        raw = _read_private(path)
    except FileNotFoundError:
        return None, b""
    try:
        return _decoder.decode(raw), raw
    except msgspec.DecodeError:  # ValidationError included: not a runtime file
        return None, raw


def remove_if_unchanged(home: Path, raw: bytes) -> bool:
    """Remove the runtime file if it still holds ``raw`` (and is to be believed); whether
    it was removed.

    A file someone rewrote since ``raw`` was read (a new ``memtrio serve``) is kept.
    """
    try:
        _, now = read(home)
    except Untrusted:
        return False
    if now != raw or not raw:
        return False
    with contextlib.suppress(OSError):
        runtime_path(home).unlink()
        return True
    return False


def withdraw(home: Path, runtime: Runtime) -> bool:
    """Remove the runtime file if it is still ``runtime``'s (same pid and secret)."""
    try:
        found, raw = read(home)
    except Untrusted:
        return False
    if found is None or found.pid != runtime.pid or found.secret != runtime.secret:
        return False
    return remove_if_unchanged(home, raw)


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    with contextlib.suppress(OSError, IndexError):
        stat_line = Path(f"/proc/{pid}/stat").read_text()
        return stat_line.rpartition(")")[2].split()[0] not in ("Z", "X")
    return True
