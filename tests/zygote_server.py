"""The zygote of `zygote` (read its docstring): ``python tests/zygote_server.py SOCKET``
imports memtrio's modules once, then forks a child for each stand-in that connects, which
runs ``memtrio.supervisors.cli.main`` with the stand-in's streams, arguments, environment,
working directory and umask. It ends (its children killed) at SIGTERM."""

from __future__ import annotations

import contextlib
import marshal
import os
import selectors
import signal
import socket
import struct
import sys
from typing import Any

from zygote import FORWARDED, pid_directory

# Native libraries that start threads when imported (a fork keeps only the forking
# thread) or are large and used by few commands: a child imports them itself.
NOT_PRELOADED = (
    "numpy",
    "onnxruntime",
    "tokenizers",
    "igraph",
    "psycopg",
    "psycopg_binary",
    "usearch",
    "tree_sitter",
    "tree_sitter_language_pack",
    "pgserver",
)


class _Refuse:
    """A meta path finder that refuses `NOT_PRELOADED` while the zygote preloads."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name.split(".")[0] in NOT_PRELOADED:
            raise ImportError(f"{name} is not preloaded")
        return None


def preload() -> None:
    """Import every memtrio module that loads without `NOT_PRELOADED`."""
    import importlib
    from pathlib import Path

    refuse = _Refuse()
    sys.meta_path.insert(0, refuse)
    try:
        import memtrio.supervisors.cli

        # The package's files (an editable install's finder cannot be walked by pkgutil).
        root = Path(memtrio.supervisors.cli.__file__).parent.parent
        names = []
        for sub in ("protocol", "supervisors", "actors"):
            for file in sorted((root / sub).rglob("*.py")):
                parts = file.relative_to(root).with_suffix("").parts
                if "chaos" not in parts:
                    names.append(
                        ".".join(["memtrio", *parts[: -1 if parts[-1] == "__init__" else None]])
                    )
        for name in names:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001,S112 - a child imports it itself, if it needs it
                continue
    finally:
        sys.meta_path.remove(refuse)
    for name in [m for m in sys.modules if m.split(".")[0] in NOT_PRELOADED]:
        raise RuntimeError(f"the zygote preloaded {name}, which must not be forked")


def warm() -> None:
    """Work every command does once per process, done once here for every child: the
    secrets screen's plan (its rules' patterns parsed), the configuration's types (msgspec's
    type information) and the command line's parser (the regular expressions it compiles).
    Each is a cache of the process; no thread starts and nothing is written but a scratch
    directory, removed."""
    import shutil
    import tempfile
    from pathlib import Path

    from memtrio.protocol import secrets
    from memtrio.supervisors import cli, config

    secrets.find_secrets("warm: the screen's plan")
    scratch = tempfile.mkdtemp(prefix="memtrio-zygote-warm-")
    try:
        config.load(Path(scratch), env={})
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    cli.build_parser()


class Job:
    """A forked child's command: the stand-in's streams, arguments, environment."""

    def __init__(
        self, fds: list[int], request: dict[str, Any], inherited: list[Any], pipe: tuple[int, int]
    ) -> None:
        self.fds, self.request, self.inherited, self.pipe = fds, request, inherited, pipe

    def run(self) -> int:
        import ctypes
        import tempfile
        import time

        zygote = os.getppid()
        signal.set_wakeup_fd(-1)
        for thing in self.inherited:  # the zygote's sockets and selector
            thing.close()
        for fd in self.pipe:
            os.close(fd)
        for sig in (signal.SIGCHLD, signal.SIGTERM, *FORWARDED):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() != zygote:
            os._exit(137)
        for target, fd in enumerate(self.fds):
            os.dup2(fd, target)
        for fd in self.fds:
            if fd > 2:
                os.close(fd)
        request = self.request
        os.chdir(request["cwd"])
        os.umask(request["umask"])
        os.environ.clear()
        os.environ.update(request["env"])
        time.tzset()
        tempfile.tempdir = None
        sys.dont_write_bytecode = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
        unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
        # Encoding and errors as the zygote's own start-up chose them (the same locale
        # settings as the stand-in's: `zygote._forkable`), the buffering as the child's.
        sys.stdin = sys.__stdin__ = _stream(0, False, unbuffered, sys.__stdin__)
        sys.stdout = sys.__stdout__ = _stream(1, True, unbuffered, sys.__stdout__)
        sys.stderr = sys.__stderr__ = _stream(2, True, unbuffered, sys.__stderr__)
        from memtrio.supervisors import cli

        sys.argv = [cli.__file__, *request["argv"]]
        sys.path[0] = request["cwd"]
        return cli.main()


def _stream(fd: int, write: bool, unbuffered: bool, like: Any):  # noqa: ANN202
    """The text stream Python's start-up makes of ``fd`` (`PYTHONUNBUFFERED` included), with
    the encoding and errors of ``like`` (the zygote's own stream of that fd)."""
    import io

    raw = io.FileIO(fd, "wb" if write else "rb", closefd=False)
    buffer: io.RawIOBase | io.BufferedIOBase
    if write and unbuffered:
        buffer = raw
    elif write:
        buffer = io.BufferedWriter(raw)
    else:
        buffer = io.BufferedReader(raw)
    line = not unbuffered and (raw.isatty() or fd == 2)
    return io.TextIOWrapper(
        buffer,  # type: ignore[arg-type]
        encoding=getattr(like, "encoding", None) or "utf-8",
        errors=getattr(like, "errors", None) or "strict",
        newline="\n",
        line_buffering=line,
        write_through=unbuffered,
    )


def _receive(conn: socket.socket) -> tuple[list[int], dict[str, Any]] | None:
    conn.settimeout(10)
    try:
        head, fds, _flags, _addr = socket.recv_fds(conn, 4, 3)
        if len(head) != 4 or len(fds) != 3:
            for fd in fds:
                os.close(fd)
            return None
        size = int.from_bytes(head, "big")
        body = b""
        while len(body) < size:
            part = conn.recv(size - len(body))
            if not part:
                break
            body += part
    except OSError:
        return None
    if len(body) != size:
        for fd in fds:
            os.close(fd)
        return None
    conn.settimeout(None)
    return fds, marshal.loads(body)


class Zygote:
    """The fork server's state: its socket, and the connection of each child's stand-in."""

    def __init__(self, path: str, parent: int) -> None:
        self.path, self.parent = path, parent
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(64)
        self.wake = os.pipe()
        for fd in self.wake:
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(self.wake[1])
        self.stopping: list[int] = []
        signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes the selector (the pipe)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self.stopping.append(1))
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ)
        self.selector.register(self.wake[0], selectors.EVENT_READ)
        self.children: dict[int, socket.socket] = {}
        self.standins: dict[int, int] = {}  # child pid -> its stand-in's pid
        self.pids = pid_directory(path)
        os.makedirs(self.pids, exist_ok=True)

    def run(self) -> Job | None:
        """Serve until SIGTERM (None: every child killed); a `Job` in each forked child."""
        while not self.stopping:
            if os.getppid() != self.parent:  # the test process that started it is gone
                break
            for key, _events in self.selector.select(timeout=1.0):
                if key.fileobj is self.listener:
                    job = self._fork()
                    if job is not None:
                        return job
                elif key.fileobj == self.wake[0]:
                    with contextlib.suppress(BlockingIOError):
                        os.read(self.wake[0], 4096)
                else:
                    self._stand_in_readable(key)
            self._reap()
        for pid in self.children:
            _kill(pid)
        for pid in self.children:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        import shutil

        shutil.rmtree(os.path.dirname(self.path), ignore_errors=True)  # socket, log, pids
        return None

    def _fork(self) -> Job | None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return None
        got = _receive(conn)
        if got is None:
            conn.close()
            return None
        fds, request = got
        pid = os.fork()
        if pid == 0:
            inherited = [self.listener, conn, self.selector, *self.children.values()]
            return Job(fds, request, inherited, self.wake)
        for fd in fds:
            os.close(fd)
        self.children[pid] = conn
        self.selector.register(conn, selectors.EVENT_READ, pid)
        # Which child stands behind which stand-in (`zygote.pid_of`), by the stand-in's pid.
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        standin = struct.unpack("3i", creds)[0]
        self.standins[pid] = standin
        with open(os.path.join(self.pids, str(standin)), "w") as file:
            file.write(str(pid))
        try:
            conn.sendall(b"pid %d\n" % pid)
        except OSError:
            _kill(pid)
        return None

    def _stand_in_readable(self, key: selectors.SelectorKey) -> None:
        """A stand-in sends nothing after its request: readable means closed (it was
        killed), and its child is killed too."""
        conn = key.fileobj
        assert isinstance(conn, socket.socket)
        try:
            data = conn.recv(64)
        except OSError:
            data = b""
        if not data:
            self.selector.unregister(conn)
            _kill(key.data)

    def _reap(self) -> None:
        """Tell each ended child's stand-in how it ended."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            standin = self.standins.pop(pid, None)
            if standin is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(self.pids, str(standin)))
            conn = self.children.pop(pid, None)
            if conn is None:
                continue
            code = os.waitstatus_to_exitcode(status)
            with contextlib.suppress(KeyError, ValueError):
                self.selector.unregister(conn)
            with contextlib.suppress(OSError):
                conn.sendall(b"signal %d\n" % -code if code < 0 else b"exit %d\n" % code)
            conn.close()


def serve(path: str, parent: int) -> Job | None:
    """Preload, then serve at ``path``: see `Zygote.run`."""
    import gc

    preload()
    warm()
    gc.collect()
    gc.freeze()  # the children's collections skip the preloaded objects (and their pages)
    zygote = Zygote(path, parent)
    print("ready", flush=True)
    return zygote.run()


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


if __name__ == "__main__":
    job = serve(sys.argv[1], int(sys.argv[2]))
    sys.exit(job.run() if job is not None else 0)
