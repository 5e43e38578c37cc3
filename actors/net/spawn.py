"""Starting the owner: the ``memtrio serve --owner`` that a ``memtrio mcp`` child launches
when no ``memtrio serve`` of its home runs (the attach model, ``actors.net.attach``).

One child at a time launches: it holds an exclusive `fcntl.flock` on
``run/owner.lock`` from looking for an owner until the one it launched is ready,
so children started at the same moment start one owner, and the others find it
once the lock is theirs. The kernel releases the lock of a child that dies, so a
killed child never blocks the others.

The owner is detached from the child: its own session and process group
(``start_new_session``), stdin from ``/dev/null``, stdout and stderr appended to
``logs/owner.log`` in the home (never the child's stdout, which belongs to the
protocol), no other descriptor inherited. It outlives the child, publishes its
runtime file as every ``memtrio serve`` does, and exits on its own once no
session has used it for ``[serve] idle_exit`` seconds.

``memtrio serve --detach`` starts its server the same way (`detach`): detached,
its log in ``logs/serve.log``, marked ``--detached`` on its command line, and waits
until it publishes its runtime file; ``memtrio serve --stop`` ends it by the pid
that file names (`stop_published`).

This module is the mechanics only (the lock, the process, the wait); choosing
when to launch is ``actors.net.attach``'s.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import trio

from ...supervisors import private
from . import runtime

LOCK_FILE = "owner.lock"
LOG_DIR = "logs"
LOG_FILE = "owner.log"
DETACHED_LOG_FILE = "serve.log"
# The mark of a server `detach` started, on its command line (found by `owner_pids`).
DETACHED = "--detached"
# How long ``memtrio serve --stop`` waits, beyond the server's shutdown grace, for it to exit.
STOP_MARGIN = 10.0
# How long a launched owner may take to publish its runtime file (it opens the store and
# starts every feature first; on two busy cores with the model, several seconds).
START_TIMEOUT = 60.0
# How long a child waits for another child that is launching an owner.
LOCK_TIMEOUT = START_TIMEOUT + 10.0
POLL = 0.05
# The tail of owner.log quoted when the owner did not start.
TAIL_BYTES = 4096


class OwnerFailed(Exception):
    """The owner could not be started; the message says why and where its log is.
    ``code``: the exit code of the server, when it exited. ``reason``: the one line the
    server gave when it refused to start (exit 1 or 2: a newer or damaged store, a full
    disk, a bad configuration: what the user must fix, without its ``memtrio: ``), ""
    when it did not say (killed, crashed, too slow)."""

    def __init__(self, message: str, code: int | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason


# The exit codes of a memtrio command that refused to start with one line saying why
# (``supervisors.errors.UserError``: 1, a configuration error: 2).
REFUSED_CODES = (1, 2)
SAID = "memtrio: "


def os_reason(exc: OSError) -> str:
    """An `OSError` in words, without its class name: ``cannot use PATH: <what>``."""
    if exc.filename and exc.errno in (errno.ENOTDIR, errno.EEXIST):
        return f"{exc.filename} (or a directory above it) is not a directory; move it away"
    what = exc.strerror or str(exc)
    what = what[:1].lower() + what[1:]
    return f"cannot use {exc.filename}: {what}" if exc.filename else what


@dataclass(frozen=True)
class Launch:
    """How a child starts the owner of ``home``: in ``cwd`` (the child's, so the
    dashboard's repository is the agent's), with the dashboard when ``ui``."""

    home: Path
    cwd: Path
    ui: bool = False
    log_level: str | None = None

    def command(self) -> list[str]:
        command = [sys.executable, "-m", "memtrio.supervisors.cli", "serve", "--owner"]
        command += ["--home", str(self.home)]
        if self.ui:
            command.append("--ui")
        if self.log_level:
            command += ["--log-level", self.log_level]
        return command


def embedded(how: Launch) -> tuple[subprocess.Popen[bytes], socket.socket]:
    """A ``memtrio mcp --no-attach`` of ``how.home`` in ``how.cwd``, its stdin and stdout one
    end of a socket pair: the process and the other end (for the relay of a child that
    answered its client early and then found no owner to start, ``actors.net.attach``).
    Its stderr is this process's; it is this child's child (not detached): it ends at
    EOF on the socket, when this child closes it or dies. If it cannot serve (its store
    cannot be opened, say), it answers each request with why (``--answer-failures``).

    Error handling: an `OSError` (no interpreter) propagates.
    """
    ours, theirs = socket.socketpair()
    command = [sys.executable, "-m", "memtrio.supervisors.cli", "mcp", "--no-attach"]
    command += ["--answer-failures", "--home", str(how.home)]
    if how.ui:
        command.append("--ui")
    if how.log_level:
        command += ["--log-level", how.log_level]
    try:
        process = subprocess.Popen(
            command, stdin=theirs.fileno(), stdout=theirs.fileno(), cwd=how.cwd, close_fds=True
        )
    except OSError:
        ours.close()
        raise
    finally:
        theirs.close()
    return process, ours


def log_path(home: Path, name: str = LOG_FILE) -> Path:
    return home / LOG_DIR / name


def check_run(home: Path) -> None:
    """Create ``run/`` of ``home`` (private) and check that no one else could write it.

    Error handling: `runtime.Untrusted` (saying why); an `OSError` of an unwritable home.
    """
    private.make_dir(home / runtime.RUN_DIR)
    runtime.check_run_dir(home)


@asynccontextmanager
async def owner_lock(home: Path, timeout: float = LOCK_TIMEOUT) -> AsyncIterator[None]:
    """Hold the home's owner lock (``run/owner.lock``) while the block runs.

    Error handling: `runtime.Untrusted` when others could write ``run/`` (no owner
    could publish there anyway); `OwnerFailed` when another child held the lock
    for ``timeout`` seconds; an `OSError` of an unwritable home propagates.
    """
    run = home / runtime.RUN_DIR
    check_run(home)
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(run / LOCK_FILE, flags, private.FILE_MODE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a symbolic link where the lock belongs
            raise runtime.Untrusted(f"{run / LOCK_FILE} is a symbolic link (remove it)") from None
        if exc.errno == errno.EISDIR:
            raise OwnerFailed(
                f"{run / LOCK_FILE} is a directory, not the owner lock; remove it"
            ) from None
        raise
    try:
        try:
            with trio.fail_after(timeout):
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        await trio.sleep(POLL)
        except trio.TooSlowError:
            raise OwnerFailed(
                f"another memtrio mcp has held {run / LOCK_FILE} for {timeout:g} s "
                "while starting the owner"
            ) from None
        yield
    finally:
        os.close(fd)  # releases the lock


def launch(how: Launch) -> tuple[subprocess.Popen[bytes], int]:
    """Start the owner, detached (see the module docstring); the process and the size
    of ``owner.log`` before it (where its own lines start).

    Error handling: an `OSError` (no interpreter, an unwritable log) propagates.
    """
    return start_detached(how.command(), how.cwd, log_path(how.home))


def detach(home: Path, cwd: Path, argv: list[str]) -> tuple[subprocess.Popen[bytes], int]:
    """``memtrio serve --detach``: start ``memtrio serve <argv>`` of ``home`` detached (as an
    owner: its own session, stdin from /dev/null, its output appended to
    ``logs/serve.log``), marked `DETACHED`; the process and where its log lines start.

    Error handling: an `OSError` (no interpreter, an unwritable log) propagates.
    """
    command = [sys.executable, "-m", "memtrio.supervisors.cli", "serve", DETACHED]
    command += ["--home", str(home), *argv]
    return start_detached(command, cwd, log_path(home, DETACHED_LOG_FILE))


def start_detached(
    command: list[str], cwd: Path, path: Path
) -> tuple[subprocess.Popen[bytes], int]:
    """Run ``command`` in ``cwd`` in a session of its own, its output appended to ``path``;
    the process and the size of ``path`` before it."""
    private.make_dir(path.parent)
    with private.open_file(path, "ab") as log:
        start = log.tell()
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
        )
    return process, start


async def wait_published(
    home: Path,
    process: subprocess.Popen[bytes],
    log_start: int,
    timeout: float = START_TIMEOUT,
    log: str = LOG_FILE,
) -> runtime.Runtime:
    """Wait until the runtime file of ``home`` names ``process``.

    what it published.

    Error handling: `OwnerFailed` (with the last line it logged, in ``logs/<log>``)
    when it exits first, or does not publish within ``timeout`` (then it is killed: a
    half-started owner serves nobody).
    """
    path = log_path(home, log)
    with trio.move_on_after(timeout):
        while True:
            with contextlib.suppress(runtime.Untrusted):
                found, _ = runtime.read(home)
                if found is not None and found.pid == process.pid:
                    return found
            code = process.poll()
            if code is not None:
                last = _last_line(path, log_start)
                said = last.startswith(SAID) and code in REFUSED_CODES
                raise OwnerFailed(
                    f"it exited with code {code}{': ' + last if last else ''} (see {path})",
                    code,
                    reason=last.removeprefix(SAID) if said else "",
                )
            await trio.sleep(POLL)
    stop(process)
    raise OwnerFailed(
        f"it did not publish {runtime.runtime_path(home)} within {timeout:g} s "
        f"and was stopped (see {path})"
    )


def stop(process: subprocess.Popen[bytes]) -> None:
    """Kill a launched owner and its process group (its own), and reap it."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)


