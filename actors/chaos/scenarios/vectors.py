"""The vector table under faults: ``kill -9`` during bursts of ``vector_batch_upsert``
(``kill9-vectors``), and rows no load can use (``poisoned-vector-row``).

``kill9-vectors``:

Each batch writes entities no other batch writes, with vectors exactly
representable in float32, so after the kills the check is exact:

- every acknowledged batch is in ``entity_embeddings``, byte for byte;
- a batch cut off by a kill is there whole or not at all (one transaction);
- a server started afterwards indexes exactly the table's rows
  (``vector_store_stats``), and finds each acknowledged vector as its own
  nearest neighbour (the index agrees with the table).

``poisoned-vector-row`` (issue 29): values that convert badly are sent through
the tools (``1e39``: a float64, no float32; a vector whose scores overflow)
and bad rows are written straight into the SQLite file (a NaN, a short blob,
text). Then:

- a refused upsert commits nothing; a batch stores its good items and reports
  each bad one in ``errors``;
- a restarted ``memtrio mcp --vectors`` serves; ``vector_store_stats`` reports
  exactly the rows written by hand as skipped, by name; every good vector is
  its own nearest neighbour.
"""

from __future__ import annotations

import math
import sqlite3
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from ..client import NoReply, ServerGone, ServerProcess
from ..harness import DB_NAME, Run, crashed, reply_error_text

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
        if (problem := reply_error_text(reply)) is not None:
            run.out.violations.append(f"create_entities failed: {problem[:200]}")
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


POISONED = {  # entity -> the vec written into entity_embeddings by hand
    "poison-nan": struct.pack(f"<{DIMS}f", math.nan, *[0.0] * (DIMS - 1)),
    "poison-short": struct.pack("<2f", 1.0, 0.0),
    "poison-text": "not a vector",
}
GOOD = 6  # entities with good vectors


def _poison_file(home: Path) -> None:
    conn = sqlite3.connect(home / DB_NAME)
    try:
        ids = dict(conn.execute("SELECT name, id FROM entities"))
        with conn:
            for name, vec in POISONED.items():
                conn.execute(
                    "INSERT OR REPLACE INTO entity_embeddings (entity_id, model, dim, vec, updated_at) "
                    "VALUES (?, 'hand', ?, ?, 0)",
                    (ids[name], DIMS, vec),
                )
    finally:
        conn.close()


async def _refusals(run: Run, server: ServerProcess, good: dict[str, list[float]]) -> None:
    """Bad values through the tools: refused whole (one) or per item (a batch)."""
    over = [0.0] * DIMS
    over[0] = 1e39
    reply = await server.call_tool(
        "vector_upsert_embedding", {"entityName": "poison-tool", "embedding": over}
    )
    run.out.errors_expected += 1
    if crashed(run.out, "an upsert of 1e39", reply):
        pass
    elif reply_error_text(reply) is None:
        run.out.violations.append("an upsert of 1e39 (no float32) was accepted")
    else:
        run.out.errors_seen += 1
    long_ = [1e30] * DIMS  # finite in float32, but its scores overflow
    items = [{"entityName": n, "embedding": v} for n, v in good.items()]
    items.insert(2, {"entityName": "poison-tool", "embedding": long_})
    reply = await server.call_tool("vector_batch_upsert", {"items": items})
    stored = (reply.get("result") or {}).get("structuredContent") or {}
    run.out.errors_expected += 1
    if [e.get("index") for e in stored.get("errors", [])] != [2] or stored.get("upserted") != GOOD:
        run.out.violations.append(f"a batch with one bad item answered {str(reply)[:300]}")
    else:
        run.out.errors_seen += 1


async def poisoned_vector_row(run: Run) -> None:
    """Bad vectors through the tools and straight into the file; a restart serves and reports them."""
    home = run.home()
    names = [f"good-{i}" for i in range(GOOD)] + ["poison-tool", *POISONED]
    good = {name: _vector(run) for name in names[:GOOD]}
    run.out.errors_exact = True
    server = await run.server(home, ENV)
    entities = [{"name": n, "entityType": "chaos", "observations": []} for n in names]
    await server.call_tool("create_entities", {"entities": entities})
    await _refusals(run, server, good)
    await run.stop(server)
    _poison_file(home)
    run.out.faults += len(POISONED)
    run.out.acked = _check_table(run, home, VectorLedger(acked=good))
    if run.out.acked != GOOD + len(POISONED):  # the refused values left no row
        run.out.violations.append(
            f"{run.out.acked} rows in the table, expected {GOOD + len(POISONED)}"
        )
    server = await run.server(home, ENV)  # before: "child 'vectors' could not start"
    run.out.restarts += 1
    stats = await _structured(run, server, "vector_store_stats", {}) or {}
    reported = {r.get("entityName") for r in stats.get("skippedRows", [])}
    if stats.get("skipped") != len(POISONED) or reported != set(POISONED):
        run.out.violations.append(
            f"vector_store_stats reports {stats.get('skipped')} skipped rows {sorted(map(str, reported))}, "
            f"expected {sorted(POISONED)}"
        )
    if stats.get("indexSize") != GOOD:
        run.out.violations.append(
            f"the index holds {stats.get('indexSize')} vectors, expected {GOOD}"
        )
    for name, vec in good.items():
        found = await _structured(
            run, server, "vector_search_entities", {"embedding": vec, "topK": 1}
        )
        best = (found or {}).get("results") or [{}]
        if best[0].get("entityName") != name:
            run.out.violations.append(
                f"searching {name}'s own vector found {best[0].get('entityName')}"
            )
    await run.stop(server)
