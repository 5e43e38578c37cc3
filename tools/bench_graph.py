#!/usr/bin/env python
"""The same knowledge-graph workload against memtrio and the reference memory server.

For each size (default 1,000 and 10,000 entities) and each server:

1. start it as a stdio child in a fresh directory: ``memtrio mcp`` with
   ``MEMTRIO_EMBEDDINGS=off`` and a fresh ``MEMTRIO_HOME``, and the reference
   server ``npx -y @modelcontextprotocol/server-memory`` with
   ``MEMORY_FILE_PATH`` in a fresh directory (skipped with a message when
   Node/npx is missing or the package cannot be fetched);
2. load the graph through its tools: ``create_entities`` in calls of 1,000
   entities with 5 observations each (8-12 words from a 5,000-word synthetic
   vocabulary plus a unique token ``kNNNNNN``), then ``create_relations`` in
   calls of 1,000 (entity i -> entity i+1, so each entity has one outgoing
   relation);
3. after 10 warm-up calls of each tool, time ``--calls`` ``tools/call`` round
   trips (one JSON-RPC line written, its reply line read; no SDK) of
   ``search_nodes`` (the unique token of a random observation: one match in
   both servers), ``open_nodes`` (5 random names) and ``add_observations``
   (one new observation on a random entity), in rotation.

Prints p50/p99 per tool and server, the speed-up (reference p50 / memtrio p50),
and writes the same as JSON with ``--json FILE``.

Usage::

    python tools/bench_graph.py                    # 1k and 10k, 200 calls
    python tools/bench_graph.py --sizes 1000 --calls 50 --skip-reference

Target: at 10,000 entities memtrio is at least 10x faster than the reference
server on add_observations and search_nodes (p50).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REFERENCE_PACKAGE = "@modelcontextprotocol/server-memory"
TOOLS = ("search_nodes", "open_nodes", "add_observations")
SYLLABLES = "ka lo mi ne ru ta si vo pe da gu fe zi bo cha tri ment ion ser ver".split()
BATCH = 1000
WARMUP = 10


class Server:
    """A stdio MCP server driven line by line."""

    def __init__(self, command: list[str], env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
        )
        self.next_id = 0

    def _send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: Any, timeout_hint: str = "") -> dict[str, Any]:
        self.next_id += 1
        rid = self.next_id
        self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"server closed stdout during {method} {timeout_hint}")
            msg = json.loads(line)
            if msg.get("id") == rid:
                return msg

    def initialize(self) -> None:
        reply = self.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "bench_graph", "version": "1"},
            },
        )
        if "result" not in reply:
            raise RuntimeError(f"initialize failed: {reply}")
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def call(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        reply = self.request("tools/call", {"name": tool, "arguments": args}, tool)
        result = reply.get("result")
        if result is None or result.get("isError"):
            raise RuntimeError(f"{tool} failed: {json.dumps(reply)[:300]}")
        return result

    def close(self) -> None:
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def memtrio_server(workdir: Path) -> Server:
    home = workdir / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMTRIO_")}
    env.update(MEMTRIO_HOME=str(home), MEMTRIO_EMBEDDINGS="off", MEMTRIO_CODE="off")
    return Server([sys.executable, "-m", "memtrio.supervisors.cli", "mcp"], env, workdir)


def reference_server(workdir: Path) -> Server:
    npx = shutil.which("npx")
    if npx is None or shutil.which("node") is None:
        raise RuntimeError("Node.js/npx is not installed")
    env = dict(os.environ, MEMORY_FILE_PATH=str(workdir / "memory.jsonl"))
    return Server([npx, "-y", REFERENCE_PACKAGE], env, workdir)


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

    def observation(self, i: int, j: int) -> str:
        filler = " ".join(self.rng.choice(self.words) for _ in range(self.rng.randint(8, 12)))
        return f"{filler} {self.token(i, j)}"

    def entity_batches(self) -> list[list[dict[str, Any]]]:
        return [
            [
                {
                    "name": self.name(i),
                    "entityType": self.rng.choice(("person", "project", "service", "library")),
                    "observations": [self.observation(i, j) for j in range(5)],
                }
                for i in range(start, min(start + BATCH, self.size))
            ]
            for start in range(0, self.size, BATCH)
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

    def args(self, tool: str) -> dict[str, Any]:
        if tool == "search_nodes":
            i, j = self.rng.randrange(self.size), self.rng.randrange(5)
            return {"query": self.token(i, j)}
        if tool == "open_nodes":
            return {"names": [self.name(self.rng.randrange(self.size)) for _ in range(5)]}
        self.added += 1
        i = self.rng.randrange(self.size)
        text = " ".join(self.rng.choice(self.words) for _ in range(10)) + f" added{self.added}"
        return {"observations": [{"entityName": self.name(i), "contents": [text]}]}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def run_one(kind: str, size: int, calls: int, seed: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"bench-graph-{kind}-") as tmp:
        workdir = Path(tmp)
        server = memtrio_server(workdir) if kind == "memtrio" else reference_server(workdir)
        try:
            server.initialize()
            work = Workload(size, seed)
            started = time.perf_counter()
            for batch in work.entity_batches():
                server.call("create_entities", {"entities": batch})
            for batch in work.relation_batches():
                server.call("create_relations", {"relations": batch})
            load = time.perf_counter() - started
            check = server.call("search_nodes", {"query": work.token(size // 2, 3)})
            found = check.get("structuredContent") or json.loads(check["content"][0]["text"])
            assert [e["name"] for e in found["entities"]] == [work.name(size // 2)], found
            for tool in TOOLS:
                for _ in range(WARMUP):
                    server.call(tool, work.args(tool))
            times: dict[str, list[float]] = {t: [] for t in TOOLS}
            for n in range(calls * len(TOOLS)):
                tool = TOOLS[n % len(TOOLS)]
                args = work.args(tool)
                t0 = time.perf_counter()
                server.call(tool, args)
                times[tool].append((time.perf_counter() - t0) * 1000)
        finally:
            server.close()
    return {
        "server": kind,
        "entities": size,
        "load_s": round(load, 2),
        **{
            f"{t}_{q}": round(percentile(v, p), 2)
            for t, v in times.items()
            for q, p in (("p50", 0.5), ("p99", 0.99))
        },
        "calls": calls,
        "median_check": {t: round(statistics.median(v), 2) for t, v in times.items()},
    }


def table(rows: list[dict[str, Any]]) -> str:
    head = "| entities | server | load (create) | " + " | ".join(
        f"{t} p50 | {t} p99" for t in TOOLS
    )
    lines = [
        head + " |",
        "| ---: | --- | ---: | " + " | ".join("---: | ---:" for _ in TOOLS) + " |",
    ]
    for r in rows:
        cells = [f"{r['entities']:,}", r["server"], f"{r['load_s']} s"]
        cells += [f"{r[f'{t}_{q}']} ms" for t in TOOLS for q in ("p50", "p99")]
        lines.append("| " + " | ".join(cells) + " |")
    by_size: dict[int, dict[str, dict[str, Any]]] = {}
    for r in rows:
        by_size.setdefault(r["entities"], {})[r["server"]] = r
    lines.append("")
    for size, pair in by_size.items():
        if "memtrio" in pair and "reference" in pair:
            ratios = ", ".join(
                f"{t} {pair['reference'][f'{t}_p50'] / max(pair['memtrio'][f'{t}_p50'], 1e-9):.0f}x"
                for t in TOOLS
            )
            lines.append(f"speed-up at {size:,} entities (reference p50 / memtrio p50): {ratios}")
    return "\n".join(lines)


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
