#!/usr/bin/env python3
"""Start-up cost of `memtrio mcp` and of the CLI, against the reference Node server.

Usage: python tools/bench_startup.py [--runs 10] [--reference PATH] [--full | --cli] [--json]

Every figure is the median of ``--runs`` rounds. One round times, one after
the other (interleaved, so that the load of a shared machine falls on all of
them alike):

- ``memtrio mcp``: spawn -> ``initialize`` reply (a fresh ``MEMTRIO_HOME``, a
  small git repository as the working directory, raw JSON-RPC over stdio), three
  ways: embedded (``MEMTRIO_SERVE_ATTACH=off``, as ``--no-attach``); the first child
  of a home (``attach = "auto"``, no owner yet: it starts one); an attached child
  (``attach = "auto"``, the home's owner already running, started once before the
  rounds by a first child). Every owner started is killed (with its process group)
  before the script returns;
- the reference server ``@modelcontextprotocol/server-memory``: spawn ->
  ``initialize`` reply, started as ``node <package>/dist/index.js`` with
  ``MEMORY_FILE_PATH`` a temporary file (``--reference PATH``, else the package
  installed under ``npm root -g``; never through ``npx``, whose package
  resolution adds about 0.35 s; not installed: its row is skipped and the
  command to install it printed);
- the CPU time (user + system, from /proc) of the embedded server's process and of
  the reference's when each has answered: steadier than wall time on a loaded machine
  (printed with its ratio to the reference's);
- the floor: ``python -c "import trio, msgspec"`` (the interpreter and the two
  libraries every memtrio command needs);
- the CLI commands that need no model (``stats``, ``list``, ``show``,
  ``scopes``, ``search --lexical``) in a home holding one memory.

The goals: ``initialize`` at or under the reference's; each CLI command at
most twice the floor. ``--full`` adds, per round, the first ``recall`` and the
first code tool (each in its own spawn, sent right after ``initialize``), the
resident memory (from /proc: the server and its child processes) after each,
and ``remember`` (which embeds); ``--cli`` times only the floor and the CLI
commands.

The memtrio package is compiled to bytecode first (``compileall``, as a pip
install does; a checkout run with ``PYTHONDONTWRITEBYTECODE`` would otherwise
recompile every module at every start); ``--no-compile`` skips that. Every
process this script starts is ended before it returns.
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from memtrio.actors.chaos.blocking import BlockingClient
from memtrio.actors.chaos.client import server_env

INIT_VERSION = "2025-06-18"
CLIENT = "bench-startup"
SMALL_FILE = "def hello(name):\n    return f'hello {name}'\n\n\nclass Greeter:\n    pass\n"
CLI_COMMANDS = (
    ("stats", ["stats"]),
    ("list", ["list"]),
    ("show", ["show", "1"]),
    ("scopes", ["scopes"]),
    ("search --lexical", ["search", "--lexical", "benchmark"]),
)
REFERENCE_PACKAGE = "@modelcontextprotocol/server-memory"
INSTALL_REFERENCE = f"npm install -g {REFERENCE_PACKAGE}"
FLOOR = [sys.executable, "-c", "import trio, msgspec"]
PAGE = os.sysconf("SC_PAGE_SIZE")
WAIT = 30.0  # seconds a spawned process gets to answer or to exit


def memtrio_cmd() -> list[str]:
    return [sys.executable, "-m", "memtrio.supervisors.cli"]


def find_reference(given: str | None) -> Path | None:
    """The reference server's ``dist/index.js``: ``given``, else under ``npm root -g``."""
    if given:
        path = Path(given)
        if path.is_dir():
            path = path / "dist" / "index.js"
        if not path.is_file():
            raise SystemExit(f"bench_startup: --reference {given}: no such file")
        return path
    npm = shutil.which("npm")
    if npm is None:
        return None
    try:
        root = subprocess.run(
            [npm, "root", "-g"], capture_output=True, text=True, timeout=WAIT, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    path = Path(root) / REFERENCE_PACKAGE / "dist" / "index.js"
    return path if path.is_file() else None


def compile_memtrio() -> None:
    """Write the bytecode of memtrio's modules, as a pip install does."""
    for name in ("memtrio.actors", "memtrio.protocol", "memtrio.supervisors"):
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            raise SystemExit(f"bench_startup: {name} is not installed (pip install -e .)")
        for location in spec.submodule_search_locations:
            compileall.compile_dir(location, quiet=1)


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


def memtrio_env(home: Path, **extra: str) -> dict[str, str]:
    """The servers' environment (`server_env`), with embeddings on as by default."""
    return server_env(home, {"MEMTRIO_EMBEDDINGS": "on", **extra})


def since_spawn(server: BlockingClient) -> float:
    return time.perf_counter() - server.started


def fresh_home(root: Path) -> Path:
    return Path(tempfile.mkdtemp(prefix="home-", dir=root))


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (all its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def time_initialize(
    cmd: list[str], env: dict[str, str], cwd: Path, cpu: dict[str, float] | None = None
) -> float:
    """Spawn -> ``initialize`` reply, in seconds (``initialize`` written at once, as a client
    does); ``cpu`` gets the server process's CPU time at the reply under ``"cpu"`` (its own
    threads, not its child processes; clock ticks of 10 ms)."""
    server = BlockingClient(cmd, env, cwd, timeout=WAIT)
    try:
        server.initialize(CLIENT, INIT_VERSION)
        wall = since_spawn(server)
        if cpu is not None:
            cpu["cpu"] = cpu_seconds(server.pid)
        return wall
    finally:
        server.close(WAIT)


def time_command(cmd: list[str], env: dict[str, str], cwd: Path) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, timeout=WAIT * 4)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[-3:])} failed: {done.stderr.decode()[-300:]}")
    return wall


