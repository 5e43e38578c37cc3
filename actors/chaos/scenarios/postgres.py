"""Faults of a shared PostgreSQL store (`..pg` provides the database, or the scenario is skipped).

- ``pg-kill9-burst``: two ``memtrio serve`` processes write to one database; one is
  killed (``kill -9``) in the middle of its burst. Every acknowledged write is
  stored, once; the survivor finishes its whole burst (the dead process held no
  lock for long).
- ``pg-restart-burst``: PostgreSQL is stopped in the middle of a burst and started
  again. Every call during the outage is an error saying the store is
  unreachable (never a success, and nothing of it is stored); the server process
  stays up and acknowledges writes again soon after the restart (it reconnects
  with backoff); nothing acknowledged is lost.
- ``pg-migrate-race``: four ``memtrio remember`` processes start at once on a fresh
  database. All succeed, the schema is migrated once (one version row, one id
  mark per table), and the four memories are stored.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator

import trio

from ..client import chaos_env
from ..harness import Ledger, Run, content_for, remember
from ..netclient import TcpSession
from ..pg import (
    NoPostgres,
    Postgres,
    check_pg_store,
    latest_schema,
    open_postgres,
    schema_marks,
)

OFF = {"MEMTRIO_EMBEDDINGS": "off", "MEMTRIO_CODE": "off"}
UNREACHABLE = "PostgreSQL store is unreachable"
RESUME_WITHIN = 10.0  # seconds from the restart to the first acknowledged write
POLL = 0.02


@contextlib.asynccontextmanager
async def _postgres(run: Run, *, private: bool = False) -> AsyncIterator[Postgres | None]:
    """The scenario's PostgreSQL, or None (the outcome then says why it was skipped)."""
    try:
        pg = await trio.to_thread.run_sync(lambda: open_postgres(private=private))
    except NoPostgres as exc:
        run.out.skipped = str(exc)
        yield None
        return
    run.out.notes.append(f"PostgreSQL: {pg.where}")
    try:
        yield pg
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(pg.close)


async def _verify(run: Run, url: str, ledger: Ledger) -> None:
    check = await trio.to_thread.run_sync(lambda: check_pg_store(url, ledger.acked, ledger.refused))
    run.out.acked += check.acked
    run.out.lost += check.lost
    run.out.violations.extend(check.violations)
    run.out.errors_seen += ledger.errors


async def _burst(
    run: Run, session: TcpSession, ledger: Ledger, writes: int, acked: list[int], i: int
) -> None:
    """``writes`` writes one after another on ``session``; ``acked[i]`` counts the acknowledged."""
    for n in range(writes):
        status = await remember(session, ledger, content_for(session.label, n, run.rng))
        if status == "unknown" and session.gone:
            return  # the server died under this client
        acked[i] += status == "acked"


async def pg_kill9_burst(run: Run) -> None:
    """kill -9 of one of two servers sharing a database, in the middle of their bursts."""
    async with _postgres(run) as pg:
        if pg is None:
            return
        url = await trio.to_thread.run_sync(pg.database)
        env = {**OFF, "MEMTRIO_STORE": url}
        writes = 150 if run.quick else 400
        ledger = Ledger()
        survivor = await run.serve(run.home("survivor"), "tcp", env)
        for round_ in range(1 if run.quick else 3):
            victim = await run.serve(run.home("victim"), "tcp", env)
            sessions = [
                await run.tcp_session(victim, f"victim-{round_}"),
                await run.tcp_session(survivor, f"survivor-{round_}"),
            ]
            acked = [0, 0]
            kill_after = run.rng.randint(10, 40)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_burst, run, sessions[0], ledger, writes, acked, 0)
                nursery.start_soon(_burst, run, sessions[1], ledger, writes, acked, 1)
                while acked[0] < kill_after:
                    await trio.sleep(POLL)
                victim.kill9()
            run.out.faults += 1
            await victim.process.wait()
            if acked[1] != writes:
                run.out.violations.append(
                    f"round {round_}: the survivor acknowledged {acked[1]} of {writes} writes "
                    "(held up by the dead process?)"
                )
            run.out.restarts += 1 if round_ else 0
        await survivor.terminate()
        run.out.notes.append(
            f"{len(ledger.acked)} acked, {len(ledger.unknown)} cut off by the kills"
        )
        await _verify(run, url, ledger)


