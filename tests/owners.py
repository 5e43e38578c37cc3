"""The owners (``memtrio serve --owner``) that ``memtrio mcp`` children of a test started:
found by their command line, ended by pid with their process group."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from memtrio.actors.net import runtime


def owner_pids(under: Path) -> list[int]:
    """The pids of the running owners whose home is ``under`` (or below it)."""
    found = []
    base = os.path.realpath(under)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [a.decode(errors="replace") for a in argv]
        if "serve" not in words or "--owner" not in words or "--home" not in words:
            continue
        home = words[words.index("--home") + 1] if words.index("--home") + 1 < len(words) else ""
        real = os.path.realpath(home)
        if real == base or real.startswith(base + os.sep):
            with contextlib.suppress(ValueError):
                found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    return runtime.pid_alive(pid)


def kill_owners(under: Path, timeout: float = 5.0) -> list[int]:
    """SIGKILL every owner of a home under ``under`` and its process group; their pids."""
    pids = owner_pids(under)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)  # an owner leads its own process group
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    return pids
