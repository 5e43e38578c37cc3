"""The chaos scenarios. Each takes a `Run` and fills its `Outcome`.

``QUICK`` is what ``memtrio chaos --quick`` runs (CI, under 3 minutes on two
cores); ``FULL`` is the development matrix (``tools/chaos.py``).
"""

from __future__ import annotations

import os
import resource
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import trio

from .client import NoReply, ServerGone, ServerProcess
from .harness import (
    Ledger,
    Run,
    Scenario,
    content_for,
    drive_load,
    log_counts,
    make_checkout,
    remember,
    reply_error_text,
)
from .malformed import run_malformed

# -- helpers ---------------------------------------------------------------------

_LONG_WORDS = "module function parser index memory commit window vector token graph".split()


def crash_points(run: Run, point: str, count: int, first: int, last: int) -> str:
    """A MEMTRIO_FAULTS spec raising at ``count`` distinct random hits of ``point``."""
    hits = sorted(run.rng.sample(range(first, last), count))
    # Rules for one point count hits independently until one fires: rule k sees
    # every hit but those where an earlier rule fired, so shift by k.
    return ",".join(f"{point}=raise@{h - k}" for k, h in enumerate(hits))


async def crash_under_load(
    run: Run,
    point: str,
    crashes: int,
    *,
    calls: int,
    first: int = 4,
    span: int | None = None,
    env: dict[str, str] | None = None,
    errors_per_crash: int = 0,
    rounds: int = 1,
    restarts_per_crash: int = 1,
) -> None:
    """``crashes`` injected exceptions at random hits of ``point`` under concurrent load, ``rounds`` times."""
    out = run.out
    home = run.home()
    ledger = Ledger()
    for round_ in range(rounds):
        spec = crash_points(
            run, point, crashes, first, span or max(first + crashes + 1, calls // 2)
        )
        server = await run.server(home, {"MEMTRIO_FAULTS": spec, **(env or {})})
        await drive_load(
            server,
            ledger,
            tag=f"{run.name}-{round_}",
            calls=calls,
            concurrency=4,
            rng=run.rng,
            out=out,
        )
        # The server still serves after its crashes.
        reply = await server.request("ping", timeout=30)
        if "result" not in reply:
            out.violations.append(f"ping after the crashes failed: {reply}")
        await run.stop(server)
    out.errors_seen = ledger.errors
    out.errors_expected = errors_per_crash * crashes * rounds
    counts = log_counts(home)
    if counts.restarts != restarts_per_crash * counts.faults:
        out.violations.append(
            f"{counts.faults} crashes but {counts.restarts} restarts (expected {restarts_per_crash} per crash)"
        )
    run.verify(home, ledger)


# -- actor crashes under load --------------------------------------------------------


async def crash_reader(run: Run) -> None:
    """StdioReader crashes at random reads: no input is lost, every request answered."""
    await crash_under_load(
        run, "stdio.read", 3, calls=60 if run.quick else 200, rounds=2 if run.quick else 4
    )


async def crash_session(run: Run) -> None:
    """Session crashes at random dispatches: that request gets -32603, the rest go on."""
    await crash_under_load(
        run,
        "session.dispatch",
        3,
        calls=60 if run.quick else 200,
        errors_per_crash=1,
        rounds=2 if run.quick else 4,
    )


async def crash_writer(run: Run) -> None:
    """StdoutWriter crashes at random writes: its line in hand is written after the restart."""
    await crash_under_load(
        run, "stdio.write", 3, calls=60 if run.quick else 200, rounds=2 if run.quick else 4
    )


async def crash_store(run: Run) -> None:
    """StoreWriter crashes while serving writes: that call fails, the writer comes back, nothing acked is lost."""
    await crash_under_load(
        run,
        "store.write",
        2 if run.quick else 3,
        calls=50 if run.quick else 150,
        errors_per_crash=1,
        env={"MEMTRIO_SERVER_SHUTDOWN_GRACE": "2"},
        restarts_per_crash=2,  # root rest_for_one: the store, then the transport after it
        rounds=1 if run.quick else 2,
    )


async def crash_everything(run: Run) -> None:
    """Reader, session, writer, StoreWriter and commit faults all at once, at random (seeded) hits."""
    out = run.out
    home = run.home()
    ledger = Ledger()
    rounds = 2 if run.quick else 6
    for round_ in range(rounds):
        points = ["stdio.read", "session.dispatch", "stdio.write", "store.write", "store.commit"]
        spec = ",".join(f"{p}=raise%0.004" for p in points)
        env = {
            "MEMTRIO_FAULTS": spec,
            "MEMTRIO_FAULTS_SEED": str(run.seed * 1000 + round_),
            "MEMTRIO_SERVER_SHUTDOWN_GRACE": "1",
        }
        server = await run.server(home, env)
        await drive_load(
            server,
            ledger,
            tag=f"{run.name}-{round_}",
            calls=300,
            concurrency=4,
            rng=run.rng,
            out=out,
        )
        if server.gone:
            # Crashes may come faster than a restart intensity allows: then the
            # server must give up cleanly (exit 1, saying so), losing nothing.
            code = await server.wait_exit(30)
            if code != 1 or "gave up" not in server.stderr_text():
                out.violations.append(f"round {round_}: the server died with exit code {code}")
            else:
                out.notes.append(f"round {round_}: a supervisor gave up (exit 1)")
            continue
        for _ in range(3):  # the ping itself may meet a fault (-32603): try again
            reply = await server.request("ping", timeout=30)
            if "result" in reply:
                break
        else:
            out.violations.append(f"ping after the crashes failed three times: {reply}")
        await run.stop(server)
    out.errors_seen = ledger.errors
    run.verify(home, ledger)


async def commit_fault(run: Run) -> None:
    """An exception right before COMMIT: the call fails cleanly and nothing of it is stored."""
    out = run.out
    home = run.home()
    ledger = Ledger()
    n = 20 if run.quick else 60
    faults = 3 if run.quick else 8
    spec = crash_points(run, "store.commit", faults, 1, n)
    server = await run.server(home, {"MEMTRIO_FAULTS": spec})
    for i in range(n):
        status = await remember(server, ledger, content_for(run.name, i, run.rng))
        if status not in ("acked", "refused"):
            out.violations.append(f"write {i}: expected a result or a clean refusal, got {status}")
    await run.stop(server)
    out.errors_expected, out.errors_exact, out.errors_seen = faults, True, ledger.errors
    if len(ledger.refused) != faults:
        out.violations.append(f"{faults} commit faults but {len(ledger.refused)} clean refusals")
    run.verify(home, ledger)


async def crash_embedder(run: Run) -> None:
    """Embedder workers crash (and one hangs): those calls fail clearly, store nothing, the pool recovers."""
    out = run.out
    home = run.home()
    ledger = Ledger()
    calls = 16 if run.quick else 60
    crashes = 2 if run.quick else 4
    hits = sorted(run.rng.sample(range(2, calls - 4), crashes + 1))
    hang = hits.pop(run.rng.randrange(len(hits)))
    rules = [f"embedder.embed=raise@{h}" for h in hits] + [f"embedder.embed=hang@{hang}"]
    env = {
        "MEMTRIO_EMBEDDINGS": "on",
        "MEMTRIO_EMBEDDING_WORKERS": "2",
        "MEMTRIO_EMBEDDING_TIMEOUT": "3",
        "MEMTRIO_EMBEDDING_INTRA_OP_THREADS": "1",
        "MEMTRIO_FAULTS": ",".join(rules),
    }
    server = await run.server(home, env)
    # Writes only: a recall whose query embedding fails falls back to lexical ranking (no error).
    await drive_load(
        server, ledger, tag=run.name, calls=calls, concurrency=2, rng=run.rng, out=out, reads=0.0
    )
    # Recovered: a few more writes all succeed, quickly.
    for i in range(3):
        with trio.move_on_after(10) as late:
            status = await remember(server, ledger, content_for(run.name, 1000 + i, run.rng))
        if late.cancelled_caught or status != "acked":
            out.violations.append(
                f"the embedder pool did not recover: write after the faults was {status}"
            )
    await run.stop(server)
    out.errors_seen = ledger.errors
    out.errors_expected = 1 + crashes  # the hang times out; each crash fails its batch (>= 1 call)
    run.verify(home, ledger, embeddings=True)


async def crash_ranker(run: Run) -> None:
    """The ranker crashes during recalls: recall still answers (lexically), the ranker comes back."""
    out = run.out
    home = run.home()
    ledger = Ledger()
    env = {
        "MEMTRIO_EMBEDDINGS": "on",
        "MEMTRIO_EMBEDDING_INTRA_OP_THREADS": "1",
        "MEMTRIO_SERVER_SHUTDOWN_GRACE": "2",
        "MEMTRIO_FAULTS": crash_points(run, "ranker.rank", 3, 2, 20),
    }
    server = await run.server(home, env)
    for i in range(10):
        await remember(server, ledger, content_for(run.name, i, run.rng))
    failed = 0
    for i in range(25):
        reply = await server.call_tool(
            "recall", {"query": "alpha bravo delta", "limit": 5}, timeout=60
        )
        if reply_error_text(reply) is not None:
            failed += 1
            out.violations.append(
                f"recall {i} failed while the ranker crashed: {reply_error_text(reply)[:160]}"
            )
    await run.stop(server)
    out.errors_seen = ledger.errors + failed
    out.errors_expected, out.errors_exact = 0, True
    run.verify(home, ledger, embeddings=True)


async def crash_code_workers(run: Run) -> None:
    """Parser worker processes die (exit 137) or raise on some files: those files are reported, the rest indexed."""
    out = run.out
    home = run.home()
    repo = run.base / "repo"
    files = 12 if run.quick else 30
    await trio.to_thread.run_sync(make_checkout, repo, files)
    victims = run.rng.sample(range(files), 3 if run.quick else 6)
    rules = [
        f"code.parse:mod{v}.py={'exit' if k % 2 == 0 else 'raise'}" for k, v in enumerate(victims)
    ]
    env = {
        "MEMTRIO_CODE": "on",
        "MEMTRIO_CODE_INDEX_THREADS": "2",
        "MEMTRIO_FAULTS": ",".join(rules),
    }
    server = await run.server(home, env, cwd=repo)
    out.faults += len(victims)  # they fire in worker processes, which keep no trace log
    ok_files = 0
    for i in range(files):
        reply = await server.call_tool("code_outline", {"path": f"mod{i}.py"}, timeout=120)
        error = reply_error_text(reply)
        text = _text(reply)
        if i in victims:
            if error is None and f"Thing{i}" in text:
                out.violations.append(f"mod{i}.py crashed its parser but has an outline")
            else:
                out.errors_seen += 1 if error is not None else 0
        elif error is not None or f"Thing{i}" not in text:
            out.violations.append(f"mod{i}.py (no fault) has no outline: {(error or text)[:160]}")
        else:
            ok_files += 1
    reply = await server.call_tool("find_symbol", {"query": "helper"}, timeout=120)
    if reply_error_text(reply) is not None:
        out.violations.append(
            f"find_symbol failed after the worker crashes: {reply_error_text(reply)[:160]}"
        )
    await run.stop(server)
    out.notes.append(f"{ok_files}/{files - len(victims)} clean files outlined")


def _text(reply: dict[str, Any]) -> str:
    result = reply.get("result") or {}
    return " ".join(c.get("text", "") for c in result.get("content", []) if isinstance(c, dict))


async def sdk_client_crashes(run: Run) -> None:
    """The official MCP Python SDK as the client while the reader, session, writer and store crash."""
    out = run.out
    try:
        from mcp import Client, StdioServerParameters
    except ImportError:
        out.notes.append(
            "skipped: the official `mcp` SDK is not installed (pip install 'memtrio[test]')"
        )
        return
    from .client import server_command, server_env

    home = run.home()
    ledger = Ledger()
    calls = 40 if run.quick else 120
    spec = ",".join(
        [
            crash_points(run, "stdio.read", 2, 5, calls),
            crash_points(run, "session.dispatch", 2, 5, calls),
            crash_points(run, "stdio.write", 2, 5, calls),
            crash_points(run, "store.write", 1, 5, calls // 2),
        ]
    )
    env = {
        "MEMTRIO_FAULTS": spec,
        "MEMTRIO_FAULTS_SEED": str(run.seed),
        "MEMTRIO_SERVER_SHUTDOWN_GRACE": "1",
        "MEMTRIO_LOG_STDERR_LEVEL": "off",  # the SDK passes the server's stderr through
    }
    command = server_command()
    params = StdioServerParameters(
        command=command[0], args=command[1:], env=server_env(home, env), cwd=str(home)
    )
    (home / "logs").mkdir(parents=True, exist_ok=True)
    async with Client(params, read_timeout_seconds=30, mode="auto") as client:
        for i in range(calls):
            content = content_for(run.name, i, run.rng)
            ledger.calls += 1
            out.requests += 1
            try:
                result = await client.call_tool("remember", {"content": content})
            except Exception as exc:  # noqa: BLE001 - the SDK raises for JSON-RPC errors
                ledger.errors += 1
                ledger.unknown.append(content)
                if "Timeout" in type(exc).__name__ or "timed out" in str(exc).lower():
                    out.violations.append(f"the SDK client timed out waiting for a reply: {exc}")
                continue
            structured = getattr(result, "structured_content", None) or {}
            if result.is_error or not isinstance(structured.get("id"), int):
                ledger.errors += 1
                ledger.unknown.append(content)
            else:
                ledger.acked[structured["id"]] = content
    counts = log_counts(home)
    out.faults += counts.faults
    out.restarts += counts.restarts
    out.errors_seen = ledger.errors
    out.errors_expected = 2 + 1  # each session crash and the store crash fail one call
    run.verify(home, ledger)


# -- kill -9 in the middle of bursts ------------------------------------------------


async def kill9_bursts(run: Run, *, embeddings: bool = False, rounds: int | None = None) -> None:
    """kill -9 of the server in the middle of a burst of writes, then a restart; repeated.

    Every write acknowledged before the kill must be in the database after it,
    which must pass integrity checks with FTS and vectors agreeing with the rows.
    """
    out = run.out
    home = run.home()
    ledger = Ledger()
    rounds = rounds or (5 if run.quick else 25)
    env = (
        {"MEMTRIO_EMBEDDINGS": "on", "MEMTRIO_EMBEDDING_INTRA_OP_THREADS": "1"}
        if embeddings
        else {}
    )
    for round_ in range(rounds):
        server = await run.server(home, env)
        if embeddings:
            await remember(
                server, ledger, content_for(run.name, -round_, run.rng)
            )  # loads the model
        burst = 200 if not embeddings else 60
        delay = run.rng.uniform(0.05, 0.6) if not embeddings else run.rng.uniform(0.5, 3.0)

        async def fire(
            server: ServerProcess = server, round_: int = round_, burst: int = burst
        ) -> None:
            async with trio.open_nursery() as nursery:
                for i in range(burst):
                    content = content_for(f"{run.name}-{round_}", i, run.rng)
                    if embeddings and i % 20 == 0:  # long: embedded as several windows
                        content += " " + " ".join(run.rng.choice(_LONG_WORDS) for _ in range(250))
                    nursery.start_soon(remember, server, ledger, content)
                    await trio.sleep(0.002)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(fire)
            await trio.sleep(delay)
            server.kill9()
        out.faults += 1
        out.restarts += 1 if round_ else 0
        await server.process.wait()
    # A last clean start after the final kill: the store opens and serves.
    server = await run.server(home, env)
    reply = await server.call_tool("stats", {}, timeout=60)
    if reply_error_text(reply) is not None:
        out.violations.append(f"stats after the last kill failed: {reply_error_text(reply)[:200]}")
    await run.stop(server)
    out.restarts += 1
    out.errors_seen = ledger.errors
    out.notes.append(f"{len(ledger.acked)} acked, {len(ledger.unknown)} cut off by the kills")
    if not ledger.acked:
        out.violations.append(
            "no write was acknowledged before the kills: the scenario proved nothing"
        )
    run.verify(home, ledger, embeddings=embeddings)


async def kill9_embeddings(run: Run) -> None:
    await kill9_bursts(run, embeddings=True, rounds=3 if run.quick else 6)


async def exit_at_commit(run: Run) -> None:
    """The process dies (exit 137, like kill -9) right before a COMMIT, repeatedly."""
    out = run.out
    home = run.home()
    ledger = Ledger()
    for round_ in range(3 if run.quick else 8):
        at = run.rng.randint(2, 25)
        server = await run.server(home, {"MEMTRIO_FAULTS": f"store.commit=exit@{at}"})
        async with trio.open_nursery() as nursery:
            for i in range(40):
                nursery.start_soon(
                    remember, server, ledger, content_for(f"{run.name}-{round_}", i, run.rng)
                )
                await trio.sleep(0.003)
        code = await server.wait_exit(20)
        if code != 137:
            out.violations.append(f"round {round_}: expected the injected exit 137, got {code}")
        out.restarts += 1
    run.verify(home, ledger)
    out.errors_seen = ledger.errors


# -- slow and failing dependencies -----------------------------------------------------


def _hold_lock(db: Path, ready: Any, release: Any) -> None:
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
    import threading

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


async def fill_disk(run: Run, server: Any, ledger: Ledger, attempts: int) -> int:
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
    server = await run.server(home, {"MEMTRIO_LOG_LEVEL": "warning"})
    for i in range(10):
        await remember(server, ledger, content_for(run.name, i, run.rng))
    await run.stop(server)
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
    if reply_error_text(reply) is not None:
        out.violations.append(f"stats on a full disk failed: {reply_error_text(reply)[:200]}")
    reply = await server.call_tool("recall", {"query": "alpha", "limit": 3}, timeout=30)
    if reply_error_text(reply) is not None:
        out.violations.append(f"recall on a full disk failed: {reply_error_text(reply)[:200]}")
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
    server = await run.server(home, log)
    for i in range(10):
        await remember(server, ledger, content_for(run.name, i, run.rng))
    await run.stop(server)
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
        if reply_error_text(reply) is not None:
            out.violations.append(f"{tool} on a full disk failed: {reply_error_text(reply)[:200]}")
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


async def readonly_home(run: Run) -> None:
    """A read-only disk under the home: the server says so clearly and exits non-zero,
    or serves reads and refuses writes; nothing acknowledged before is lost."""
    out = run.out
    home = run.home()
    ledger = Ledger()
    server = await run.server(home)
    for i in range(5):
        await remember(server, ledger, content_for(run.name, i, run.rng))
    await run.stop(server)
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
            if reply_error_text(reply) is not None:
                out.notes.append(f"stats on a read-only home: {reply_error_text(reply)[:120]}")
            out.errors_seen = ledger.errors
            await run.stop(server, expect_code=None)
    finally:
        for path in [home, *home.rglob("*")]:
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
    run.verify(home, ledger)


# -- hostile import files ------------------------------------------------------------------


def _import_cases(base: Path) -> list[tuple[str, Path]]:
    """Hostile files for ``memtrio import``, each written under ``base``."""
    import json

    def line(record: dict[str, Any]) -> bytes:
        return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    ok = line({"type": "entity", "name": "Alice", "entityType": "person", "observations": ["x"]})
    header = line({"type": "header", "format": "memtrio-export", "version": 1})
    memory = {
        "type": "memory", "id": 1, "content": "c", "memory_type": "note", "importance": 0.0,
        "created_at": 1.0, "updated_at": 1.0,
    }  # fmt: skip
    huge = (
        b'{"type":"entity","name":"Bob","entityType":"t","observations":["'
        + b"x" * (20 * 1024 * 1024)
        + b'"]}'
    )
    cases = {
        "oversized-observation": ok
        + b"\n"
        + line({"type": "entity", "name": "B", "entityType": "t", "observations": ["x" * 65537]}),
        "oversized-line": ok + b"\n" + huge,
        "wrong-type": header + b"\n" + line({**memory, "scopes": "global"}),
        "bad-utf8": b'{"type":"entity","name":"caf\xe9","entityType":"t","observations":[]}',
        "deep-nesting": ok
        + b"\n"
        + b'{"type":"entity","name":'
        + b"[" * 100_000
        + b"]" * 100_000
        + b"}",
        "bom": b"\xef\xbb\xbf" + ok,
        "nul-bytes": ok + b"\n\x00\x00garbage",
        "truncated": ok + b"\n" + ok[:30],
        "negative-id": header + b"\n" + line({**memory, "id": -1}),
        "duplicate-ids": header + b"\n" + line(memory) + b"\n" + line(memory),
        "nan": header + b"\n" + line(memory).replace(b'"importance":0.0', b'"importance":NaN'),
        "empty": b"",
    }
    out = []
    for name, data in cases.items():
        path = base / f"{name}.jsonl"
        path.write_bytes(data)
        out.append((name, path))
    fifo = base / "fifo.jsonl"
    os.mkfifo(fifo)  # nobody writes it: a blocking open() would hang
    out.append(("fifo", fifo))
    out.append(("directory", base))
    return out


def _tables(db: Path) -> dict[str, list[str]]:
    conn = sqlite3.connect(str(db))
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {t: sorted(map(repr, conn.execute(f'SELECT * FROM "{t}"'))) for t in names}
    finally:
        conn.close()


async def import_limits(run: Run) -> None:
    """Hostile ``memtrio import`` files (oversized, wrong types, bad UTF-8, deep nesting, a FIFO...)
    are each refused in one line with exit 1 and the store unchanged; then a valid import at the
    limits succeeds and a recall afterwards stays fast and bounded."""
    import json
    import sys
    import time

    from .client import server_env

    out = run.out
    home = run.home()
    ledger = Ledger()
    server = await run.server(home)
    for i in range(5):
        await remember(server, ledger, content_for(run.name, i, run.rng))
    await run.stop(server)
    db = home / "memtrio.sqlite"

    async def cli(*args: str) -> tuple[int | None, str]:
        with trio.move_on_after(120):
            done = await trio.run_process(
                [sys.executable, "-m", "memtrio.supervisors.cli", *args],
                capture_stdout=True,
                capture_stderr=True,
                check=False,
                env=server_env(home),
                cwd=str(home),
            )
            return done.returncode, done.stderr.decode("utf-8", "replace")
        return None, "(no exit within 120 s)"

    before = await trio.to_thread.run_sync(_tables, db)
    cases = await trio.to_thread.run_sync(_import_cases, run.base)
    for name, path in cases:
        out.malformed += 1
        code, stderr = await cli("import", str(path))
        lines = stderr.strip().splitlines()
        if code != 1 or len(lines) != 1 or "nothing was imported" not in stderr:
            out.violations.append(f"import {name}: exit {code}, stderr {stderr[-300:]!r}")
        elif "Traceback" in stderr:
            out.violations.append(f"import {name}: a traceback: {stderr[-300:]!r}")
        if await trio.to_thread.run_sync(_tables, db) != before:
            out.violations.append(f"import {name}: refused, but the store changed")
    # A valid file at the limits: the biggest observation there may be, many small ones.
    big = "memtrio import limit " * (65536 // 21)
    valid = run.base / "valid.jsonl"
    valid.write_text(
        "\n".join(
            json.dumps(
                {
                    "type": "entity",
                    "name": f"E{i}",
                    "entityType": "t",
                    "observations": [big] if i == 0 else [f"fact {i} about import"] * 3,
                },
                ensure_ascii=False,
                separators=(",", ":"),
            )  # fmt: skip
            for i in range(200)
        )
    )
    code, stderr = await cli("import", str(valid))
    if code != 0:
        out.violations.append(f"a valid import failed: exit {code}, {stderr[-300:]!r}")
    server = await run.server(home)
    started = time.monotonic()
    reply = await server.call_tool("recall", {"query": "memtrio import limit", "limit": 10})
    seconds = time.monotonic() - started
    size = len(json.dumps(reply))
    if "result" not in reply or reply["result"].get("isError"):
        out.violations.append(f"recall after the import failed: {str(reply)[:300]}")
    elif seconds > 10 or size > 2 * 1024 * 1024:
        out.violations.append(f"recall after the import took {seconds:.1f} s for {size:,} bytes")
    out.notes.append(f"recall after importing took {seconds:.2f} s, {size:,} bytes")
    await run.stop(server)
    run.verify(home, ledger)


# -- restart storms ------------------------------------------------------------------------


async def storm(run: Run, point: str, request: str, env: dict[str, str] | None = None) -> None:
    """A child failing on every request: its supervisors give up and the server exits 1 saying so."""
    out = run.out
    home = run.home()
    # From the 3rd hit on (initialize and its notification go through first).
    # A store crash restarts the transport too, whose calls get [server]
    # shutdown_grace to finish: keep it short so the storm is quick.
    env = {
        "MEMTRIO_FAULTS": f"{point}=raise@3+",
        "MEMTRIO_SERVER_SHUTDOWN_GRACE": "0.5",
        **(env or {}),
    }
    server = await run.server(home, env)
    sent = 0
    with trio.move_on_after(60):
        while not server.gone and sent < 500:
            sent += 1
            try:
                if request == "ping":
                    await server.request("ping", timeout=10)
                else:
                    await server.call_tool("remember", {"content": f"storm {sent}"}, timeout=10)
            except (ServerGone, NoReply):
                break
    code = await server.wait_exit(30)
    stderr = server.stderr_text()
    if code != 1:
        out.violations.append(f"restart storm at {point}: exit code {code}, expected 1")
    if "gave up" not in stderr:
        out.violations.append(
            f"restart storm at {point}: stderr does not say a supervisor gave up: {stderr[-300:]!r}"
        )
    out.errors_seen = server.stats.errors + server.stats.tool_errors
    out.errors_expected = 1
    out.notes.append(f"exited {code} after {sent} requests")


async def storm_embedder(run: Run) -> None:
    """Every embedding crashes its worker: the embedder pool gives up, then the root does."""
    await storm(
        run,
        "embedder.embed",
        "remember",
        {"MEMTRIO_EMBEDDINGS": "on", "MEMTRIO_EMBEDDING_INTRA_OP_THREADS": "1"},
    )


async def storm_session(run: Run) -> None:
    await storm(run, "session.dispatch", "ping")


async def storm_store(run: Run) -> None:
    await storm(run, "store.write", "remember")


async def malformed(run: Run) -> None:
    await run_malformed(run)


async def hostile_checkout(run: Run) -> None:
    """A checkout whose Git config names commands to run and whose symlinks lead out of it:
    the git- and file-reading tools run none of them and return nothing from outside."""
    import json

    from .hostile import make_hostile_checkout

    out = run.out
    hostile = await trio.to_thread.run_sync(make_hostile_checkout, run.base / "hostile")
    root, written = str(hostile.root), run.base / "written-by-git"
    server = await run.server(run.home(), {"MEMTRIO_CODE": "on"}, cwd=hostile.root)
    calls: list[tuple[str, dict[str, Any], bool]] = [  # (tool, arguments, succeeds)
        ("remember", {"content": "hostile checkout note"}, True),
        ("recall", {"query": "hostile checkout note", "scopes": [f"repo:{root}"]}, True),
        ("code_outline", {"path": "app.py"}, True),
        ("code_imports", {"path": "app.py", "root": root}, True),
        ("find_symbol", {"query": "outside_secret_fn"}, True),
        ("find_symbol", {"query": "OutsideSecretClass", "root": root}, True),
        ("code_diff", {"base": hostile.base, "head": hostile.head}, True),
        ("code_outline", {"path": "escape.py"}, False),
        ("code_outline", {"path": "sub/inner.py"}, False),
        ("code_imports", {"path": "linkdir/inner.py"}, False),
        ("code_diff", {"base": f"--output={written}"}, False),
    ]
    for tool, arguments, succeeds in calls:
        reply = await server.call_tool(tool, arguments, timeout=120)
        error = reply_error_text(reply)
        if error is not None:
            out.errors_seen += 1
        if succeeds and error is not None:
            out.violations.append(f"{tool} {arguments} failed: {error[:160]}")
        elif not succeeds and error is None:
            out.violations.append(f"{tool} {arguments} was not refused: {_text(reply)[:160]}")
        for name in hostile.leaked(json.dumps(reply)):
            out.violations.append(f"{tool} {arguments} returned {name} from outside the checkout")
    await run.stop(server)
    out.errors_expected, out.errors_exact = sum(not ok for _, _, ok in calls), True
    for marker in hostile.fired():
        out.violations.append(f"the checkout's Git configuration ran a command: {marker}")
    if written.exists():
        out.violations.append("a revision argument was read by git as an option (--output)")


QUICK: dict[str, Scenario] = {
    "crash-reader": crash_reader,
    "crash-session": crash_session,
    "crash-writer": crash_writer,
    "crash-store": crash_store,
    "commit-fault": commit_fault,
    "crash-embedder": crash_embedder,
    "crash-code-workers": crash_code_workers,
    "kill9-bursts": kill9_bursts,
    "exit-at-commit": exit_at_commit,
    "malformed": malformed,
    "sqlite-busy": sqlite_busy,
    "disk-full": disk_full,
    "sqlite-full": sqlite_full,
    "readonly-home": readonly_home,
    "import-limits": import_limits,
    "storm-session": storm_session,
    "storm-store": storm_store,
    "hostile-checkout": hostile_checkout,
}

FULL: dict[str, Scenario] = {
    **QUICK,
    "crash-ranker": crash_ranker,
    "crash-everything": crash_everything,
    "storm-embedder": storm_embedder,
    "kill9-embeddings": kill9_embeddings,
    "sdk-client-crashes": sdk_client_crashes,
}

# Generous per-scenario time budgets (seconds); a scenario over budget fails.
BUDGET_QUICK = 90.0
BUDGET_FULL = 300.0
