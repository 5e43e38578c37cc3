"""Runs chaos scenarios one after another and prints a line each plus a summary table."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

import trio

from ...protocol.plural import plural
from ...supervisors.progress import Progress
from .harness import Outcome, Scenario, run_scenario
from .scenarios import BUDGET_FULL, BUDGET_QUICK, FULL, QUICK


def select(names: Sequence[str] | None, quick: bool) -> dict[str, Scenario]:
    """The scenarios to run: ``names`` in that order, else the quick set or the full matrix."""
    matrix = QUICK if quick else FULL
    if not names:
        return dict(matrix)
    unknown = [n for n in names if n not in FULL]
    if unknown:
        raise ValueError(f"unknown scenario(s) {', '.join(unknown)}; known: {', '.join(FULL)}")
    return {n: FULL[n] for n in names}


async def run_all(
    names: Sequence[str] | None,
    *,
    seed: int,
    quick: bool,
    base: Path,
    progress: Callable[[Outcome], None] | None = None,
) -> list[Outcome]:
    chosen = select(names, quick)
    budget = BUDGET_QUICK if quick else BUDGET_FULL
    outcomes = []
    for name, fn in chosen.items():
        outcome = await run_scenario(name, fn, seed, base, quick, budget)
        outcomes.append(outcome)
        if progress is not None:
            progress(outcome)
    return outcomes


def totals(outcomes: Sequence[Outcome]) -> dict[str, int]:
    return {
        "scenarios": len(outcomes),
        "failed": sum(not o.ok for o in outcomes),
        "skipped": sum(bool(o.skipped) and o.ok for o in outcomes),
        "faults": sum(o.faults for o in outcomes),
        "requests": sum(o.requests for o in outcomes),
        "malformed": sum(o.malformed for o in outcomes),
        "errors_seen": sum(o.errors_seen for o in outcomes),
        "acked": sum(o.acked for o in outcomes),
        "lost": sum(o.lost for o in outcomes),
        "restarts": sum(o.restarts for o in outcomes),
    }


def summary_table(outcomes: Sequence[Outcome], seed: int, quick: bool, seconds: float) -> str:
    """A Markdown table of the run, with a totals row."""
    rows = [
        "| scenario | faults | requests | malformed | errors seen (expected) | acked writes checked | lost | restarts | s | result |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for o in outcomes:
        rel = "=" if o.errors_exact else "≥"
        if o.skipped and o.ok:
            rows.append(f"| {o.name} | | | | | | | | {o.seconds:.1f} | skipped: {o.skipped} |")
            continue
        rows.append(
            f"| {o.name} | {o.faults} | {o.requests} | {o.malformed} | {o.errors_seen} ({rel}{o.errors_expected}) | "
            f"{o.acked} | {o.lost} | {o.restarts} | {o.seconds:.1f} | {'ok' if o.ok else 'FAILED'} |"
        )
    t = totals(outcomes)
    rows.append(
        f"| **total: {plural(t['scenarios'], 'scenario')}** | {t['faults']} | {t['requests']} | {t['malformed']} | "
        f"{t['errors_seen']} | {t['acked']} | {t['lost']} | {t['restarts']} | {seconds:.0f} | "
        f"{'ok' if not t['failed'] else str(t['failed']) + ' FAILED'} |"
    )
    mode = "--quick" if quick else "full matrix"
    return f"memtrio chaos ({mode}, --seed {seed})\n\n" + "\n".join(rows)


def print_failures(outcomes: Sequence[Outcome], stream: TextIO) -> None:
    for o in outcomes:
        if o.ok:
            continue
        print(f"\n{o.name}: FAILED", file=stream)
        for v in o.violations[:20]:
            print(f"  - {v}", file=stream)
        if len(o.violations) > 20:
            print(f"  ... and {len(o.violations) - 20} more", file=stream)
        for note in o.notes:
            if "Traceback" in note:
                print(note, file=stream)


def main(
    names: Sequence[str] | None,
    *,
    seed: int,
    quick: bool,
    keep: Path | None = None,
    as_json: bool = False,
    stream: TextIO = sys.stdout,
) -> tuple[int, list[Outcome], str]:
    """Run, print, and return (exit code, outcomes, summary table)."""
    base = keep or Path(tempfile.mkdtemp(prefix="memtrio-chaos-"))
    base.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()

    bar = Progress("chaos", len(select(names, quick)), "scenarios")

    def progress(o: Outcome) -> None:
        bar.advance()
        if not as_json:
            print(o.line(), file=stream, flush=True)

    try:
        outcomes = trio.run(
            lambda: run_all(names, seed=seed, quick=quick, base=base, progress=progress)
        )
    finally:
        bar.close()
        if keep is None:
            shutil.rmtree(base, ignore_errors=True)
    table = summary_table(outcomes, seed, quick, time.monotonic() - started)
    if as_json:
        payload = {
            "seed": seed,
            "quick": quick,
            "seconds": round(time.monotonic() - started, 1),
            "totals": totals(outcomes),
            "scenarios": [o.to_json() for o in outcomes],
        }
        print(json.dumps(payload, indent=2), file=stream)
    else:
        print("\n" + table, file=stream)
        print_failures(outcomes, stream)
    failed = any(not o.ok for o in outcomes)
    return (1 if failed else 0), outcomes, table
