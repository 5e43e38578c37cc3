"""Soak tests: ``pytest -m slow`` runs them (the default run skips them).

- A sustained mixed load on real ``memtrio mcp`` servers: three servers share
  one home (three agent sessions on one machine), each driven by four client
  tasks pipelining remember, recall, graph, relate, inspect and the
  knowledge-graph tools over its stdio: 18,000 mixed calls, then 12,000 reads
  (two to three minutes on two shared cores). The load is a fixed number of
  calls; the deadline only guards against a hang. Every call must succeed,
  every acknowledged write must be in the store afterwards, memory must stay
  under a ceiling and must not grow while the store no longer does, and each
  server still answers ping and exits 0 on EOF.
- The full chaos matrix (``memtrio chaos``, every scenario, one and a half to
  three minutes a seed) under seeds other than the default suite's
  ``--quick --seed 1``.
"""

from __future__ import annotations

import json
import random
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp_client import run_cli
from raw_server import Pipeline, open_pipeline, raw_server

# Over the suite's 300 s per test: a soak runs for minutes by design.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]

SERVERS = 3
TASKS = 4  # client tasks per server, each with its own calls in flight
MIXED_CALLS = 1500  # per task: writes and reads (the store grows)
READ_CALLS = 1000  # per task, then: reads only (the store stays as it is)
CALL_TIMEOUT = 120.0  # seconds one call may take under the whole load
DEADLINE = 1200.0  # seconds for the whole load: only against a hang
SAMPLES = 10  # memory samples per server and phase, at fixed counts of finished calls
RSS_CEILING = 384 * 2**20  # bytes: no server ever needs more for this store
# A server's memory grows with the data it holds (the ranker keeps the graph in
# memory), but serving reads of a store that no longer grows must not grow it.
READ_PHASE_GROWTH = 24 * 2**20
HUB = "Hub"

WORDS = (
    "cache build deploy index token release schema queue worker parser lock budget "
    "migration webhook billing session retry timeout replica snapshot"
).split()

# (operation, weight): what an agent mostly does is remember and recall.
MIXED = [
    ("remember", 25),
    ("recall", 15),
    ("graph", 8),
    ("relate", 6),
    ("inspect", 8),
    ("create_entities", 8),
    ("add_observations", 8),
    ("create_relations", 5),
    ("search_nodes", 8),
    ("stats", 4),
    ("ping", 5),
]
READS = [
    ("recall", 30),
    ("graph", 15),
    ("inspect", 20),
    ("search_nodes", 20),
    ("stats", 5),
    ("ping", 10),
]


@dataclass
class Acked:
    """Writes the servers acknowledged, and every failed call."""

    memories: dict[int, str] = field(default_factory=dict)
    observations: dict[str, set[str]] = field(default_factory=dict)
    relations: set[tuple[str, str, str]] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)

    def observed(self, entity: str, *contents: str) -> None:
        self.observations.setdefault(entity, set()).update(contents)


