#!/usr/bin/env python3
"""What an attached `memtrio mcp` child costs, against an embedded one.

Usage: python tools/bench_attach.py [--runs 5] [--json]

Starts one ``memtrio serve --transport tcp --bind 127.0.0.1:0`` in a fresh
temporary home (embeddings on, the default), then spawns ``memtrio mcp``
children in a small git repository and speaks raw JSON-RPC to them over stdio.
For each kind of child, attached (the default while the server runs) and
embedded (``--no-attach``, with embeddings on and off), it measures from the
spawn: the ``initialize`` reply, the first ``recall`` answered (sent right
after), and the child's resident memory then (from /proc: ``rss_mb``), again
after a second recall `SETTLE` seconds later (``steady_rss_mb``: what loads in the
background has loaded), and its high-water mark then (``peak_mb``, VmHWM). Every figure is the median of ``--runs``;
the server's resident memory and high-water mark are read at the end. MB here are
MiB (2**20 bytes).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from memtrio.actors.chaos.blocking import BlockingClient

CLI = [sys.executable, "-m", "memtrio.supervisors.cli"]
PAGE = os.sysconf("SC_PAGE_SIZE")
# Seconds between the first recall and the second, after which the steady RSS is read.
SETTLE = 3.0


def rss_mb(pid: int) -> float:
    resident = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    return resident * PAGE / 2**20


def peak_mb(pid: int) -> float:
    """The high-water mark of ``pid``'s resident memory (VmHWM), in MiB."""
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        if row.startswith("VmHWM:"):
            return int(row.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM for pid {pid}")


def one_child(home: Path, repo: Path, args: list[str], env: dict[str, str]) -> dict[str, object]:
    """Spawn one child, time initialize and the first recall, read its RSS, end it."""
    # attach only to the serve started here: never start an owner that outlives the run
    child = BlockingClient.memtrio(
        home,
        {"MEMTRIO_EMBEDDINGS": "on", "MEMTRIO_SERVE_ATTACH": "existing", **env},
        repo,
        args,
        stderr=subprocess.PIPE,
        timeout=120,
    )
    child.initialize("bench-attach")
    initialized = time.perf_counter() - child.started
    child.call_tool("recall", {"query": "start-up"})
    recalled = time.perf_counter() - child.started
    rss = rss_mb(child.pid)
    time.sleep(SETTLE)  # what loads in the background (the ranker, the model) has loaded
    child.call_tool("recall", {"query": "start-up"})
    steady = rss_mb(child.pid)
    peak = peak_mb(child.pid)
    child.close(60)
    assert child.proc.stderr is not None
    attached = b"attaching to memtrio serve" in child.proc.stderr.read()
    return {
        "initialize_s": initialized,
        "first_recall_s": recalled,
        "rss_mb": rss,
        "steady_rss_mb": steady,
        "peak_mb": peak,
        "attached": attached,
    }


def median(rows: list[dict[str, object]], key: str) -> float:
    return round(statistics.median(float(row[key]) for row in rows), 3)  # type: ignore[arg-type]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home, repo = Path(tmp) / "home", Path(tmp) / "repo"
        repo.mkdir()
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        serve = subprocess.Popen(
            [*CLI, "serve", "--transport", "tcp", "--bind", "127.0.0.1:0", "--home", str(home)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        assert serve.stderr is not None
        serve.stderr.readline()  # "memtrio serve: listening on ..."
        deadline = time.monotonic() + 60
        while not (home / "run" / "serve.json").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        kinds = {
            "attached": ([], {}),
            "embedded, embeddings off": (["--no-attach"], {"MEMTRIO_EMBEDDINGS": "off"}),
            "embedded, embeddings on": (["--no-attach"], {}),
        }
        results: dict[str, dict[str, object]] = {}
        try:
            for kind, (args, env) in kinds.items():
                rows = [one_child(home, repo, args, env) for _ in range(opts.runs)]
                assert all(row["attached"] == (kind == "attached") for row in rows), kind
                results[kind] = {
                    key: median(rows, key)
                    for key in (
                        "initialize_s",
                        "first_recall_s",
                        "rss_mb",
                        "steady_rss_mb",
                        "peak_mb",
                    )
                }
            results["server"] = {
                "rss_mb": round(rss_mb(serve.pid), 1),
                "peak_mb": round(peak_mb(serve.pid), 1),
            }
        finally:
            serve.terminate()
            serve.wait(timeout=60)
    if opts.json:
        print(json.dumps({"runs": opts.runs, "results": results}, indent=2))
    else:
        print(f"median of {opts.runs} runs, from spawn")
        for kind, row in results.items():
            print(f"{kind:26} " + "  ".join(f"{k} {v}" for k, v in row.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
