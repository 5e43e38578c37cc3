"""Actor crashes: exceptions injected at fault points (MEMTRIO_FAULTS) while clients keep calling.

The transport (reader, session, writer), the store, the embedder pool, the
ranker and the code parser workers crash at random (seeded) hits; every
request must still be answered and no acknowledged write lost.
"""

from __future__ import annotations

from pathlib import Path

import trio

from ....protocol.plural import plural
from ..client import chaos_env, server_command
from ..harness import (
    Ledger,
    Run,
    content_for,
    drive_load,
    log_counts,
    make_checkout,
    remember,
    reply_error_text,
    reply_text,
)


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
            f"{plural(counts.faults, 'crash')} but {plural(counts.restarts, 'restart')} "
            f"(expected {restarts_per_crash} per crash)"
        )
    run.verify(home, ledger)


async def _crash_transport(run: Run, point: str, *, errors_per_crash: int = 0) -> None:
    """Three crashes of a transport actor at ``point`` under load, 2 rounds (quick) or 4."""
    await crash_under_load(
        run,
        point,
        3,
        calls=60 if run.quick else 200,
        errors_per_crash=errors_per_crash,
        rounds=2 if run.quick else 4,
    )


async def crash_reader(run: Run) -> None:
    """StdioReader crashes at random reads: no input is lost, every request answered."""
    await _crash_transport(run, "stdio.read")


async def crash_session(run: Run) -> None:
    """Session crashes at random dispatches: that request gets -32603, the rest go on."""
    await _crash_transport(run, "session.dispatch", errors_per_crash=1)


async def crash_writer(run: Run) -> None:
    """StdoutWriter crashes at random writes: its line in hand is written after the restart."""
    await _crash_transport(run, "stdio.write")


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


async def crash_maintenance(run: Run) -> None:
    """The store's maintenance actor crashes at its first runs (one a second here) while
    clients write: it restarts alone (its own supervisor: no other restart), no call fails,
    nothing acknowledged is lost, and its later runs succeed."""
    out = run.out
    home = run.home()
    ledger = Ledger()
    crashes = 2 if run.quick else 4
    # Rule k sees the hits the earlier rules let through: raise@1 k times = runs 1..k.
    spec = ",".join(["store.maintenance=raise@1"] * crashes)
    env = {"MEMTRIO_FAULTS": spec, "MEMTRIO_STORE_MAINTENANCE_INTERVAL": "1"}
    server = await run.server(home, env)
    await drive_load(
        server,
        ledger,
        tag=run.name,
        calls=60 if run.quick else 200,
        concurrency=4,
        rng=run.rng,
        out=out,
    )
    with trio.move_on_after(3 * crashes + 20):  # runs are a second apart (plus restarts)
        while log_counts(home).faults < crashes or _maintenance_runs(home) < 1:
            await trio.sleep(0.2)
    reply = await server.request("ping", timeout=30)
    if "result" not in reply:
        out.violations.append(f"ping after the crashes failed: {reply}")
    await run.stop(server)
    out.errors_seen = ledger.errors
    out.errors_expected = 0
    counts = log_counts(home)
    if counts.faults != crashes or counts.restarts != crashes:
        out.violations.append(
            f"{counts.faults} maintenance crashes (expected {crashes}) but {counts.restarts} "
            "restarts (expected one each: the maintenance actor alone)"
        )
    if _maintenance_runs(home) < 1:
        out.violations.append("no maintenance run succeeded after the crashes")
    run.verify(home, ledger)


def _maintenance_runs(home: Path) -> int:
    """Maintenance runs that ended well, from ``home``'s trace log."""
    path = home / "logs" / "memtrio.log"
    if not path.exists():
        return 0
    runs = 0
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if '"name":"maintenance"' in line and '"outcome":"ok"' in line:
                runs += 1
    return runs


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
        if (problem := reply_error_text(reply)) is not None:
            failed += 1
            out.violations.append(f"recall {i} failed while the ranker crashed: {problem[:160]}")
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
        text = reply_text(reply)
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
    if (problem := reply_error_text(reply)) is not None:
        out.violations.append(f"find_symbol failed after the worker crashes: {problem[:160]}")
    await run.stop(server)
    out.notes.append(f"{ok_files}/{files - len(victims)} clean files outlined")


def _sdk_server_env(run: Run, calls: int) -> dict[str, str]:
    """Crashes of the reader, session and writer (two each) and of the store (one)."""
    spec = ",".join(
        [
            crash_points(run, "stdio.read", 2, 5, calls),
            crash_points(run, "session.dispatch", 2, 5, calls),
            crash_points(run, "stdio.write", 2, 5, calls),
            crash_points(run, "store.write", 1, 5, calls // 2),
        ]
    )
    return {
        "MEMTRIO_FAULTS": spec,
        "MEMTRIO_FAULTS_SEED": str(run.seed),
        "MEMTRIO_SERVER_SHUTDOWN_GRACE": "1",
        "MEMTRIO_LOG_STDERR_LEVEL": "off",  # the SDK passes the server's stderr through
    }


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
    home = run.home()
    ledger = Ledger()
    calls = 40 if run.quick else 120
    command = server_command()
    params = StdioServerParameters(
        command=command[0],
        args=command[1:],
        env=chaos_env(home, _sdk_server_env(run, calls)),
        cwd=str(home),
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
