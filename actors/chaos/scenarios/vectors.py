"""``kill -9`` during bursts of ``vector_batch_upsert``: the vector table and its index after crashes.

Each batch writes entities no other batch writes, with vectors exactly
representable in float32, so after the kills the check is exact:

- every acknowledged batch is in ``entity_embeddings``, byte for byte;
- a batch cut off by a kill is there whole or not at all (one transaction);
- a server started afterwards indexes exactly the table's rows
  (``vector_store_stats``), and finds each acknowledged vector as its own
  nearest neighbour (the index agrees with the table).
"""

from __future__ import annotations

import sqlite3
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from ..client import NoReply, ServerGone, ServerProcess
from ..harness import DB_NAME, Run, reply_error_text

DIMS = 8
ITEMS = 8  # entities per batch
ENV = {"MEMTRIO_VECTORS": "on", "MEMTRIO_VECTORS_DIMS": str(DIMS)}
PROBES = 40  # acknowledged vectors searched for after the last kill


@dataclass
class VectorLedger:
    """The batches sent, by what the server answered: entity name -> vector."""

    acked: dict[str, list[float]] = field(default_factory=dict)
    unknown: list[dict[str, list[float]]] = field(default_factory=list)
    errors: int = 0


def _entity(n: int) -> str:
    return f"vec-entity-{n}"


def _vector(run: Run) -> list[float]:
    # Multiples of 1/64 are exact in float32: what comes back must be what was sent.
    values = [run.rng.randint(-64, 64) / 64 for _ in range(DIMS)]
    values[run.rng.randrange(DIMS)] = 1.0 + run.rng.randint(0, 64) / 64  # never all zero
    return values


async def _batch(
    server: ServerProcess, ledger: VectorLedger, batch: dict[str, list[float]]
) -> None:
    items = [{"entityName": name, "embedding": vec} for name, vec in batch.items()]
    try:
        reply = await server.call_tool("vector_batch_upsert", {"items": items}, timeout=60)
    except (ServerGone, NoReply):
        ledger.unknown.append(batch)
        return
    error = reply_error_text(reply)
    stored = (reply.get("result") or {}).get("structuredContent") or {}
    if error is None and stored.get("failed") == 0:
        ledger.acked.update(batch)
    else:
        ledger.errors += 1
        ledger.unknown.append(batch)


async def _burst(
    server: ServerProcess, ledger: VectorLedger, batches: list[dict[str, list[float]]]
) -> None:
    """Batches started 3 ms apart, without waiting for their answers (cut off by the kill)."""
    async with trio.open_nursery() as nursery:
        for batch in batches:
            nursery.start_soon(_batch, server, ledger, batch)
            await trio.sleep(0.003)


async def _create_entities(run: Run, home: Path, count: int) -> None:
    server = await run.server(home, ENV)
    for start in range(0, count, 500):
        entities = [
            {"name": _entity(n), "entityType": "chaos", "observations": []}
            for n in range(start, min(count, start + 500))
        ]
        reply = await server.call_tool("create_entities", {"entities": entities}, timeout=60)
        if reply_error_text(reply) is not None:
            run.out.violations.append(f"create_entities failed: {reply_error_text(reply)[:200]}")
    await run.stop(server)


async def kill9_vectors(run: Run) -> None:
    """kill -9 of the server in the middle of a burst of batch upserts, then a restart; repeated."""
    out = run.out
    home = run.home()
    rounds, calls = (3, 40) if run.quick else (8, 40)
    await _create_entities(run, home, rounds * calls * ITEMS)
    ledger = VectorLedger()
    next_entity = 0
    for round_ in range(rounds):
        server = await run.server(home, ENV)
        batches = []
        for _ in range(calls):
            batches.append({_entity(next_entity + i): _vector(run) for i in range(ITEMS)})
            next_entity += ITEMS
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_burst, server, ledger, batches)
            await trio.sleep(run.rng.uniform(0.02, 0.15))
            server.kill9()
        out.faults += 1
        out.restarts += 1 if round_ else 0
        await server.process.wait()
    out.errors_seen = ledger.errors
    out.notes.append(f"{len(ledger.acked)} vectors acked, {len(ledger.unknown)} batches cut off")
    if not ledger.acked:
        out.violations.append(
            "no batch was acknowledged before the kills: the scenario proved nothing"
        )
    await _check_server(run, home, ledger, _check_table(run, home, ledger))


def _check_table(run: Run, home: Path, ledger: VectorLedger) -> int:
    """Compare ``entity_embeddings`` with the ledger; the number of rows."""
    conn = sqlite3.connect(f"file:{home / DB_NAME}?mode=ro", uri=True)
    try:
        rows = {
            name: blob
            for name, blob in conn.execute(
                "SELECT e.name, v.vec FROM entity_embeddings v JOIN entities e ON e.id = v.entity_id"
            )
        }
        orphans = conn.execute(
            "SELECT count(*) FROM entity_embeddings WHERE entity_id NOT IN (SELECT id FROM entities)"
        ).fetchone()[0]
    finally:
        conn.close()
    if orphans:
        run.out.violations.append(f"{orphans} embeddings of entities that do not exist")
    for name, vec in ledger.acked.items():
        run.out.acked += 1
        if name not in rows:
            run.out.lost += 1
            run.out.violations.append(f"acknowledged embedding of {name} lost")
        elif rows[name] != struct.pack(f"<{DIMS}f", *vec):
            run.out.violations.append(f"embedding of {name} differs from the one acknowledged")
    for batch in ledger.unknown:
        present = [
            name for name, vec in batch.items() if rows.get(name) == struct.pack(f"<{DIMS}f", *vec)
        ]
        if present and len(present) != len(batch):
            run.out.violations.append(
                f"a batch cut off by a kill is half-written: {len(present)} of {len(batch)} items stored"
            )
    return len(rows)


async def _check_server(run: Run, home: Path, ledger: VectorLedger, rows: int) -> None:
    """A restarted server indexes every row, and finds each probed vector as its own nearest."""
    server = await run.server(home, ENV)
    stats = await _structured(run, server, "vector_store_stats", {})
    if stats is not None and stats.get("indexSize") != rows:
        run.out.violations.append(
            f"the index holds {stats.get('indexSize')} vectors, the table {rows}"
        )
    for name in list(ledger.acked)[:PROBES]:
        found = await _structured(
            run, server, "vector_search_entities", {"embedding": ledger.acked[name], "topK": 1}
        )
        best = (found or {}).get("results") or [{}]
        if best[0].get("entityName") != name:
            run.out.violations.append(
                f"searching {name}'s own vector found {best[0].get('entityName')}"
            )
            break
    await run.stop(server)
    run.out.restarts += 1


async def _structured(
    run: Run, server: ServerProcess, tool: str, arguments: dict[str, Any]
) -> dict[str, Any] | None:
    reply = await server.call_tool(tool, arguments, timeout=60)
    error = reply_error_text(reply)
    if error is not None:
        run.out.violations.append(f"{tool} after the kills failed: {error[:200]}")
        return None
    return reply["result"].get("structuredContent")
