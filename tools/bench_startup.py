#!/usr/bin/env python3
"""Start-up cost of `memtrio mcp` and of the CLI, against the reference Node server.

Usage: python tools/bench_startup.py [--runs 5] [--json]

Each run spawns a fresh server (``MEMTRIO_HOME`` a new temporary directory, a
small git repository as its working directory) and speaks raw JSON-RPC over
stdio (no SDK in the timing). Measured from the spawn:

- the ``initialize`` reply;
- the first ``recall`` answered (embeddings on, the default), sent right after
  ``initialize``;
- the first code tool answered (``code_outline`` of a small file), sent by a
  second server started the same way (so the recall does not warm it);

and the resident memory (from /proc: the server plus all its descendant
processes) after ``initialize``, after the first ``recall``, and after the
first code tool. Then the wall time of the CLI commands that need no model
(``list``, ``show``, ``stats``, ``scopes``, ``search --lexical``) and of
``remember`` (which embeds). The reference server
``@modelcontextprotocol/server-memory`` (``npx -y``, from the local npm cache)
is timed from spawn to its ``initialize`` reply in the same run; without npx
that is skipped with a message. Every figure is the median of ``--runs``; ``--cli`` times the CLI
commands only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench-startup", "version": "1"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
SMALL_FILE = "def hello(name):\n    return f'hello {name}'\n\n\nclass Greeter:\n    pass\n"
CLI_COMMANDS = (
    ("list", ["list"]),
    ("show", ["show", "1"]),
    ("stats", ["stats"]),
    ("scopes", ["scopes"]),
    ("search --lexical", ["search", "--lexical", "benchmark"]),
    ("remember", ["remember", "a second memory about start-up"]),
)
PAGE = os.sysconf("SC_PAGE_SIZE")


def memtrio_cmd() -> list[str]:
    return [sys.executable, "-m", "memtrio.supervisors.cli"]


def make_repo(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir()
    (repo / "hello.py").write_text(SMALL_FILE)
    git = ["git", "-c", "user.name=b", "-c", "user.email=b@b", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "."], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "init"], cwd=repo, check=True)
    return repo


def tree_rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and all its descendants, in MB."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo.extend(children.get(p, []))
        try:
            with open(f"/proc/{p}/statm") as f:
                total += int(f.read().split()[1]) * PAGE
        except OSError:
            pass
    return total / 1e6


class Server:
    """One spawned stdio server; ``call`` writes a request and waits for its reply."""

    def __init__(self, cmd: list[str], env: dict[str, str], cwd: Path) -> None:
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
            bufsize=0,
        )

    def send(self, obj: dict[str, object]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(obj).encode() + b"\n")

    def call(self, obj: dict[str, object]) -> dict[str, object]:
        """Send ``obj`` and return its reply (notifications from the server skipped)."""
        assert self.proc.stdout is not None
        self.send(obj)
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"server exited before answering {obj.get('method')}")
            reply = json.loads(line)
            if reply.get("id") == obj["id"]:
                if "error" in reply:
                    raise RuntimeError(f"{obj.get('method')}: {reply['error']}")
                return reply

    def since_spawn(self) -> float:
        return time.perf_counter() - self.t0

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def tool(call_id: int, name: str, arguments: dict[str, object]) -> dict[str, object]:
    params = {"name": name, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": call_id, "method": "tools/call", "params": params}


def check_tool(reply: dict[str, object], name: str) -> None:
    result = reply["result"]
    assert isinstance(result, dict)
    if result.get("isError"):
        raise RuntimeError(f"{name} failed: {result.get('content')}")


def memtrio_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMTRIO_")}
    env["MEMTRIO_HOME"] = str(home)
    env["MEMTRIO_SERVE_ATTACH"] = "off"  # the embedded server, no owner left behind
    return env


def run_server_once(root: Path, repo: Path) -> dict[str, float]:
    """One spawn for initialize and recall, another for the first code tool."""
    out: dict[str, float] = {}
    home = Path(tempfile.mkdtemp(prefix="home-", dir=root))
    server = Server([*memtrio_cmd(), "mcp"], memtrio_env(home), repo)
    try:
        server.call(INIT)
        out["initialize_s"] = server.since_spawn()
        server.send(INITIALIZED)
        out["rss_after_initialize_mb"] = tree_rss_mb(server.proc.pid)
        reply = server.call(tool(1, "recall", {"query": "start-up time of the server"}))
        check_tool(reply, "recall")
        out["first_recall_s"] = server.since_spawn()
        out["rss_after_recall_mb"] = tree_rss_mb(server.proc.pid)
    finally:
        server.close()
    home = Path(tempfile.mkdtemp(prefix="home-", dir=root))
    server = Server([*memtrio_cmd(), "mcp"], memtrio_env(home), repo)
    try:
        server.call(INIT)
        server.send(INITIALIZED)
        reply = server.call(tool(1, "code_outline", {"path": "hello.py"}))
        check_tool(reply, "code_outline")
        out["first_code_tool_s"] = server.since_spawn()
        out["rss_after_code_tool_mb"] = tree_rss_mb(server.proc.pid)
    finally:
        server.close()
    return out


def run_cli_once(root: Path, repo: Path) -> dict[str, float]:
    """Wall time of each CLI command in a home holding one memory."""
    home = Path(tempfile.mkdtemp(prefix="home-", dir=root))
    env = {**memtrio_env(home), "MEMTRIO_EMBEDDINGS": "off"}
    seed = [*memtrio_cmd(), "remember", "a benchmark memory"]
    subprocess.run(seed, env=env, cwd=repo, check=True, capture_output=True)
    env = memtrio_env(home)
    out: dict[str, float] = {}
    for label, argv in CLI_COMMANDS:
        t0 = time.perf_counter()
        done = subprocess.run([*memtrio_cmd(), *argv], env=env, cwd=repo, capture_output=True)
        out[f"cli {label}_s"] = time.perf_counter() - t0
        if done.returncode != 0:
            raise RuntimeError(f"memtrio {label} failed: {done.stderr.decode()[-300:]}")
    return out


def run_reference_once(root: Path, repo: Path, npx: str) -> float:
    env = {**os.environ, "MEMORY_FILE_PATH": str(root / "reference-memory.jsonl")}
    server = Server([npx, "-y", "@modelcontextprotocol/server-memory"], env, repo)
    try:
        server.call(INIT)
        return server.since_spawn()
    finally:
        server.close()


def medians(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def report(figures: dict[str, float], reference: float | None) -> None:
    print(f"{'measure':<28} {'median':>10}  {'x reference':>11}")
    for key, value in figures.items():
        name, unit = key.rsplit("_", 1)
        shown = f"{value:.3f} s" if unit == "s" else f"{value:.1f} MB"
        ratio = ""
        if reference and unit == "s" and not name.startswith("cli"):
            ratio = f"{value / reference:.2f}"
        print(f"{name:<28} {shown:>10}  {ratio:>11}")
    if reference is not None:
        print(f"{'reference initialize':<28} {reference:.3f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--cli", action="store_true", help="only the CLI commands (no server, no reference)"
    )
    args = parser.parse_args()
    npx = shutil.which("npx")
    with tempfile.TemporaryDirectory(prefix="memtrio-startup-") as tmp:
        root = Path(tmp)
        repo = make_repo(root)
        server_runs, cli_runs, reference_runs = [], [], []
        for _ in range(args.runs):
            if not args.cli:
                server_runs.append(run_server_once(root, repo))
            cli_runs.append(run_cli_once(root, repo))
            if npx and not args.cli:
                reference_runs.append(run_reference_once(root, repo, npx))
    figures = {**(medians(server_runs) if server_runs else {}), **medians(cli_runs)}
    reference = statistics.median(reference_runs) if reference_runs else None
    if args.json:
        print(
            json.dumps({"runs": args.runs, "memtrio": figures, "reference_initialize_s": reference})
        )
        return 0
    if reference is None:
        print(
            "npx not found: the reference server (@modelcontextprotocol/server-memory) is skipped"
        )
    print(f"median of {args.runs} runs")
    report(figures, reference)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