@dataclass
class Server:
    name: str
    pipeline: Pipeline
    done: int = 0
    rss: dict[str, list[int]] = field(default_factory=lambda: {"mixed": [], "reads": []})

    def finished_one(self, phase: str, calls_per_task: int) -> None:
        """Count a finished call; sample memory every 1/SAMPLES of the phase's calls."""
        self.done += 1
        if self.done % (TASKS * calls_per_task // SAMPLES) == 0:
            self.rss[phase].append(self.pipeline.rss_bytes())


class Client:
    """One client task: its own seeded sequence of calls, checking every reply."""

    def __init__(self, server: Server, task: int, acked: Acked) -> None:
        self.server = server
        self.tag = f"{server.name}t{task}"
        self.rng = random.Random(self.tag)
        self.acked = acked
        self.entities: list[str] = []  # named by this client's memories and relations
        self.items: list[str] = []  # this client's knowledge-graph entities
        self.memories: dict[int, str] = {}

    def words(self, n: int) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(n))

    async def tool(self, name: str, label: str, **arguments: Any) -> Any:
        reply = await self.server.pipeline.call_tool(name, arguments, timeout=CALL_TIMEOUT)
        if "error" in reply:
            self.acked.errors.append(f"{label} {name}: JSON-RPC error {reply['error']}")
            return None
        result = reply["result"]
        if result.get("isError"):
            self.acked.errors.append(f"{label} {name}: {result['content'][0]['text'][:300]}")
            return None
        return result.get("structuredContent")

    async def run(self, phase: str, operations: list[tuple[str, int]], calls: int) -> None:
        names = [op for op, _ in operations]
        weights = [w for _, w in operations]
        for i in range(calls):
            await self.step(self.rng.choices(names, weights)[0], i)
            self.server.finished_one(phase, calls)

    async def step(self, op: str, i: int) -> None:  # noqa: C901
        label = f"{self.tag} #{i}"
        if (op == "graph" and not self.entities) or (op == "inspect" and not self.memories):
            op = "remember"
        if op in ("add_observations", "create_relations") and not self.items:
            op = "create_entities"
        if op == "remember":
            entity = f"{self.tag}-e{i % 7}"
            topic = f"topic-{self.rng.choice(WORDS)}"
            content = f"{self.tag}n{i} {self.words(6)}"
            out = await self.tool(
                "remember",
                label,
                content=content,
                entities=[entity],
                relations=[{"source": entity, "relation": "touches", "target": topic}],
            )
            if out is not None:
                self.acked.memories[out["id"]] = content
                self.memories[out["id"]] = content
                self.acked.relations.add((entity, "touches", topic))
                self.entities.append(entity)
        elif op == "recall":
            await self.tool("recall", label, query=self.words(2), limit=5)
        elif op == "graph":
            await self.tool("graph", label, entity=self.rng.choice(self.entities), max_depth=2)
        elif op == "relate":
            source, target = f"{self.tag}-e{i % 7}", f"topic-{self.rng.choice(WORDS)}"
            if await self.tool(
                "relate", label, source=source, relation="depends_on", target=target
            ):
                self.acked.relations.add((source, "depends_on", target))
                self.entities.append(source)
        elif op == "inspect":
            mid = self.rng.choice(list(self.memories))
            out = await self.tool("inspect", label, id=mid)
            if out is not None and out["content"] != self.memories[mid]:
                self.acked.errors.append(f"{label} inspect {mid}: {out['content']!r}")
        elif op == "create_entities":
            item = f"{self.tag}-kg{i}"
            entity = {"name": item, "entityType": "item", "observations": [f"{item} born"]}
            if await self.tool("create_entities", label, entities=[entity]) is not None:
                self.acked.observed(item, f"{item} born")
                self.items.append(item)
        elif op == "add_observations":
            item = self.rng.choice(self.items)
            note, visit = f"{item} grew at {i}", f"{self.tag} visited at {i}"
            observations = [
                {"entityName": item, "contents": [note]},
                {"entityName": HUB, "contents": [visit]},
            ]
            if await self.tool("add_observations", label, observations=observations) is not None:
                self.acked.observed(item, note)
                self.acked.observed(HUB, visit)
        elif op == "create_relations":
            item = self.rng.choice(self.items)
            relation = {"from": item, "to": HUB, "relationType": "joins"}
            if await self.tool("create_relations", label, relations=[relation]) is not None:
                self.acked.relations.add((item, "joins", HUB))
        elif op == "search_nodes":
            await self.tool("search_nodes", label, query=self.rng.choice([*WORDS, self.tag]))
        elif op == "stats":
            await self.tool("stats", label)
        else:
            reply = await self.server.pipeline.request("ping", timeout=CALL_TIMEOUT)
            if reply.get("result") != {}:
                self.acked.errors.append(f"{label} ping: {reply}")


async def serve_load(home: Path, index: int, acked: Acked, servers: list[Server]) -> None:
    async with raw_server(home, fork=False) as raw:
        await raw.initialize()
        async with open_pipeline(raw) as pipeline:
            server = Server(f"s{index}", pipeline)
            servers.append(server)
            clients = [Client(server, task, acked) for task in range(TASKS)]
            for phase, operations, calls in (
                ("mixed", MIXED, MIXED_CALLS),
                ("reads", READS, READ_CALLS),
            ):
                server.done = 0
                async with trio.open_nursery() as nursery:
                    for client in clients:
                        nursery.start_soon(client.run, phase, operations, calls)
            assert (await pipeline.request("ping"))["result"] == {}, "no pong after the load"
            await raw.close_stdin()
            assert await raw.wait() == 0
        assert not pipeline.violations, pipeline.violations[:5]
        assert not pipeline.stats.orphans, pipeline.stats.orphans[:5]
        assert pipeline.stats.replies == TASKS * (MIXED_CALLS + READ_CALLS) + 1


