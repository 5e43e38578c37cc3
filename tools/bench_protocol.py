#!/usr/bin/env python3
"""Pipelined `ping` round trips over stdio against a real `memtrio mcp` process.

Usage: python tools/bench_protocol.py [--pings 20000] [--window 256] [--runs 5] [--cpu 0]

The server is pinned to one CPU (``--cpu``; the client runs on the others). A
writer thread keeps up to ``--window`` pings outstanding; a reader thread
timestamps each reply. Reports requests per second and p50/p99 latency per
run, then the median of the runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

from memtrio.actors.chaos.blocking import BlockingClient


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_once(pings: int, window: int, cpu: int | None) -> dict[str, float]:  # noqa: C901
    home = Path(tempfile.mkdtemp(prefix="memtrio-bench-"))

    def pin() -> None:
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})

    client = BlockingClient.memtrio(home, {"MEMTRIO_CODE": "off"}, preexec=pin)
    if cpu is not None:
        others = set(os.sched_getaffinity(0)) - {cpu}
        if others:
            os.sched_setaffinity(0, others)
    client.initialize("bench")

    sent_at = [0.0] * pings
    latencies = [0.0] * pings
    slots = threading.Semaphore(window)
    done = threading.Event()

    def write() -> None:
        batch: list[bytes] = []
        for i in range(pings):
            if not slots.acquire(blocking=False):
                if batch:
                    client.send_bytes(b"".join(batch))
                    batch.clear()
                slots.acquire()
            sent_at[i] = time.perf_counter()
            batch.append(b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n' % i)
            if len(batch) >= 16 or i == pings - 1:
                client.send_bytes(b"".join(batch))
                batch.clear()

    def read() -> None:
        for _ in range(pings):
            line = client.read_line()
            now = time.perf_counter()
            rid = json.loads(line)["id"]
            latencies[rid] = now - sent_at[rid]
            slots.release()
        done.set()

    start = time.perf_counter()
    threads = [threading.Thread(target=write), threading.Thread(target=read)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    code = client.close(30)
    if code != 0:
        raise SystemExit(f"server exited with {code}")
    return {
        "rps": pings / elapsed,
        "p50_ms": percentile(latencies, 0.5) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pings", type=int, default=20000)
    parser.add_argument("--window", type=int, default=256)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--cpu", type=int, default=0, help="CPU to pin the server to (-1: no pinning)"
    )
    args = parser.parse_args()
    cpu = None if args.cpu < 0 else args.cpu
    results = []
    print(
        f"pipelined ping over stdio: {args.pings} pings, window {args.window}, server pinned to CPU {cpu}"
    )
    for run in range(args.runs):
        r = run_once(args.pings, args.window, cpu)
        results.append(r)
        print(
            f"run {run + 1}: {r['rps']:,.0f} req/s  p50 {r['p50_ms']:.3f} ms  p99 {r['p99_ms']:.3f} ms"
        )
    med = {k: statistics.median(r[k] for r in results) for k in results[0]}
    print(
        f"median: {med['rps']:,.0f} req/s  p50 {med['p50_ms']:.3f} ms  p99 {med['p99_ms']:.3f} ms"
    )


if __name__ == "__main__":
    main()
