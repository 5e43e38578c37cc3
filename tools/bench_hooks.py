#!/usr/bin/env python
"""Wall time of the agent hooks, as the client runs them: one process per hook.

A temporary home and Git repository with ``--memories`` memories (conventions,
decisions, observations, a global tier); then, interleaved so that they share the
machine's load, ``--runs`` runs each of

- ``python -c "import trio, msgspec"`` (the floor: an interpreter and the two imports);
- ``memtrio hook session-start`` with Claude Code's SessionStart input (source startup);
- ``memtrio hook user-prompt-submit`` with a prompt the memories answer.

first with no server running, then with the home's owner running (``memtrio serve
--detach``, stopped at the end, also on failure). Prints p50 and p95 of each.

Usage::

    python tools/bench_hooks.py [--runs 30] [--memories 500]

Nothing downloads (the owner loads the bundled model).
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

MEMTRIO = [sys.executable, "-m", "memtrio.supervisors.cli"]
TOPICS = ("ruff", "trio", "sqlite", "relay", "owner", "anchors", "recall", "tokens", "tests")


def seed(home: Path, repo: Path, count: int) -> None:
    """``count`` memories of the repository (a tenth of them global), in process."""
    from memtrio.actors.memory import tools
    from memtrio.actors.memory.args import RememberArgs
    from memtrio.actors.store.tooling.runner import STORE_ONLY, tool_context
    from memtrio.supervisors.cli import run_with_app
    from memtrio.supervisors.context import AppContext

    async def body(app: AppContext) -> int:
        ctx = tool_context(app)
        for i in range(count):
            topic = TOPICS[i % len(TOPICS)]
            await tools.remember(
                ctx,
                RememberArgs(
                    content=f"Note {i} on {topic}: the {topic} setting {i} matters for module_{i}.py",
                    memory_type=("convention", "decision", "observation", "observation")[i % 4],
                    importance=(i % 5) / 5,
                    scopes=["global"] if i % 10 == 9 else None,
                ),
            )
        return 0

    cwd = Path.cwd()
    os.chdir(repo)
    try:
        args = argparse.Namespace(home=str(home), log_level="warning")
        run_with_app(
            args, body, features=STORE_ONLY, extra_config={"embedding": {"enabled": False}}
        )
    finally:
        os.chdir(cwd)


def env_for(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMTRIO_")}
    env["MEMTRIO_HOME"] = str(home)
    return env


def timed(argv: list[str], stdin: bytes, cwd: Path, env: dict[str, str]) -> tuple[float, bytes]:
    started = time.perf_counter()
    proc = subprocess.run(argv, input=stdin, cwd=cwd, env=env, capture_output=True, timeout=120)
    return time.perf_counter() - started, proc.stdout


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure(home: Path, repo: Path, runs: int) -> tuple[dict[str, list[float]], dict[str, int]]:
    """The wall times of each command, and how many of a hook's runs printed an answer."""
    env = env_for(home)
    start_in = json.dumps(
        {"session_id": "bench", "transcript_path": "", "cwd": str(repo),
         "hook_event_name": "SessionStart", "source": "startup"}
    ).encode()  # fmt: skip
    prompt_in = json.dumps(
        {"session_id": "bench", "cwd": str(repo), "hook_event_name": "UserPromptSubmit",
         "prompt": "which ruff setting matters for module_9.py?"}
    ).encode()  # fmt: skip
    cases = {
        'python -c "import trio, msgspec"': ([sys.executable, "-c", "import trio, msgspec"], b""),
        "hook session-start": ([*MEMTRIO, "hook", "session-start"], start_in),
        "hook user-prompt-submit": ([*MEMTRIO, "hook", "user-prompt-submit"], prompt_in),
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    answered: dict[str, int] = {name: 0 for name in cases}
    for name, (argv, data) in cases.items():  # warm the page cache once
        _, out = timed(argv, data, repo, env)
        if name.startswith("hook") and not out:
            raise SystemExit(f"{name} printed nothing: check the trace log in {home}/logs")
    for _ in range(runs):
        for name, (argv, data) in cases.items():
            seconds, out = timed(argv, data, repo, env)
            times[name].append(seconds)
            answered[name] += bool(out)
    return times, answered


def report(title: str, measured: tuple[dict[str, list[float]], dict[str, int]]) -> None:
    times, answered = measured
    print(f"{title}:")
    for name, values in times.items():
        print(
            f"  {name:34s} p50 {pct(values, 0.5):6.3f} s  p95 {pct(values, 0.95):6.3f} s"
            f"  (mean {statistics.fmean(values):.3f} s, n={len(values)})"
            + (f", {answered[name]} answered" if name.startswith("hook") else "")
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--memories", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="memtrio-bench-hooks-") as tmp:
        home, repo = Path(tmp) / "home", Path(tmp) / "repo"
        home.mkdir(mode=0o700)
        repo.mkdir()
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        seed(home, repo, args.memories)
        print(f"{args.memories} memories, {args.runs} runs each, {os.cpu_count()} cores, "
              f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip
        report("no server running", measure(home, repo, args.runs))
        env = env_for(home)
        subprocess.run([*MEMTRIO, "serve", "--detach"], cwd=repo, env=env, check=True,
                       capture_output=True, timeout=300)  # fmt: skip
        try:
            report("the home's server running", measure(home, repo, args.runs))
        finally:
            subprocess.run([*MEMTRIO, "serve", "--stop"], cwd=repo, env=env,
                           capture_output=True, timeout=120)  # fmt: skip
        print(f"load average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