async def _outage(run: Run, pg: Postgres, round_: int, ledger: Ledger) -> None:  # noqa: C901
    """One outage: writes before, during and after a stop and start of PostgreSQL."""
    private = pg.server
    assert private is not None  # a private server: `_postgres(run, private=True)`
    server = run.servers[-1]
    phase = "up"
    resumed: list[float] = []
    down_calls = 0

    async def writer() -> None:
        nonlocal down_calls
        n = 0
        while True:
            content = content_for(f"{run.name}-{round_}", n, run.rng)
            n += 1
            began = phase
            reply = await server.call_tool("remember", {"content": content}, timeout=60)
            ended = phase
            ledger.calls += 1
            result = reply.get("result") or {}
            if not result.get("isError") and "result" in reply:
                ledger.acked[result["structuredContent"]["id"]] = content
                if began == ended == "down":
                    run.out.violations.append("a write was acknowledged while PostgreSQL was down")
                if ended == "restarted" and not resumed:
                    resumed.append(trio.current_time())
                continue
            ledger.errors += 1
            text = str(reply.get("error", {}).get("message", "")) or result["content"][0]["text"]
            if began == ended == "down":
                down_calls += 1
                ledger.refused.append(content)  # started and ended with no server: never stored
                if UNREACHABLE not in text:
                    run.out.violations.append(f"an outage error does not say why: {text[:160]}")
            else:
                ledger.unknown.append(content)
            await trio.sleep(POLL)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer)
        before = len(ledger.acked)
        while len(ledger.acked) < before + (10 if run.quick else 40):
            await trio.sleep(POLL)
        await trio.to_thread.run_sync(private.stop)
        phase = "down"
        run.out.faults += 1
        while down_calls < 5:
            await trio.sleep(POLL)
        phase = "starting"
        await trio.to_thread.run_sync(private.start)
        restarted_at = trio.current_time()
        phase = "restarted"
        run.out.restarts += 1
        with trio.move_on_after(RESUME_WITHIN * 3):
            while len(ledger.acked) < before + (20 if run.quick else 80) or not resumed:
                await trio.sleep(POLL)
        nursery.cancel_scope.cancel()
    if not resumed or resumed[0] - restarted_at > RESUME_WITHIN:
        run.out.violations.append(
            f"round {round_}: no write was acknowledged within {RESUME_WITHIN:g} s of the restart"
        )
    if server.gone:
        run.out.violations.append(f"round {round_}: the server went down with the database")


async def pg_restart_burst(run: Run) -> None:
    """PostgreSQL stopped and started again in the middle of a burst of writes, repeatedly."""
    async with _postgres(run, private=True) as pg:
        if pg is None:
            return
        url = await trio.to_thread.run_sync(pg.database)
        ledger = Ledger()
        server = await run.server(run.home(), {**OFF, "MEMTRIO_STORE": url})
        rounds = 1 if run.quick else 3
        run.out.errors_expected = 5 * rounds  # each outage waits for 5 refusals
        for round_ in range(rounds):
            await _outage(run, pg, round_, ledger)
        await run.stop(server)
        run.out.notes.append(
            f"{len(ledger.acked)} acked, {len(ledger.refused)} refused during the outages"
        )
        await _verify(run, url, ledger)


async def pg_migrate_race(run: Run) -> None:
    """Four ``memtrio remember`` processes starting at once on a fresh database, repeatedly."""
    async with _postgres(run) as pg:
        if pg is None:
            return
        for round_ in range(1 if run.quick else 3):
            url = await trio.to_thread.run_sync(pg.database)
            ledger = Ledger()
            await _race(run, url, round_, ledger)
            run.out.faults += 1  # four first starts racing to migrate
            versions, marks, tables = await trio.to_thread.run_sync(schema_marks, url)
            if versions != [latest_schema()] or marks != tables:
                run.out.violations.append(
                    f"round {round_}: migrated more than once or not at all: schema_version rows "
                    f"{versions}, {marks} id marks for {tables} tables"
                )
            await _verify(run, url, ledger)


async def _race(run: Run, url: str, round_: int, ledger: Ledger) -> None:
    """Start four processes at once; each one's memory is acked if it exited 0 with an id."""
    home = run.home(f"race-{round_}")
    contents = [content_for(f"{run.name}-{round_}", i, run.rng) for i in range(4)]
    done: list[subprocess.CompletedProcess[bytes]] = []

    async def one(content: str) -> None:
        command = [sys.executable, "-m", "memtrio.supervisors.cli", "remember", content]
        done.append(
            await trio.run_process(
                [*command, "--json", "--store", url],
                env=chaos_env(home, OFF),
                cwd=str(home),
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
        )

    async with trio.open_nursery() as nursery:
        for content in contents:
            nursery.start_soon(one, content)
    run.out.requests += len(done)
    for proc in done:
        ledger.calls += 1
        content = str(proc.args[4])
        if proc.returncode != 0:
            ledger.errors += 1
            run.out.violations.append(
                f"round {round_}: a racing process exited {proc.returncode}: "
                f"{proc.stderr.decode(errors='replace')[-300:]}"
            )
            continue
        ledger.acked[int(json.loads(proc.stdout)["id"])] = content
