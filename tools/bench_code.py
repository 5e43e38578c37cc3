"""Benchmark the code index: cold index, warm refresh, find_symbol latency.

Builds a Git repository in a temporary directory from real source trees
available offline (by default the standard library of the running interpreter,
then the installed packages of its environment, until ``--files`` supported
files are copied), then measures, with the server's own parser pool and index:

- cold index: files/s and symbols/s of a first ``refresh`` on an empty index;
- warm refresh: the median time of ``refresh`` on the unchanged tree;
- find_symbol: p50/p90 latency of the tool handler (checkout lookup, refresh,
  query, formatting) over names sampled from the index;
- peak RSS of the server process and of the largest parser worker.

Run: ``python tools/bench_code.py [--files 2500] [--workers auto] [--json]``.
Targets (2 CPU cores): cold >= 1,000 files/s (issue #16; the CPU it takes, server
and workers, is reported too, since on a shared machine the wall time depends on
what else runs), warm refresh of 2,000 files <= 1 s,
find_symbol p50 <= 20 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import trio
from memtrio.actors.code.extract import MAX_BYTES
from memtrio.actors.code.index import CodeIndex, index_path
from memtrio.actors.code.languages import language_for
from memtrio.actors.code.pool import ParserPool, default_workers
from memtrio.actors.code.service import CodeService
from memtrio.actors.code.tools import FindArgs, find_symbol
from memtrio.supervisors.supervisor import Supervisor


def default_sources() -> list[Path]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    purelib = Path(sysconfig.get_paths()["purelib"])
    return [stdlib, purelib]


def build_tree(sources: list[Path], dest: Path, limit: int) -> int:
    """Copy up to ``limit`` supported files (sorted, deterministic) into a new Git repo."""
    copied = 0
    for source in sources:
        for dirpath, dirnames, filenames in os.walk(source):
            dirnames[:] = sorted(
                d for d in dirnames if d not in ("__pycache__", "site-packages", ".git")
            )
            for name in sorted(filenames):
                if copied >= limit:
                    break
                path = Path(dirpath) / name
                if language_for(name) is None or path.is_symlink():
                    continue
                try:
                    if path.stat().st_size > MAX_BYTES:
                        continue
                except OSError:
                    continue
                target = dest / source.name / path.relative_to(source)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)
                copied += 1
            if copied >= limit:
                break
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "bench",
        "GIT_AUTHOR_EMAIL": "b@x",
        "GIT_COMMITTER_NAME": "bench",
        "GIT_COMMITTER_EMAIL": "b@x",
    }
    subprocess.run(["git", "init", "-q", str(dest)], check=True)
    subprocess.run(["git", "-C", str(dest), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(dest), "commit", "-qm", "bench", "--no-gpg-sign"], check=True, env=env
    )
    return copied


def rss_mib(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024


def cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


async def cold_index(repo: Path, home: Path, workers: int) -> dict:
    """One cold index on an empty index file; CPU time of the server and its workers."""
    pool = ParserPool(workers, 10.0)
    service = CodeService(CodeIndex(index_path(home)), pool, 20000)
    sup = Supervisor("bench", pool.children())
    children_before = cpu_seconds(resource.RUSAGE_CHILDREN)
    async with trio.open_nursery() as nursery:
        await nursery.start(sup.run)
        self_before = cpu_seconds(resource.RUSAGE_SELF)
        report = await service.refresh(repo)
        self_cpu = cpu_seconds(resource.RUSAGE_SELF) - self_before
        symbols = service.index.conn.execute("SELECT count(*) FROM symbols").fetchone()[0]
        await sup.stop()
    service.index.close()
    workers_cpu = cpu_seconds(resource.RUSAGE_CHILDREN) - children_before
    return {
        "files": report.indexed,
        "parsed": report.parsed,
        "symbols": symbols,
        "seconds": report.seconds,
        "cpu": self_cpu + workers_cpu,
        "cpu_server": self_cpu,
        "cpu_workers": workers_cpu,
    }


async def bench(args: argparse.Namespace, repo: Path, home: Path) -> dict:
    workers = default_workers(args.workers)
    out: dict = {
        "workers": workers,
        "cpus": len(os.sched_getaffinity(0)),
        "load_avg_1m": os.getloadavg()[0],
    }
    colds = []
    for run in range(args.cold_runs):
        run_home = home / f"cold{run}"
        run_home.mkdir()
        colds.append(await cold_index(repo, run_home, workers))
    colds.sort(key=lambda c: c["seconds"])
    cold = colds[len(colds) // 2]
    out.update(
        files=cold["files"],
        parsed=cold["parsed"],
        symbols=cold["symbols"],
        cold_seconds_median=round(cold["seconds"], 3),
        cold_files_per_s=round(cold["parsed"] / cold["seconds"], 1),
        cold_symbols_per_s=round(cold["symbols"] / cold["seconds"], 1),
        cold_files_per_s_runs=[round(c["parsed"] / c["seconds"], 1) for c in colds],
        cold_cpu_seconds=round(cold["cpu"], 2),
        # the server process (event loop, stat pass, result decoding, SQLite writes)
        # and its children (the parser workers, and `git ls-files`)
        cold_cpu_server_seconds=round(cold["cpu_server"], 2),
        cold_cpu_workers_seconds=round(cold["cpu_workers"], 2),
        cold_cpu_ms_per_file=round(1000 * cold["cpu"] / cold["parsed"], 3),
        cold_cpu_ms_per_file_runs=[round(1000 * c["cpu"] / c["parsed"], 3) for c in colds],
        # what the same CPU work takes on `workers` otherwise idle cores
        cold_files_per_cpu_bound_s=round(cold["parsed"] / (cold["cpu"] / workers), 1),
    )
    pool = ParserPool(workers, 10.0)
    service = CodeService(CodeIndex(index_path(home / "cold0")), pool, 20000)
    sup = Supervisor("bench", pool.children())
    async with trio.open_nursery() as nursery:
        await nursery.start(sup.run)
        warm = []
        for _ in range(args.warm_runs):
            report = await service.refresh(repo)
            assert report.parsed == 0
            warm.append(report.seconds)
        out["warm_refresh_median_s"] = round(statistics.median(warm), 4)
        out["warm_refresh_max_s"] = round(max(warm), 4)
        names = [
            r[0]
            for r in service.index.conn.execute("SELECT name FROM symbols WHERE kind != 'import'")
        ]
        rng = random.Random(7)
        queries = [rng.choice(names).split("/")[0] for _ in range(args.queries)]
        ctx = SimpleNamespace(
            app=SimpleNamespace(service=lambda name: service, cwd=repo), session=None
        )
        latencies = []
        for query in queries:
            t0 = time.perf_counter()
            await find_symbol(ctx, FindArgs(query=query))
            latencies.append(time.perf_counter() - t0)
        latencies.sort()
        out["find_symbol_p50_ms"] = round(1000 * latencies[len(latencies) // 2], 2)
        out["find_symbol_p90_ms"] = round(1000 * latencies[int(len(latencies) * 0.9)], 2)
        await sup.stop()
    service.index.close()
    out["peak_rss_server_mib"] = round(rss_mib(resource.RUSAGE_SELF), 1)
    out["peak_rss_worker_mib"] = round(rss_mib(resource.RUSAGE_CHILDREN), 1)
    out["index_mib"] = round(index_path(home / "cold0").stat().st_size / 2**20, 1)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--files", type=int, default=2500, help="supported files to copy (default 2500)"
    )
    parser.add_argument(
        "--source",
        action="append",
        type=Path,
        help="source tree(s) to copy (default: stdlib, then site-packages)",
    )
    parser.add_argument(
        "--workers", default="auto", help="parser workers (default: auto = CPUs available)"
    )
    parser.add_argument("--cold-runs", type=int, default=3, help="cold indexes (median quoted)")
    parser.add_argument("--warm-runs", type=int, default=5)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="memtrio-bench-code-") as tmp:
        repo = Path(tmp) / "tree"
        home = Path(tmp) / "home"
        home.mkdir()
        copied = build_tree(args.source or default_sources(), repo, args.files)
        result = trio.run(bench, args, repo.resolve(), home)
        result["tree_files"] = copied
        result["python"] = sys.version.split()[0]
    if args.json:
        print(json.dumps(result))
    else:
        width = max(map(len, result))
        for key, value in result.items():
            print(f"{key:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
