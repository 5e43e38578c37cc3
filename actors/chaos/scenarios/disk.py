"""Slow and failing storage: a held write lock (SQLITE_BUSY), a full disk (a file-size limit, or a
tiny tmpfs: SQLITE_FULL) and a read-only home. Writes fail cleanly, reads go on, nothing is
half-written and every acknowledged write survives."""

from __future__ import annotations

import os
import resource
import shutil
import sqlite3
import subprocess
import threading
from pathlib import Path

import trio

from ..client import NoReply, ServerGone, ServerProcess
from ..harness import Ledger, Run, content_for, remember, reply_error_text


def _hold_lock(db: Path, ready: threading.Event, release: threading.Event) -> None:
    """Hold the write lock of ``db`` from ``ready`` until ``release`` (a thread of its own)."""
    conn = sqlite3.connect(str(db), isolation_level=None, timeout=30)
    try:
        conn.execute("BEGIN IMMEDIATE")
        ready.set()
        release.wait(60)
        conn.execute("ROLLBACK")
    finally:
        conn.close()


async def sqlite_busy(run: Run) -> None:
    """Another process holds the write lock: writes fail cleanly with SQLITE_BUSY, then succeed once it is released."""
    out = run.out
    home = run.home()
    ledger = Ledger()
    server = await run.server(home, {"MEMTRIO_STORE_BUSY_TIMEOUT_MS": "300"})
    for i in range(5):
        await remember(server, ledger, content_for(run.name, i, run.rng))
    ready, release = threading.Event(), threading.Event()
    holder = threading.Thread(
        target=_hold_lock, args=(home / "memtrio.sqlite", ready, release), daemon=True
    )
    holder.start()
    await trio.to_thread.run_sync(ready.wait, 30)
    out.faults += 1
    blocked = 4
    for i in range(blocked):
        status = await remember(server, ledger, content_for(run.name, 100 + i, run.rng))
        if status != "refused":
            out.violations.append(
                f"a write while the database was locked was {status}, expected a clean refusal"
            )
    release.set()
    await trio.to_thread.run_sync(holder.join, 30)
    for i in range(5):
        status = await remember(server, ledger, content_for(run.name, 200 + i, run.rng))
        if status != "acked":
            out.violations.append(f"a write after the lock was released was {status}")
    await run.stop(server)
    out.errors_expected, out.errors_exact, out.errors_seen = blocked, True, ledger.errors
    run.verify(home, ledger)


async def fill_disk(run: Run, server: ServerProcess, ledger: Ledger, attempts: int) -> int:
    """Big writes until one is refused, then smaller ones until even a short one is.

    Every answer must be an acknowledgement or a clean refusal (anything else is a
    violation); returns how many writes were refused.
    """
    refused = 0
    for size in (16384, 1024, 0):
        for i in range(attempts):
            pad = "x" * size
            status = await remember(
                server, ledger, f"{content_for(run.name, 100 + i, run.rng)} {pad}"
            )
            if status == "refused":
                refused += 1
                if i >= 3:
                    break
            elif status != "acked":
                run.out.violations.append(
                    f"a write on a full disk was {status}, expected a result or a clean refusal"
                )
    return refused


async def disk_full(run: Run) -> None:
    """The disk fills up (a file-size limit on the server): writes fail cleanly, reads go on, nothing is half-written."""
    out = run.out
    home = run.home()
    ledger = Ledger()
    # First fill the store a little without a limit, then restart with the limit
    # just above the files' current sizes.
    await run.prefill(home, ledger, 10, {"MEMTRIO_LOG_LEVEL": "warning"})
    sizes = [p.stat().st_size for p in home.rglob("*") if p.is_file()]
    limit = max(sizes) + 64 * 1024

    def preexec() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    server = await run.server(home, {"MEMTRIO_LOG_LEVEL": "warning"}, preexec=preexec)
    out.faults += 1
    refused = await fill_disk(run, server, ledger, attempts=120)
    if not refused:
        out.violations.append("the disk never filled up: the scenario proved nothing")
    reply = await server.call_tool("stats", {}, timeout=30)
    if (problem := reply_error_text(reply)) is not None:
        out.violations.append(f"stats on a full disk failed: {problem[:200]}")
    reply = await server.call_tool("recall", {"query": "alpha", "limit": 3}, timeout=30)
    if (problem := reply_error_text(reply)) is not None:
        out.violations.append(f"recall on a full disk failed: {problem[:200]}")
    elif not reply["result"].get("structuredContent", {}).get("memories"):
        out.violations.append("recall on a full disk found nothing")
    await run.stop(server)
    out.errors_expected, out.errors_seen = refused, ledger.errors
    # Space again: the store opens and every acknowledged write is there.
    server = await run.server(home)
    await remember(server, ledger, content_for(run.name, 999, run.rng))
    await run.stop(server)
    run.verify(home, ledger)


# Inside a private mount namespace: copy the home aside, mount a small tmpfs
# over it, copy the home back in, run the server, then copy the home out again
# (the tmpfs vanishes with the namespace).
_TMPFS_SCRIPT = (
    'H="$0"; S="$1"; Z="$2"; shift 3; '
    'cp -a "$H"/. "$S"/ && mount -t tmpfs -o size="$Z"k tmpfs "$H" && cp -a "$S"/. "$H"/ || exit 97; '
    '"$@"; rc=$?; rm -rf "$S"; mkdir "$S"; cp -a "$H"/. "$S"/; exit $rc'
)


