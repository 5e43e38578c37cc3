"""The runtime file of a running ``memtrio serve``: how a ``memtrio mcp`` child finds it.

``memtrio serve`` opens an *attach endpoint* besides its public listener
(``actors.net.owner``) and writes where it is to ``$MEMTRIO_HOME/run/serve.json``: its pid, host,
port and token, the public url, the start time and the memtrio version. The
file is private (``0600`` in a ``0700`` directory, as everything in the home,
see ``supervisors.private``) since the token opens a session; it is replaced
atomically, so a reader never sees half of it. It is removed when the listener
stops, and only if it is still this process's file (another ``memtrio serve``
may have replaced it meanwhile).

A process killed without a chance to clean up leaves the file behind: the
``memtrio mcp`` child that finds it checks that its pid is alive and that its
endpoint answers (``actors.net.attach``), and removes a stale one.

This module is the file alone (no transport), so the child imports little.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import msgspec

from ...supervisors import private

RUN_DIR = "run"
RUNTIME_FILE = "serve.json"


class Runtime(msgspec.Struct, forbid_unknown_fields=False):
    """What ``run/serve.json`` holds."""

    pid: int
    host: str
    port: int
    token: str
    url: str = ""  # the public endpoint of the server ("" if it has none)
    started: float = 0.0  # when the server started (seconds since the epoch)
    version: str = ""


_decoder = msgspec.json.Decoder(Runtime)


def runtime_path(home: Path) -> Path:
    """Where ``memtrio serve`` of ``home`` says where it listens."""
    return home / RUN_DIR / RUNTIME_FILE


def publish(home: Path, runtime: Runtime) -> Path:
    """Write ``runtime`` to the runtime file (private, replaced atomically); its path.

    Error handling: an `OSError` (an unwritable home) propagates.
    """
    path = runtime_path(home)
    private.make_dir(path.parent)
    with private.replace_file(path, binary=True) as out:
        out.write(msgspec.json.encode(runtime) + b"\n")
    return path


def read(home: Path) -> tuple[Runtime | None, bytes]:
    """The runtime file of ``home``: (its content or None when it is not valid, its raw bytes).

    ``(None, b"")`` when there is no file (or it cannot be read).
    """
    try:
        raw = runtime_path(home).read_bytes()
    except OSError:
        return None, b""
    try:
        return _decoder.decode(raw), raw
    except msgspec.DecodeError:  # ValidationError included: not a runtime file
        return None, raw


def remove_if_unchanged(home: Path, raw: bytes) -> bool:
    """Remove the runtime file if it still holds ``raw``; whether it was removed.

    A file someone rewrote since ``raw`` was read (a new ``memtrio serve``) is kept.
    """
    path = runtime_path(home)
    try:
        if path.read_bytes() != raw:
            return False
        path.unlink()
    except OSError:
        return False
    return True


def withdraw(home: Path, runtime: Runtime) -> bool:
    """Remove the runtime file if it is still ``runtime``'s (same pid and token)."""
    found, raw = read(home)
    if found is None or found.pid != runtime.pid or found.token != runtime.token:
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
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rpartition(")")[2].split()[0] not in ("Z", "X")
    return True