def _last_line(path: Path, start: int) -> str:
    """The last line the owner logged (in ``path``, from ``start``), or ""."""
    try:
        with open(path, "rb") as log:
            log.seek(max(start, log.seek(0, os.SEEK_END) - TAIL_BYTES))
            lines = log.read().decode("utf-8", "replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1].strip() if lines else ""


def is_serve(pid: int) -> bool:
    """Whether process ``pid`` runs ``memtrio serve`` (by its command line; True where
    there is no ``/proc`` to ask)."""
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except FileNotFoundError:
        return not Path("/proc/self").exists()
    except OSError:
        return False
    return "serve" in words and any("memtrio" in word for word in words)


def published_serve(home: Path) -> runtime.Runtime | None:
    """The running ``memtrio serve`` the runtime file of ``home`` names, or None (no file,
    a file someone else could have written, or its process gone)."""
    try:
        found, _ = runtime.read(home)
    except runtime.Untrusted:
        return None
    if found is None or not runtime.pid_alive(found.pid) or not is_serve(found.pid):
        return None
    return found


def stop_published(home: Path, grace: float) -> int | None:
    """``memtrio serve --stop``: SIGTERM the ``memtrio serve`` that the runtime file of
    ``home`` names and wait until it has exited (its calls in flight finish within
    ``grace`` seconds; after `STOP_MARGIN` more it is killed with its process group);
    its pid, or None when none runs (a stale file is removed).

    Error handling: `runtime.Untrusted` for a file someone else could have written
    (no signal is sent then).
    """
    found, raw = runtime.read(home)
    if found is None or not runtime.pid_alive(found.pid) or not is_serve(found.pid):
        if raw:
            runtime.remove_if_unchanged(home, raw)
        return None
    with contextlib.suppress(ProcessLookupError):
        os.kill(found.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace + STOP_MARGIN
    while runtime.pid_alive(found.pid):
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(found.pid, signal.SIGKILL)
        time.sleep(POLL)
    return found.pid


def owner_pids(under: Path) -> list[int]:
    """The pids of the running owners (``memtrio serve --owner``) and detached servers
    (``memtrio serve --detach``) of ``under`` or of a home below it, found by their
    command lines (Linux ``/proc``; [] elsewhere)."""
    base = os.path.realpath(under)
    found = []
    try:
        entries = list(Path("/proc").iterdir())
    except OSError:
        return []
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            words = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        marked = "--owner" in words or DETACHED in words
        if "serve" not in words or not marked or "--home" not in words[:-1]:
            continue
        home = os.path.realpath(words[words.index("--home") + 1])
        if (home == base or home.startswith(base + os.sep)) and runtime.pid_alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def kill_owners(under: Path) -> list[int]:
    """SIGKILL every owner of ``under`` (or of a home below it) with its process group, and
    wait (a few seconds at most) until they are gone; their pids. For tests and chaos runs,
    which must leave no process behind."""
    pids = owner_pids(under)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)  # an owner leads its own process group
    deadline = time.monotonic() + 5.0
    while any(runtime.pid_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    return pids