def first_calls(root: Path, repo: Path) -> dict[str, float]:
    """``--full``: one spawn for the first recall, another for the first code tool."""
    out: dict[str, float] = {}
    server = BlockingClient(
        [*memtrio_cmd(), "mcp"], memtrio_env(fresh_home(root)), repo, timeout=WAIT
    )
    try:
        server.initialize(CLIENT, INIT_VERSION)
        out["rss after initialize_mb"] = tree_rss_mb(server.pid)
        server.tool("recall", {"query": "start-up time of the server"})
        out["memtrio mcp: spawn -> first recall_s"] = since_spawn(server)
        out["rss after first recall_mb"] = tree_rss_mb(server.pid)
    finally:
        server.close(WAIT)
    server = BlockingClient(
        [*memtrio_cmd(), "mcp"], memtrio_env(fresh_home(root)), repo, timeout=WAIT
    )
    try:
        server.initialize(CLIENT, INIT_VERSION)
        server.tool("code_outline", {"path": "hello.py"})
        out["memtrio mcp: spawn -> first code_outline_s"] = since_spawn(server)
        out["rss after first code tool_mb"] = tree_rss_mb(server.pid)
    finally:
        server.close(WAIT)
    return out


def first_child(root: Path, repo: Path) -> float:
    """The first ``memtrio mcp`` of a fresh home (``attach = "auto"``): it starts the owner;
    spawn -> ``initialize``. The owner is killed once the child has exited."""
    home = fresh_home(root)
    try:
        return time_initialize(
            [*memtrio_cmd(), "mcp"], memtrio_env(home, MEMTRIO_SERVE_ATTACH="auto"), repo
        )
    finally:
        kill_owners(home)


def start_owner(home: Path, repo: Path) -> None:
    """Start the owner of ``home`` as a first child does, and leave it running."""
    server = BlockingClient(
        [*memtrio_cmd(), "mcp"], memtrio_env(home, MEMTRIO_SERVE_ATTACH="auto"), repo, timeout=WAIT
    )
    try:
        server.initialize("bench-startup")
        # The first child answers initialize itself while its owner starts: a tool call
        # waits for the owner (docs/transports.md, "Attach").
        server.call_tool("stats", {})
    finally:
        server.close()


def kill_owners(under: Path) -> None:
    from memtrio.actors.net.spawn import kill_owners as kill

    kill(under)


def one_round(
    root: Path,
    repo: Path,
    cli_home: Path,
    reference: Path | None,
    full: bool,
    cli_only: bool,
    owner_home: Path,
) -> dict[str, float]:
    """One interleaved round: memtrio, the reference, the floor, the CLI commands."""
    out: dict[str, float] = {}
    steps: list[tuple[str, Callable[[], float]]] = []
    cpu_memtrio: dict[str, float] = {}
    cpu_reference: dict[str, float] = {}
    if not cli_only:
        steps.append(
            (
                "memtrio mcp: spawn -> initialize_s",
                lambda: time_initialize(
                    [*memtrio_cmd(), "mcp"], memtrio_env(fresh_home(root)), repo, cpu_memtrio
                ),
            )
        )
        steps.append(("memtrio mcp: its CPU to initialize_cpu", lambda: cpu_memtrio["cpu"]))
        steps.append(
            ("memtrio mcp, first child: spawn -> initialize_s", lambda: first_child(root, repo))
        )
        attach_env = memtrio_env(owner_home, MEMTRIO_SERVE_ATTACH="auto")
        steps.append(
            (
                "memtrio mcp, attached child: spawn -> initialize_s",
                lambda: time_initialize([*memtrio_cmd(), "mcp"], attach_env, repo),
            )
        )
    if reference is not None and not cli_only:
        memory_file = root / f"reference-{time.monotonic_ns()}.jsonl"
        ref_env = {**os.environ, "MEMORY_FILE_PATH": str(memory_file)}
        steps.append(
            (
                "reference (node): spawn -> initialize_s",
                lambda: time_initialize(["node", str(reference)], ref_env, repo, cpu_reference),
            )
        )
        steps.append(("reference (node): its CPU to initialize_cpu", lambda: cpu_reference["cpu"]))
    steps.append(
        (
            "floor: python -c 'import trio, msgspec'_s",
            lambda: time_command(FLOOR, {**os.environ}, repo),
        )
    )
    env = memtrio_env(cli_home)
    for label, argv in CLI_COMMANDS:
        steps.append(
            (
                f"memtrio {label}_s",
                lambda argv=argv: time_command([*memtrio_cmd(), *argv], env, repo),
            )
        )
    if full:
        steps.append(
            (
                "memtrio remember (embeds)_s",
                lambda: time_command(
                    [*memtrio_cmd(), "remember", f"start-up memory {time.monotonic_ns()}"],
                    env,
                    repo,
                ),
            )
        )
    for key, step in steps:
        out[key] = step()
    if full:
        out.update(first_calls(root, repo))
    return out


