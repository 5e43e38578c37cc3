#!/usr/bin/env python3
"""Eager or lazy model loading: what each costs in memory and what it saves in time.

Usage: python tools/bench_warm.py [--runs 3] [--json]

Two ways a process serves a session with embeddings on (the default), in a fresh
temporary home holding a few memories:

- ``embedded (lazy)``: ``memtrio mcp --no-attach``, one client; its model loads on the
  first embedding;
- ``shared server (eager)``: a ``memtrio serve --transport tcp --bind 127.0.0.1:0`` that
  a ``memtrio mcp`` child attaches to; it loads the model in the background once its
  first client is initialized.

For each: ``initialize``, then ``stats`` (no embedding), then `SETTLE` seconds of
idleness, and the serving process's resident memory (``idle_rss_mb``); then the
first ``recall`` (which embeds its query: ``first_recall_s``) and the resident memory
after it (``after_recall_rss_mb``), and the high-water mark (``peak_mb``, VmHWM). MB
are MiB. Every figure is the median of ``--runs``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_attach import CLI, peak_mb, rss_mb
from memtrio.actors.chaos.blocking import BlockingClient
from memtrio.actors.chaos.client import server_env

# Seconds of idleness after the first calls before the idle RSS is read: a model warmed
# in the background after initialize has loaded by then.
SETTLE = 4.0
NOTES = [
    "The migration to PostgreSQL runs every night at two.",
    "Use ruff format before committing; CI rejects unformatted code.",
    "The flaky upload test needs the S3 mock started first.",
]
ON = {"MEMTRIO_EMBEDDINGS": "on", "MEMTRIO_CODE": "off"}


def session(home: Path, repo: Path, args: list[str], env: dict[str, str]) -> BlockingClient:
    child = BlockingClient.memtrio(home, {**ON, **env}, repo, args, timeout=120)
    child.initialize("bench-warm")
    child.call_tool("stats", {})
    return child


def measure(child: BlockingClient, pid: int) -> dict[str, float]:
    """Idle RSS of ``pid`` after `SETTLE`, then the first recall's time and the RSS after."""
    time.sleep(SETTLE)
    idle = rss_mb(pid)
    started = time.perf_counter()
    child.call_tool("recall", {"query": "when does the database migration run"})
    recalled = time.perf_counter() - started
    return {
        "idle_rss_mb": idle,
        "first_recall_s": recalled,
        "after_recall_rss_mb": rss_mb(pid),
        "peak_mb": peak_mb(pid),
    }


def embedded(home: Path, repo: Path) -> dict[str, float]:
    child = session(home, repo, ["--no-attach"], {})
    try:
        return measure(child, child.pid)
    finally:
        child.close(60)


def shared(home: Path, repo: Path) -> dict[str, float]:
    serve = subprocess.Popen(
        [*CLI, "serve", "--transport", "tcp", "--bind", "127.0.0.1:0", "--home", str(home)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=server_env(home, ON),
    )
    try:
        deadline = time.monotonic() + 60
        while not (home / "run" / "serve.json").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        child = session(home, repo, [], {"MEMTRIO_SERVE_ATTACH": "existing"})
        try:
            return measure(child, serve.pid)
        finally:
            child.close(60)
    finally:
        serve.terminate()
        serve.wait(timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args()
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        home, repo = Path(tmp) / "home", Path(tmp) / "repo"
        repo.mkdir()
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        for note in NOTES:
            subprocess.run(
                [*CLI, "remember", note, "--home", str(home)],
                cwd=repo,
                env=server_env(home, ON),
                check=True,
                capture_output=True,
            )
        for kind, run in (("embedded (lazy)", embedded), ("shared server (eager)", shared)):
            rows = [run(home, repo) for _ in range(opts.runs)]
            results[kind] = {
                key: round(statistics.median(row[key] for row in rows), 3) for key in rows[0]
            }
    if opts.json:
        print(json.dumps({"runs": opts.runs, "settle_s": SETTLE, "results": results}, indent=2))
    else:
        print(f"median of {opts.runs} runs; idle = {SETTLE:g} s after initialize and stats")
        for kind, row in results.items():
            print(f"{kind:24} " + "  ".join(f"{k} {v}" for k, v in row.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
