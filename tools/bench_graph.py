#!/usr/bin/env python
"""The same knowledge-graph workload against memtrio and the reference memory server.

For each size (default 1,000 and 10,000 entities) and each server, in one run:

1. start it as a stdio child in a fresh directory: ``memtrio mcp`` with
   ``MEMTRIO_EMBEDDINGS=off`` and a fresh ``MEMTRIO_HOME``, and the reference
   server started with ``node`` on its installed package (``npm install -g
   @modelcontextprotocol/server-memory``; never ``npx``, whose package
   resolution is not the server's time) with ``MEMORY_FILE_PATH`` in a fresh
   directory (skipped with a message when Node or the package is missing);
2. load the graph through its tools: ``create_entities`` in calls of 100
   entities with 5 observations each (8-12 words from a 5,000-word synthetic
   vocabulary plus a unique token ``kNNNNNN``; the first observation of every
   97th entity also holds the word ``hubword``, so about 1% of the entities
   match it: 103 at 10,000), timed per entity; then ``create_relations`` in
   calls of 1,000 (entity i -> entity i+1, so each entity has one outgoing
   relation);
3. after 10 warm-up calls of each tool, time ``--calls`` ``tools/call`` round
   trips of each (from writing the JSON-RPC line to reading its reply line;
   the client's JSON encoding and parsing are outside the timing; no SDK), a
   block per tool: ``search_nodes`` of the unique token of a random
   observation (one match in both servers), ``search_nodes`` of ``hubword``
   (about 1% of the entities), ``open_nodes`` (5 random names) and
   ``add_observations`` (one new observation on a random entity); and
   ``ping``, the floor of one request over stdio.

Prints p50/p99 per figure and server with the ratio reference / memtrio, and
memtrio's CPU per call (user + system time of the server process, from /proc:
less noisy than wall time on a shared machine); ``--json FILE`` writes the rows.

Usage::

    python tools/bench_graph.py                    # 1k and 10k, 200 calls
    python tools/bench_graph.py --sizes 1000 --calls 50 --skip-reference

Targets at 10,000 entities (issue #16): create_entities <= 1/10 of the
reference's time per entity; p50 add_observations <= 0.4 ms, search_nodes
<= 0.5 ms (one hit) / <= 1.5 ms (about 100 hits), open_nodes <= 0.3 ms.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_startup import INSTALL_REFERENCE, find_reference  # tools/, beside this script
from memtrio.actors.chaos.blocking import BlockingClient

FIGURES = ("ping", "search_nodes", "search_nodes_hub", "open_nodes", "add_observations")
FIGURE_LABELS = {
    "ping": "ping (the stdio floor)",
    "search_nodes": "search_nodes, 1 hit",
    "search_nodes_hub": "search_nodes, {hits} hits",
    "open_nodes": "open_nodes, 5 names",
    "add_observations": "add_observations, 1",
}
HUB_WORD = "hubword"
HUB_EVERY, HUB_AT = 97, 50
CREATE_BATCH = 100
SYLLABLES = "ka lo mi ne ru ta si vo pe da gu fe zi bo cha tri ment ion ser ver".split()
BATCH = 1000
# Seconds one call may take before the run gives up on the server.
CALL_TIMEOUT = 3600.0
WARMUP = 10


def memtrio_server(workdir: Path) -> BlockingClient:
    home = workdir / "home"
    home.mkdir()
    return BlockingClient.memtrio(home, {"MEMTRIO_CODE": "off"}, workdir, timeout=CALL_TIMEOUT)


def reference_server(workdir: Path) -> BlockingClient:
    node = shutil.which("node")
    script = find_reference(None)
    if node is None or script is None:
        raise RuntimeError(f"Node.js or the reference package is missing ({INSTALL_REFERENCE})")
    env = dict(os.environ, MEMORY_FILE_PATH=str(workdir / "memory.jsonl"))
    return BlockingClient([node, str(script)], env, workdir, timeout=CALL_TIMEOUT)


class Workload:
    def __init__(self, size: int, seed: int) -> None:
        self.size = size
        self.rng = random.Random(seed)
        words: set[str] = set()
        while len(words) < 5000:
            words.add("".join(self.rng.choice(SYLLABLES) for _ in range(self.rng.randint(2, 4))))
        self.words = sorted(words)
        self.added = 0

    def name(self, i: int) -> str:
        return f"entity-{i:06d}"

    def token(self, i: int, j: int) -> str:
        return f"k{i * 5 + j:07d}"

    def hub_hits(self) -> int:
        return sum(1 for i in range(self.size) if i % HUB_EVERY == HUB_AT)

    def observation(self, i: int, j: int) -> str:
        filler = " ".join(self.rng.choice(self.words) for _ in range(self.rng.randint(8, 12)))
        hub = f" {HUB_WORD}" if j == 0 and i % HUB_EVERY == HUB_AT else ""
        return f"{filler}{hub} {self.token(i, j)}"

    def entity_batches(self) -> list[list[dict[str, Any]]]:
        return [
            [
                {
                    "name": self.name(i),
                    "entityType": self.rng.choice(("person", "project", "service", "library")),
                    "observations": [self.observation(i, j) for j in range(5)],
                }
                for i in range(start, min(start + CREATE_BATCH, self.size))
            ]
            for start in range(0, self.size, CREATE_BATCH)
        ]

    def relation_batches(self) -> list[list[dict[str, str]]]:
        return [
            [
                {
                    "from": self.name(i),
                    "to": self.name((i + 1) % self.size),
                    "relationType": "depends_on",
                }
                for i in range(start, min(start + BATCH, self.size))
            ]
            for start in range(0, self.size, BATCH)
        ]

    def args(self, figure: str) -> tuple[str, dict[str, Any]]:
        """The tool and arguments of one call of ``figure``."""
        if figure == "search_nodes":
            i, j = self.rng.randrange(self.size), self.rng.randrange(5)
            return figure, {"query": self.token(i, j)}
        if figure == "search_nodes_hub":
            return "search_nodes", {"query": HUB_WORD}
        if figure == "open_nodes":
            return figure, {"names": [self.name(self.rng.randrange(self.size)) for _ in range(5)]}
        self.added += 1
        i = self.rng.randrange(self.size)
        text = " ".join(self.rng.choice(self.words) for _ in range(10)) + f" added{self.added}"
        return figure, {"observations": [{"entityName": self.name(i), "contents": [text]}]}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (all its threads), from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return math.nan
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load(server: BlockingClient, work: Workload) -> dict[str, float]:
    """Create the graph; the create_entities figures (per entity, whole load and last 10%)."""
    per_entity: list[float] = []
    cpu0 = cpu_seconds(server.proc.pid)
    started = time.perf_counter()
    created = 0.0
    for batch in work.entity_batches():
        ms = server.timed_call("create_entities", {"entities": batch})[1]
        per_entity.append(ms / len(batch))
        created += ms / 1000
    cpu = cpu_seconds(server.proc.pid) - cpu0
    for batch in work.relation_batches():
        server.tool("create_relations", {"relations": batch})
    tail = per_entity[-max(1, len(per_entity) // 10) :]
    return {
        "load_s": round(time.perf_counter() - started, 2),
        "create_entity_ms": round(created * 1000 / work.size, 4),
        "create_entity_last10_ms": round(statistics.mean(tail), 4),
        "create_entity_cpu_ms": round(cpu * 1000 / work.size, 4),
    }


def run_one(kind: str, size: int, calls: int, seed: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"bench-graph-{kind}-") as tmp:
        workdir = Path(tmp)
        server = memtrio_server(workdir) if kind == "memtrio" else reference_server(workdir)
        row: dict[str, Any] = {"server": kind, "entities": size, "calls": calls}
        try:
            server.initialize("bench_graph", "2025-06-18")
            work = Workload(size, seed)
            row.update(load(server, work))
            check = server.tool("search_nodes", {"query": work.token(size // 2, 3)})
            found = check.get("structuredContent") or json.loads(check["content"][0]["text"])
            assert [e["name"] for e in found["entities"]] == [work.name(size // 2)], found
            hub = server.tool("search_nodes", {"query": HUB_WORD})
            hub_found = hub.get("structuredContent") or json.loads(hub["content"][0]["text"])
            row["hub_hits"] = hub_found.get("total", len(hub_found["entities"]))
            row["hub_returned"] = len(hub_found["entities"])
            assert row["hub_hits"] == work.hub_hits(), (row["hub_hits"], work.hub_hits())
            for figure in FIGURES:
                for _ in range(WARMUP):
                    time_call(server, *work.args(figure))
                times = []
                cpu0 = cpu_seconds(server.proc.pid)
                for _ in range(calls):
                    times.append(time_call(server, *work.args(figure)))
                cpu = cpu_seconds(server.proc.pid) - cpu0
                row[f"{figure}_p50"] = round(percentile(times, 0.5), 3)
                row[f"{figure}_p99"] = round(percentile(times, 0.99), 3)
                if kind == "memtrio":
                    row[f"{figure}_cpu"] = round(cpu * 1000 / calls, 3)
        finally:
            server.close()
    return row


def time_call(server: BlockingClient, tool: str, args: dict[str, Any]) -> float:
    """Milliseconds of one round trip (``ping`` is the protocol's, not a tool)."""
    if tool == "ping":
        return server.timed_request("ping", {})[1]
    return server.timed_call(tool, args)[1]


def table(rows: list[dict[str, Any]]) -> str:
    """One line per figure and size: memtrio, reference, ratio (reference / memtrio)."""
    lines = [
        "| entities | figure | memtrio | memtrio CPU/call | reference | reference / memtrio |",
        "| ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    by_size: dict[int, dict[str, dict[str, Any]]] = {}
    for r in rows:
        by_size.setdefault(r["entities"], {})[r["server"]] = r
    for size, pair in by_size.items():
        mine, ref = pair.get("memtrio", {}), pair.get("reference", {})
        cells = [
            (
                "create_entities per entity (100x5 per call)",
                "create_entity_ms",
                "create_entity_cpu_ms",
            )
        ]
        cells.append(
            ("create_entities per entity, last 10% of calls", "create_entity_last10_ms", "")
        )
        for figure in FIGURES:
            label = FIGURE_LABELS[figure].format(hits=mine.get("hub_hits", "?"))
            cells.append((label + " p50", f"{figure}_p50", f"{figure}_cpu"))
            cells.append((label + " p99", f"{figure}_p99", ""))
        for label, key, cpu_key in cells:
            m, rf = mine.get(key), ref.get(key)
            ratio = f"{rf / m:.1f}x" if m and rf else "-"
            cpu = f"{mine[cpu_key]} ms" if cpu_key and cpu_key in mine else ""
            lines.append(f"| {size:,} | {label} | {_ms(m)} | {cpu} | {_ms(rf)} | {ratio} |")
    return "\n".join(lines)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000", help="entity counts (comma separated)")
    parser.add_argument("--calls", type=int, default=200, help="timed calls per tool")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--skip-reference", action="store_true")
    parser.add_argument("--json", help="also write the rows as JSON to this file")
    args = parser.parse_args()
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        for kind in ("memtrio", "reference"):
            if kind == "reference" and args.skip_reference:
                continue
            try:
                row = run_one(kind, size, args.calls, args.seed)
            except RuntimeError as exc:
                if kind != "reference":
                    raise
                print(f"reference server skipped: {exc}", file=sys.stderr)
                continue
            print(json.dumps(row), file=sys.stderr, flush=True)
            rows.append(row)
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
