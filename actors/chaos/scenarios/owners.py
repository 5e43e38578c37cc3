"""``owner-cannot-start``: a ``memtrio mcp`` child (``attach = "auto"``) whose owner cannot
start, for each way a home can stop one (issue 37, item 1): a store of a newer memtrio, a
damaged store (a directory, a garbage file), a full disk (a file-size limit on the child
and so on every owner it starts), ``run/owner.lock`` a symbolic link or a directory,
``logs/`` a file, and an older runtime file (a token, no secret) whose pid is dead.

Each child must answer ``initialize`` and a tool call within `ANSWER_WITHIN` seconds
(served, or refused with one line that says what to do, never an exception's class
name), start at most `attach.MAX_OWNER_STARTS` owners, and exit once its client closes
stdin. The child's stderr is one line per failure.
"""

from __future__ import annotations

import json
import os
import resource
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

import trio

from ...net import attach, runtime, spawn
from ..client import NoReply, ServerGone
from ..harness import Run

ANSWER_WITHIN = 10.0
AUTO = {"MEMTRIO_SERVE_ATTACH": "auto", "MEMTRIO_SERVE_IDLE_EXIT": "2", "MEMTRIO_CODE": "off"}
OWNER_STARTED = "memtrio serve: the owner of "
# A file-size limit under which not even an empty store can be created (a full disk).
FULL_DISK_BYTES = 16 * 1024


def _newer_store(home: Path) -> None:
    with sqlite3.connect(home / "memtrio.sqlite") as db:
        db.execute("PRAGMA user_version = 999")


def _store_a_directory(home: Path) -> None:
    (home / "memtrio.sqlite").mkdir()


def _store_garbage(home: Path) -> None:
    (home / "memtrio.sqlite").write_bytes(os.urandom(16384))


def _lock_a_symlink(home: Path) -> None:
    (home / runtime.RUN_DIR).mkdir(mode=0o700)
    (home / runtime.RUN_DIR / spawn.LOCK_FILE).symlink_to(home / "elsewhere")


def _lock_a_directory(home: Path) -> None:
    (home / runtime.RUN_DIR).mkdir(mode=0o700)
    (home / runtime.RUN_DIR / spawn.LOCK_FILE).mkdir()


def _logs_a_file(home: Path) -> None:
    (home / spawn.LOG_DIR).write_text("not a directory\n")


def _older_runtime_file(home: Path) -> None:
    (home / runtime.RUN_DIR).mkdir(mode=0o700)
    path = runtime.runtime_path(home)
    path.write_text(json.dumps({"pid": _dead_pid(), "host": "127.0.0.1", "port": 1, "token": "t"}))
    path.chmod(0o600)


def _dead_pid() -> int:
    """A pid that no process has now (a child that has exited and been reaped)."""
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def _full_disk() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (FULL_DISK_BYTES, FULL_DISK_BYTES))


# name: (how the home is spoiled, a limit on the child, whether the session is served)
SHAPES: dict[str, tuple[Callable[[Path], None], Callable[[], None] | None, bool]] = {
    "newer-schema": (_newer_store, None, False),
    "store-a-directory": (_store_a_directory, None, False),
    "store-garbage": (_store_garbage, None, False),
    "full-disk": (lambda home: None, _full_disk, False),
    "lock-a-symlink": (_lock_a_symlink, None, True),
    "lock-a-directory": (_lock_a_directory, None, True),
    "logs-a-file": (_logs_a_file, None, True),
    "older-runtime-file": (_older_runtime_file, None, True),
}


def owners_started(home: Path) -> int:
    log = home / spawn.LOG_DIR / spawn.LOG_FILE
    if not log.is_file():
        return 0
    return sum(line.startswith(OWNER_STARTED) for line in log.read_text().splitlines())


async def owner_cannot_start(run: Run) -> None:  # noqa: C901
    """Every way an owner cannot start: the client is answered within 10 s (served, or the
    reason in one line), at most 3 owners are started, the child exits at EOF."""
    out = run.out
    for name, (spoil, limit, served) in SHAPES.items():
        home = run.home(name)
        home.chmod(0o700)
        spoil(home)
        out.faults += 1
        try:
            child = await run.server(home, AUTO, preexec=limit, initialize=False, label=name)
            try:
                reply = await child.initialize(timeout=ANSWER_WITHIN)
                answer = await child.call_tool("stats", {}, timeout=ANSWER_WITHIN)
            except (NoReply, ServerGone) as exc:
                out.violations.append(f"{name}: no answer within {ANSWER_WITHIN:g} s ({exc})")
                continue
            error = answer.get("error") or reply.get("error")
            if served and (error or answer.get("result", {}).get("isError")):
                out.violations.append(f"{name}: not served embedded: {answer}")
            if not served:
                out.errors_seen += 1
                message = str(error.get("message", "")) if isinstance(error, dict) else ""
                if not message:
                    out.violations.append(f"{name}: the call was not refused with why: {answer}")
                elif "Error" in message or "Errno" in message:
                    out.violations.append(f"{name}: an exception's class name: {message}")
            code = await run.stop(child, expect_code=None)
            if code not in (0, 1):
                out.violations.append(f"{name}: the child exited {code} at EOF")
            said = [s for s in child.stderr_text().splitlines() if s.startswith("memtrio:")]
            if any("Error:" in line or "Errno" in line for line in said):
                out.violations.append(f"{name}: an exception's class name on stderr: {said}")
            if not served and len(said) != 1:
                out.violations.append(f"{name}: {len(said)} lines on stderr, not one: {said}")
            started = owners_started(home)
            if started > attach.MAX_OWNER_STARTS:
                out.violations.append(f"{name}: {started} owners started (at most 3)")
            out.notes.append(f"{name}: {started} owner(s)")
        finally:
            with trio.move_on_after(10):
                await trio.to_thread.run_sync(spawn.kill_owners, home)
    out.errors_expected = sum(not served for _, _, served in SHAPES.values())
    out.errors_exact = True
