"""A fork server for the memtrio processes the tests start: the same commands, without
paying for Python's start and memtrio's imports at each of them.

A test run starts about a thousand ``memtrio`` processes (``mcp`` sessions, ``serve``
servers, CLI commands), and two thirds of a short one's CPU is its imports. Each xdist
worker starts one *zygote* (``python tests/zygote.py --serve SOCKET``) that imports
memtrio's modules once, then forks a child for each command. A test still starts a
process of its own, the *stand-in*: ``python -I -S tests/zygote.py SOCKET ARGS...``
(stdlib only, a few milliseconds) sends the zygote its standard streams (file
descriptors, over the Unix socket), its arguments, environment, working directory and
umask. The zygote forks; the child takes all of them over and runs
``memtrio.supervisors.cli.main`` exactly as ``python -m memtrio.supervisors.cli ARGS``
would. The stand-in passes on the signals it gets (SIGTERM, SIGINT, SIGHUP, ...) to the
child, and ends with the child's exit status (a signal's as that signal): a test that
waits for, signals or kills the process it started sees what it would have seen.

What keeps it honest:
- a stand-in killed outright (SIGKILL) closes its connection, and the zygote kills its
  child; a child dies with its zygote (``PR_SET_PDEATHSIG``); the zygote, ended at the
  end of its worker's session (`stop`), kills the children left;
- an environment the zygote cannot reproduce in a child (any ``PYTHON*`` variable but
  ``PYTHONUNBUFFERED``, another locale), no zygote, or ``MEMTRIO_TEST_ZYGOTE=off`` in the
  test run's environment: the stand-in becomes the real command (``exec``, same pid);
- tests that need the real thing (start-up time, imports, resource limits through
  ``preexec_fn``, the interpreter's own exit) start ``python -m memtrio.supervisors.cli``
  themselves, as they always did.
"""

from __future__ import annotations

# The stand-in runs this file with ``-I -S`` and must start in a few milliseconds: it uses
# builtin modules only (``socket``, ``signal`` and ``json`` would cost 35 ms of imports).
import _signal
import _socket
import _thread
import array
import marshal
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Sequence
    from typing import Any

REAL = ["-m", "memtrio.supervisors.cli"]
# Locale settings read at start-up that a forked child cannot take on (the PYTHON* ones,
# PYTHONHASHSEED among them, are `CHILD_SETS`' business).
SAME_AS_ZYGOTE = ("LANG", "LC_ALL", "LC_CTYPE")
# The PYTHON* variables a child takes on itself; any other makes the stand-in the real thing.
CHILD_SETS = ("PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE")
FORWARDED = (
    _signal.SIGTERM,
    _signal.SIGINT,
    _signal.SIGHUP,
    _signal.SIGQUIT,
    _signal.SIGUSR1,
    _signal.SIGUSR2,
)


# -- the stand-in (builtin modules only: run with -I -S) ---------------------------------


def settings(env: dict[str, str]) -> str:
    """The start-up settings of an environment that a child cannot change (`SAME_AS_ZYGOTE`)."""
    return "|".join(env.get(k, "") for k in SAME_AS_ZYGOTE)


def _forkable(env: dict[str, str], zygotes: str) -> bool:
    if any(k.startswith("PYTHON") and k not in CHILD_SETS for k in env):
        return False
    return settings(env) == zygotes


def _exec_real(args: list[str], env: dict[str, str]) -> None:
    os.execve(sys.executable, [sys.executable, *REAL, *args], env)


class _Lines:
    """The zygote's answers, a line at a time."""

    def __init__(self, conn: Any) -> None:
        self.conn, self.data = conn, b""

    def readline(self) -> list[bytes]:
        while b"\n" not in self.data:
            try:
                part = self.conn.recv(256)
            except OSError:
                part = b""
            if not part:
                return []
            self.data += part
        line, self.data = self.data.split(b"\n", 1)
        return line.split()


