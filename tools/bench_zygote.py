"""The CPU of a memtrio command started for real and through the tests' fork server.

    python tools/bench_zygote.py [--runs 5]

Each command (``--version``, ``remember``, ``search``) runs ``--runs`` times each way,
interleaved, in a scratch home: ``python -m memtrio.supervisors.cli ARGS``, and the
stand-in of ``tests/zygote.py`` (whose child the zygote forks). The CPU counted is that
of the process started plus, for the stand-in, its child's (the zygote's children's
CPU, read from ``/proc`` through psutil). Prints the medians and their ratio; the
zygote and everything it forked are ended (by pid) before it exits.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import zygote  # noqa: E402 - the tests' fork server, beside this checkout's tests

COMMANDS = (["--version"], ["remember", "the zygote stands in"], ["search", "zygote"])


def cpu_so_far(zygote_pid: int) -> float:
    """CPU of this process's ended children, and of the zygote's ended children."""
    own = resource.getrusage(resource.RUSAGE_CHILDREN)
    forked = psutil.Process(zygote_pid).cpu_times()
    return own.ru_utime + own.ru_stime + forked.children_user + forked.children_system


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    home = Path(tempfile.mkdtemp(prefix="bench-zygote-"))
    env = {
        "PATH": os.environ.get("PATH", ""),
        "LANG": os.environ.get("LANG", ""),
        "MEMTRIO_HOME": str(home),
        "MEMTRIO_EMBEDDINGS": "off",
        "MEMTRIO_SERVE_ATTACH": "off",
        "PYTHONUNBUFFERED": "1",
    }
    try:
        zygote.command(["--version"])  # started, preloaded
        if zygote._zygote is None or zygote._zygote.poll() is not None:
            print("the zygote did not start", file=sys.stderr)
            return 1
        zpid = zygote._zygote.pid
        print(f"load average {os.getloadavg()[0]:.2f}")
        print("| command | real CPU | forked CPU | ratio | real wall | forked wall |")
        print("| --- | ---: | ---: | ---: | ---: | ---: |")
        for args in COMMANDS:
            cpu: dict[str, list[float]] = {"real": [], "forked": []}
            wall: dict[str, list[float]] = {"real": [], "forked": []}
            for _ in range(runs):
                for way, command in (
                    ("real", [sys.executable, *zygote.REAL, *args]),
                    ("forked", zygote.command(args)),
                ):
                    before, start = cpu_so_far(zpid), time.perf_counter()
                    done = subprocess.run(command, env=env, cwd=home, capture_output=True)
                    wall[way].append(time.perf_counter() - start)
                    cpu[way].append(cpu_so_far(zpid) - before)
                    if done.returncode != 0:
                        print(done.stderr.decode(errors="replace"), file=sys.stderr)
                        return 1
            real, forked = statistics.median(cpu["real"]), statistics.median(cpu["forked"])
            print(
                f"| `memtrio {args[0]}` | {real:.3f} s | {forked:.3f} s | {real / forked:.1f}x "
                f"| {statistics.median(wall['real']):.3f} s "
                f"| {statistics.median(wall['forked']):.3f} s |"
            )
    finally:
        zygote.stop()
        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
