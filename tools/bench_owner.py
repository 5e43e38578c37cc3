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
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from memtrio.actors.net import runtime, spawn

INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench-owner", "version": "1"},
    },
}


class Child:
    def __init__(self, home: Path, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "memtrio.supervisors.cli", "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=home,
        )
        self.ids = 0

    def call(self, method: str, params: object) -> dict[str, object]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.ids += 1
        line = {"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params}
        self.process.stdin.write(json.dumps(line).encode() + b"\n")
        self.process.stdin.flush()
        while True:
            reply = json.loads(self.process.stdout.readline())
            if reply.get("id") == self.ids:
                return dict(reply)

    def initialize(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(INIT).encode() + b"\n")
        self.process.stdin.flush()
        json.loads(self.process.stdout.readline())
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        self.process.stdin.write(json.dumps(note).encode() + b"\n")
        self.process.stdin.flush()

    def status_pid(self) -> int | None:
        """The pid serving this child's ``server_status``; None for a "retry" answer."""
        reply = self.call("tools/call", {"name": "server_status", "arguments": {}})
        if "error" in reply:
            return None
        result = reply["result"]
        assert isinstance(result, dict)
        return int(result["structuredContent"]["pid"])

    def end(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def one_run(base: Path, embeddings: bool) -> dict[str, float]:
    home = base / "home"
    home.mkdir(mode=0o700)
    env = {
        **os.environ,
        "MEMTRIO_HOME": str(home),
        "MEMTRIO_EMBEDDINGS": "on" if embeddings else "off",
        "MEMTRIO_CODE": "off",
        "MEMTRIO_SERVE_ATTACH": "auto",
    }
    children: list[Child] = []
    try:
        started = time.perf_counter()
        first = Child(home, env)
        children.append(first)
        first.initialize()
        cold = time.perf_counter() - started
        started = time.perf_counter()
        second = Child(home, env)
        children.append(second)
        second.initialize()
        warm = time.perf_counter() - started
        third = Child(home, env)
        children.append(third)
        third.initialize()
        owner = first.status_pid()
        assert owner is not None and runtime.read(home)[0] is not None
        os.kill(owner, signal.SIGKILL)
        killed = time.perf_counter()
        back = []
        for child in children:
            while (pid := child.status_pid()) is None or pid == owner:
                pass
            back.append(time.perf_counter() - killed)
        return {"first_child": cold, "later_child": warm, "back_after_kill": max(back)}
    finally:
        for child in children:
            child.end()
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