def stand_in(path: str, zygotes: str, args: list[str]) -> None:
    """Run ``memtrio ARGS`` as a child of the zygote at ``path`` (whose start-up settings
    are ``zygotes``), as if it were this process."""
    env = dict(os.environ)
    if not _forkable(env, zygotes):
        _exec_real(args, env)
    pending: list[int] = []
    child: list[int] = []

    def forward(signum: int, frame: object) -> None:
        if not child:
            pending.append(signum)
            return
        try:
            os.kill(child[0], signum)
        except ProcessLookupError:
            pass

    for sig in FORWARDED:
        _signal.signal(sig, forward)
    answers = _request(path, args, env)
    first = answers.readline() if answers is not None else []
    if len(first) != 2 or first[0] != b"pid":  # no zygote, or it is gone: nothing was forked
        _exec_real(args, env)
    assert answers is not None
    child.append(int(first[1]))
    # The child holds the streams now: this process lets go of them (a reader sees the
    # end of the child's output when the child ends, not later).
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    for signum in pending:
        forward(signum, None)
    last = answers.readline()
    if len(last) == 2 and last[0] == b"signal":
        _signal.signal(int(last[1]), _signal.SIG_DFL)
        os.kill(os.getpid(), int(last[1]))
    os._exit(int(last[1]) if len(last) == 2 and last[0] == b"exit" else 1)


def _request(path: str, args: list[str], env: dict[str, str]) -> _Lines | None:
    """Send the zygote this process's streams and command; its answers."""
    try:
        for fd in (0, 1, 2):
            os.fstat(fd)
    except OSError:  # a closed standard stream: the real command copes with it
        return None
    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        conn.connect(path)
    except OSError:
        conn.close()
        return None
    umask = os.umask(0)
    os.umask(umask)
    body = marshal.dumps({"argv": args, "env": env, "cwd": os.getcwd(), "umask": umask})
    rights = [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, array.array("i", [0, 1, 2]))]
    conn.sendmsg([len(body).to_bytes(4, "big")], rights)
    conn.sendall(body)
    return _Lines(conn)


# -- the tests' side -------------------------------------------------------------------

_lock = _thread.allocate_lock()
_zygote: subprocess.Popen[bytes] | None = None  # this worker's zygote
_path = ""
_settings = ""


def command(args: Sequence[str]) -> list[str]:
    """The command line that runs ``memtrio ARGS`` through this worker's zygote (started at
    the first call); the real one when ``MEMTRIO_TEST_ZYGOTE=off`` or the zygote is gone."""
    real = [sys.executable, *REAL, *args]
    if os.environ.get("MEMTRIO_TEST_ZYGOTE", "on") == "off":
        return real
    with _lock:
        if _zygote is None:
            _start()
        if _zygote is None or _zygote.poll() is not None:
            return real
    return [sys.executable, "-I", "-S", __file__, _path, _settings, *args]


def forks(command: Sequence[str]) -> bool:
    """Whether ``command`` (from `command`) is a stand-in's, run through the zygote, rather
    than the real command (the zygote off, or gone)."""
    return list(command[1:4]) == ["-I", "-S", __file__]


def _start() -> None:
    import subprocess
    import tempfile

    global _zygote, _path, _settings
    directory = tempfile.mkdtemp(prefix="memtrio-zygote-")
    _path = os.path.join(directory, "socket")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    _settings = settings(env)
    with open(os.path.join(directory, "zygote.log"), "wb") as log:
        _zygote = subprocess.Popen(
            [sys.executable, os.path.join(os.path.dirname(__file__), "zygote_server.py"), _path]
            + [str(os.getpid())],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            env=env,
            cwd=directory,
        )
    assert _zygote.stdout is not None
    if _zygote.stdout.readline().strip() != b"ready":
        _zygote.kill()
        _zygote.wait()
    _zygote.stdout.close()


def pid_directory(path: str) -> str:
    """Where the zygote at ``path`` names each running child by its stand-in's pid."""
    return os.path.join(os.path.dirname(path), "pids")


def pid_of(pid: int) -> int:
    """The pid of the memtrio process that ``pid`` (a process a test started with
    `command`) runs as: its child's when it is a stand-in, else ``pid`` itself. A test that
    looks at the server's process (its memory, its files, its status's pid) uses this."""
    if not _path:
        return pid
    try:
        with open(os.path.join(pid_directory(_path), str(pid))) as file:
            return int(file.read())
    except (FileNotFoundError, ValueError):
        return pid


def stop() -> None:
    """End this worker's zygote and every child it still has (by their pids)."""
    global _zygote
    zygote, _zygote = _zygote, None
    if zygote is None:
        return
    if zygote.poll() is None:
        zygote.terminate()
        try:
            zygote.wait(timeout=20)
        except Exception:  # noqa: BLE001 - stuck: killed (its children die with it)
            zygote.kill()
            zygote.wait()
    import shutil

    shutil.rmtree(os.path.dirname(_path), ignore_errors=True)


if __name__ == "__main__":
    stand_in(sys.argv[1], sys.argv[2], sys.argv[3:])