def medians(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def report(figures: dict[str, float], runs: int, load: tuple[float, float]) -> None:
    floor = next(v for k, v in figures.items() if k.startswith("floor"))
    ref = next((v for k, v in figures.items() if k.startswith("reference")), None)
    print(
        f"median of {runs} interleaved rounds; load average (1 min) {load[0]:.1f} before, "
        f"{load[1]:.1f} after"
    )
    print(f"{'measure':<52} {'median':>9}  {'x floor':>7}  {'x reference':>11}")
    for key, value in figures.items():
        name, unit = key.rsplit("_", 1)
        if unit == "mb":
            print(f"{name:<52} {value:>6.1f} MB")
            continue
        if unit == "cpu":
            ref_cpu = figures.get("reference (node): its CPU to initialize_cpu")
            ratio = f"{value / ref_cpu:.2f}" if ref_cpu else ""
            print(f"{name:<52} {value:>7.3f} s  {'':>7}  {ratio:>11}")
            continue
        ratio_ref = (
            f"{value / ref:.2f}" if ref and ("initialize" in name or name.startswith("ref")) else ""
        )
        print(f"{name:<52} {value:>7.3f} s  {value / floor:>7.2f}  {ratio_ref:>11}")
    for key, value in figures.items():
        if ref is not None and key.endswith("initialize_s") and key.startswith("memtrio"):
            verdict = "met" if value <= ref else "not met"
            print(f"goal {key[:-2]} <= the reference's: {verdict} ({value / ref:.2f}x)")
    worst = max(figures[f"memtrio {label}_s"] for label, _ in CLI_COMMANDS)
    verdict = "met" if worst <= 2 * floor else "not met"
    print(f"goal CLI commands <= 2x the floor: {verdict} (slowest {worst / floor:.2f}x)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="interleaved rounds (default 10)")
    parser.add_argument(
        "--reference",
        metavar="PATH",
        help=f"the reference server's dist/index.js (default: {REFERENCE_PACKAGE} under "
        "`npm root -g`)",
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help="also the first recall, the first code tool, memory and `remember`",
    )
    parser.add_argument(
        "--cli", action="store_true", help="only the floor and the CLI commands (no server)"
    )
    parser.add_argument("--no-compile", action="store_true", help="do not compile bytecode first")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if args.cli and args.full:
        parser.error("--cli and --full exclude each other")
    reference = None if args.cli else find_reference(args.reference)
    if reference is None and not args.cli:
        print(
            f"the reference server is not installed: its row is skipped "
            f"(install it with `{INSTALL_REFERENCE}`, or pass --reference PATH)",
            file=sys.stderr,
        )
    if not args.no_compile:
        compile_memtrio()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="memtrio-startup-") as tmp:
        root = Path(tmp)
        repo = make_repo(root)
        cli_home = fresh_home(root)
        seed = [*memtrio_cmd(), "remember", "a benchmark memory"]
        env = memtrio_env(cli_home, MEMTRIO_EMBEDDINGS="off")
        subprocess.run(seed, env=env, cwd=repo, check=True, capture_output=True, timeout=WAIT * 4)
        owner_home = fresh_home(root)
        try:
            if not args.cli:
                start_owner(owner_home, repo)
            rounds = [
                one_round(root, repo, cli_home, reference, args.full, args.cli, owner_home)
                for _ in range(args.runs)
            ]
        finally:
            kill_owners(root)
    figures = medians(rounds)
    load = (load_before, os.getloadavg()[0])
    if args.json:
        print(
            json.dumps(
                {
                    "runs": args.runs,
                    "reference": str(reference) if reference else None,
                    "load": load,
                    "medians": figures,
                    "rounds": rounds,
                }
            )
        )
        return 0
    if not args.cli:
        shown = f"node {reference}" if reference else "not installed, skipped"
        print(f"reference: {shown}")
    report(figures, args.runs, load)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
