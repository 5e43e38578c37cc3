"""How long the owner model of attach takes: the first ``memtrio mcp`` of a home (which
starts the owner), a later one (which attaches), and a child whose owner was killed
(until its next call is served by a new owner).

Usage: python tools/bench_owner.py [--runs 5] [--embeddings]

Each run uses a fresh home in a temporary directory (embeddings off unless
``--embeddings``, code index off), three children, one ``kill -9`` of the owner.
Every process started is ended by pid (the owners with their process group).
Prints the median and the worst of each figure.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import tempfile
import time
from pathlib import Path

from memtrio.actors.chaos.blocking import BlockingClient
from memtrio.actors.net import runtime, spawn


def start_child(home: Path, env: dict[str, str]) -> BlockingClient:
    """A ``memtrio mcp`` of ``home``, initialized (it attaches to the home's owner)."""
    child = BlockingClient.memtrio(home, env, timeout=120)
    child.initialize("bench-owner", "2025-06-18")
    return child


def status_pid(child: BlockingClient) -> int | None:
    """The pid serving ``child``'s ``server_status``; None for a "retry" answer."""
    reply = child.call_tool("server_status")
    if "error" in reply:
        return None
    return int(reply["result"]["structuredContent"]["pid"])


def one_run(base: Path, embeddings: bool) -> dict[str, float]:
    home = base / "home"
    home.mkdir(mode=0o700)
    env = {
        "MEMTRIO_EMBEDDINGS": "on" if embeddings else "off",
        "MEMTRIO_CODE": "off",
        "MEMTRIO_SERVE_ATTACH": "auto",
    }
    children: list[BlockingClient] = []
    try:
        started = time.perf_counter()
        first = start_child(home, env)
        children.append(first)
        cold = time.perf_counter() - started
        started = time.perf_counter()
        second = start_child(home, env)
        children.append(second)
        warm = time.perf_counter() - started
        third = start_child(home, env)
        children.append(third)
        owner = status_pid(first)
        assert owner is not None and runtime.read(home)[0] is not None
        os.kill(owner, signal.SIGKILL)
        killed = time.perf_counter()
        back = []
        for child in children:
            while (pid := status_pid(child)) is None or pid == owner:
                pass
            back.append(time.perf_counter() - killed)
        return {"first_child": cold, "later_child": warm, "back_after_kill": max(back)}
    finally:
        for child in children:
            child.close(10)
        spawn.kill_owners(home)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--embeddings", action="store_true")
    args = parser.parse_args()
    rows = []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            rows.append(one_run(Path(tmp), args.embeddings))
    print(f"bench_owner: {args.runs} runs, embeddings {'on' if args.embeddings else 'off'}")
    print("| seconds | median | worst |")
    print("| --- | ---: | ---: |")
    labels = {
        "first_child": "first `memtrio mcp` of a home: owner started, `initialize` answered",
        "later_child": "a later `memtrio mcp`: attached, `initialize` answered",
        "back_after_kill": "owner killed: until each of 3 children is served by a new one",
    }
    for key, label in labels.items():
        values = [row[key] for row in rows]
        print(f"| {label} | {statistics.median(values):.2f} | {max(values):.2f} |")


if __name__ == "__main__":
    main()
