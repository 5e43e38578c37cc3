"""Process deaths: ``kill -9`` in the middle of bursts of writes, and an exit right before COMMIT.

Every write acknowledged before the death must be in the database after it,
and the database must pass its integrity checks.
"""

from __future__ import annotations

import trio

from ..client import ServerProcess
from ..harness import Ledger, Run, content_for, remember, reply_error_text

_LONG_WORDS = "module function parser index memory commit window vector token graph".split()


async def _burst(
    run: Run, server: ServerProcess, ledger: Ledger, round_: int, embeddings: bool
) -> None:
    """Writes started 2 ms apart, without waiting for their answers (cut off by the kill)."""
    async with trio.open_nursery() as nursery:
        for i in range(60 if embeddings else 200):
            content = content_for(f"{run.name}-{round_}", i, run.rng)
            if embeddings and i % 20 == 0:  # long: embedded as several windows
                content += " " + " ".join(run.rng.choice(_LONG_WORDS) for _ in range(250))
            nursery.start_soon(remember, server, ledger, content)
            await trio.sleep(0.002)


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
        delay = run.rng.uniform(0.05, 0.6) if not embeddings else run.rng.uniform(0.5, 3.0)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_burst, run, server, ledger, round_, embeddings)
            await trio.sleep(delay)
            server.kill9()
        out.faults += 1
        out.restarts += 1 if round_ else 0
        await server.process.wait()
    # A last clean start after the final kill: the store opens and serves.
    server = await run.server(home, env)
    reply = await server.call_tool("stats", {}, timeout=60)
    if (problem := reply_error_text(reply)) is not None:
        out.violations.append(f"stats after the last kill failed: {problem[:200]}")
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