async def exported_graph(home: Path) -> tuple[dict[str, set[str]], set[tuple[str, str, str]]]:
    """Every entity's observations and every relation, from a fresh server's export_graph."""
    observations: dict[str, set[str]] = {}
    relations: set[tuple[str, str, str]] = set()
    async with raw_server(home, fork=False) as raw:
        await raw.initialize()
        offset: int | None = 0
        while offset is not None:
            reply = await raw.call_tool("export_graph", {"offset": offset}, timeout=120)
            page = reply["result"]["structuredContent"]
            for line in filter(None, page["jsonl"].split("\n")):
                record = json.loads(line)
                if record["type"] == "entity":
                    # An entity with more than 1,000 observations spans several lines.
                    observations.setdefault(record["name"], set()).update(record["observations"])
                else:
                    relations.add((record["from"], record["relationType"], record["to"]))
            offset = page["nextOffset"]
        assert await raw.close() == 0
    return observations, relations


async def test_soak_mixed_load_from_concurrent_clients_loses_nothing(home: Path) -> None:
    async with raw_server(home, fork=False) as raw:
        await raw.initialize()
        hub = {"name": HUB, "entityType": "hub", "observations": ["the shared entity"]}
        assert not (await raw.call_tool("create_entities", {"entities": [hub]}))["result"][
            "isError"
        ]
        assert await raw.close() == 0

    acked = Acked()
    servers: list[Server] = []
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            for index in range(SERVERS):
                nursery.start_soon(serve_load, home, index, acked, servers)

    assert acked.errors == [], f"{len(acked.errors)} failed calls: {acked.errors[:10]}"
    assert "Traceback" not in (home / "server-stderr.txt").read_text()
    for server in servers:
        mixed, reads = server.rss["mixed"], server.rss["reads"]
        assert len(mixed) == len(reads) == SAMPLES
        mib = {phase: [round(r / 2**20) for r in rss] for phase, rss in server.rss.items()}
        assert max(mixed + reads) <= RSS_CEILING, f"{server.name} RSS (MiB): {mib}"
        assert reads[-1] - reads[0] <= READ_PHASE_GROWTH, f"{server.name} RSS (MiB): {mib}"

    # Every acknowledged write is there, as it was acknowledged.
    assert len(acked.memories) > 1000
    conn = sqlite3.connect(f"file:{home / 'memtrio.sqlite'}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        stored = dict(conn.execute("SELECT id, content FROM memories"))
    finally:
        conn.close()
    lost = {mid: text for mid, text in acked.memories.items() if stored.get(mid) != text}
    assert lost == {}, f"{len(lost)} acknowledged memories missing or changed"
    observations, relations = await exported_graph(home)
    missing = {
        name: sorted(seen - observations.get(name, set()))
        for name, seen in acked.observations.items()
        if not seen <= observations.get(name, set())
    }
    assert missing == {}, f"observations missing from {len(missing)} entities"
    assert acked.relations - relations == set()
    assert len(acked.observations[HUB]) > 100


@pytest.mark.parametrize("seed", [2, 3])
def test_soak_full_chaos_matrix(seed: int, tmp_path: Path) -> None:
    proc = run_cli("chaos", "--seed", str(seed), "--json", "--keep", str(tmp_path), timeout=1800)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    totals = report["totals"]
    assert totals["lost"] == 0 and totals["failed"] == 0
    failed = [s["name"] for s in report["scenarios"] if s["lost"] or s["violations"]]
    assert failed == []
    ran = {s["name"] for s in report["scenarios"]}
    # The scenarios only the full matrix has (the default suite runs --quick).
    assert {
        "crash-ranker",
        "crash-maintenance",
        "crash-everything",
        "kill9-embeddings",
        "kill9-vectors",
        "storm-embedder",
        "sdk-client-crashes",
    } <= ran
    assert totals["acked"] > 1000 and totals["faults"] > 100
