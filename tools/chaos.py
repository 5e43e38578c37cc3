#!/usr/bin/env python3
"""The full chaos matrix (development): every scenario, bigger loads, more rounds.

    python tools/chaos.py                      # full matrix, seed 1
    python tools/chaos.py --seed 42            # another repeatable run
    python tools/chaos.py --scenario kill9-bursts --scenario malformed
    python tools/chaos.py --write-doc          # also record the table in docs/reliability.md

``memtrio chaos --quick`` is the short CI subset of the same scenarios. Exit
status 1 when any invariant broke (the failures are listed after the table).
With ``--write-doc`` the summary table replaces the block between the
``chaos:begin``/``chaos:end`` markers of docs/reliability.md and the full
results go to docs/reliability-run.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

from memtrio.actors.chaos import runner

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "reliability.md"
RESULTS = ROOT / "docs" / "reliability-run.json"
BEGIN, END = "<!-- chaos:begin -->", "<!-- chaos:end -->"


def record(table: str, outcomes: list, seed: int, quick: bool, seconds: float) -> None:
    totals = runner.totals(outcomes)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    command = (
        "python tools/chaos.py" + (" --quick" if quick else "") + f" --seed {seed} --write-doc"
    )
    block = "\n".join(
        [
            BEGIN,
            f"Latest run: {when}, `{command}`, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"{seconds:.0f} s.",
            "",
            f"**{totals['scenarios']} scenarios, {totals['faults']} faults injected, {totals['malformed']} malformed "
            f"inputs tried, {totals['acked']} acknowledged writes checked, {totals['lost']} writes lost, "
            f"{totals['restarts']} restarts, {totals['failed']} scenarios failed"
            + (f", {totals['skipped']} skipped" if totals["skipped"] else "")
            + ".**",
            "",
            table.split("\n\n", 1)[1],
            END,
        ]
    )
    text = DOC.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{DOC} has no {BEGIN} ... {END} block to replace")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    DOC.write_text(head + block + tail)
    RESULTS.write_text(
        json.dumps(
            {
                "when": when,
                "command": command,
                "seed": seed,
                "seconds": round(seconds, 1),
                "totals": totals,
                "scenarios": [o.to_json() for o in outcomes],
            },
            indent=2,
        )
        + "\n"
    )
    print(f"\nrecorded in {DOC.relative_to(ROOT)} and {RESULTS.relative_to(ROOT)}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--quick", action="store_true", help="the CI subset instead of the full matrix"
    )
    parser.add_argument("--scenario", action="append", help="only this scenario (repeatable)")
    parser.add_argument("--keep", metavar="DIR", help="keep the servers' homes and logs in DIR")
    parser.add_argument(
        "--write-doc", action="store_true", help="record the table in docs/reliability.md"
    )
    args = parser.parse_args()
    started = time.monotonic()
    code, outcomes, table = runner.main(
        args.scenario, seed=args.seed, quick=args.quick, keep=Path(args.keep) if args.keep else None
    )
    if args.write_doc:
        if args.scenario:
            print("not recording a partial run (--scenario) in the doc", file=sys.stderr)
        else:
            record(table, outcomes, args.seed, args.quick, time.monotonic() - started)
    return code


if __name__ == "__main__":
    sys.exit(main())