def _tmpfs_wrap(home: Path, stage: Path, size_kb: int) -> list[str] | None:
    """As root: the server's home on a tmpfs of ``size_kb`` (a really full disk: ENOSPC)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return None
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", 'mount -t tmpfs -o size=64k tmpfs "$0"', str(stage)],
        capture_output=True,
        timeout=10,
    )
    if probe.returncode != 0:
        return None
    return ["unshare", "-m", "sh", "-c", _TMPFS_SCRIPT, str(home), str(stage), str(size_kb), "--"]


async def sqlite_full(run: Run) -> None:
    """The home on a tiny tmpfs fills up for real: SQLite says SQLITE_FULL; writes fail
    cleanly, reads go on, nothing half-written, every acknowledged write survives."""
    out = run.out
    home = run.home()
    stage = run.base / "stage"
    stage.mkdir()
    ledger = Ledger()
    log = {"MEMTRIO_LOG_PATH": str(run.base / "server.log")}  # the log stays off the tmpfs
    await run.prefill(home, ledger, 10, log)
    used = sum(p.stat().st_size for p in home.rglob("*") if p.is_file())
    wrap = await trio.to_thread.run_sync(_tmpfs_wrap, home, stage, used // 1024 + 160)
    if wrap is None:
        out.notes.append("skipped: needs root and a private mount namespace (unshare) for a tmpfs")
        run.verify(home, ledger)
        return
    server = await run.server(home, log, wrap=wrap)
    out.faults += 1
    refused = await fill_disk(run, server, ledger, attempts=200)
    if not refused:
        out.violations.append("the tmpfs never filled up: the scenario proved nothing")
    for tool, args in (("stats", {}), ("recall", {"query": "alpha", "limit": 3})):
        reply = await server.call_tool(tool, args, timeout=30)
        if (problem := reply_error_text(reply)) is not None:
            out.violations.append(f"{tool} on a full disk failed: {problem[:200]}")
    code = await run.stop(server, expect_code=None)
    if code != 0:
        out.violations.append(f"the server on a full disk exited {code}")
    if "database or disk is full" not in server.stderr_text():
        out.violations.append("SQLite never reported SQLITE_FULL (database or disk is full)")
    # The database as the tmpfs left it (the stderr file in home is the real one).
    for path in home.glob("memtrio.sqlite*"):
        path.unlink()
    for path in stage.glob("memtrio.sqlite*"):
        shutil.copy2(path, home / path.name)
    out.errors_expected, out.errors_seen = refused, ledger.errors
    server = await run.server(home, log)
    await remember(server, ledger, content_for(run.name, 999, run.rng))
    await run.stop(server)
    run.verify(home, ledger)


def _readonly_wrap(home: Path) -> list[str] | None:
    """As root: a private mount namespace where ``home`` is a read-only bind mount."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return None
    script = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" "$0" && exec "$@"'
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", script + " 2>/dev/null", str(home), "true"],
        capture_output=True,
        timeout=10,
    )
    return ["unshare", "-m", "sh", "-c", script, str(home)] if probe.returncode == 0 else None


async def _serve_readonly(run: Run, home: Path, ledger: Ledger, wrap: list[str] | None) -> None:
    """Start a server on the read-only ``home``: a clear refusal to start, or a session that
    refuses writes."""
    out = run.out
    server = await run.server(
        home, {"MEMTRIO_LOG_PATH": str(run.base / "ro.log")}, wrap=wrap, initialize=False
    )
    try:
        reply = await server.initialize(timeout=30)
    except (ServerGone, NoReply):
        reply = None
    if reply is None or "result" not in reply:
        code = await server.wait_exit(30)
        stderr = server.stderr_text()
        if code in (0, None):
            out.violations.append(f"read-only home: no session and exit code {code}")
        elif "memtrio" not in stderr or "Traceback" in stderr:
            out.violations.append(f"read-only home: unclear message: {stderr[-300:]!r}")
        last = stderr.strip().splitlines()[-1][:200] if stderr.strip() else ""
        out.notes.append(f"refused to start (exit {code}): {last}")
    else:
        status = await remember(server, ledger, content_for(run.name, 50, run.rng))
        out.errors_expected = 1
        if status != "refused":
            out.violations.append(
                f"a write to a read-only home was {status}, expected a clean refusal"
            )
        reply = await server.call_tool("stats", {}, timeout=30)
        if (problem := reply_error_text(reply)) is not None:
            out.notes.append(f"stats on a read-only home: {problem[:120]}")
        out.errors_seen = ledger.errors
        await run.stop(server, expect_code=None)


async def readonly_home(run: Run) -> None:
    """A read-only disk under the home: the server says so clearly and exits non-zero,
    or serves reads and refuses writes; nothing acknowledged before is lost."""
    out = run.out
    home = run.home()
    ledger = Ledger()
    await run.prefill(home, ledger, 5)
    wrap = await trio.to_thread.run_sync(_readonly_wrap, home)
    if wrap is None:
        if os.geteuid() == 0:
            out.notes.append(
                "skipped: root without a private read-only mount (unshare) ignores file modes"
            )
            run.verify(home, ledger)
            return
        for path in [home, *home.rglob("*")]:
            os.chmod(path, 0o555 if path.is_dir() else 0o444)
    out.faults += 1
    try:
        await _serve_readonly(run, home, ledger, wrap)
    finally:
        for path in [home, *home.rglob("*")]:
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
    run.verify(home, ledger)
