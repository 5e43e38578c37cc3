#!/usr/bin/env python
"""Fit the ranker's settings on the dev data: a grid search, checked by leave-one-conversation-out.

Procedure (the one behind the defaults in ``supervisors/config.py``):

1. Every combination of the ``--grid`` values is evaluated with
   ``tools/eval_recall.py``'s protocol on the LoCoMo dev conversations
   (``--units`` formats), keeping each question's result.
   With ``--longmemeval``, also on the LongMemEval-S-16 questions (``bare``
   and ``role`` units).
2. The objective of a setting on a set of questions is the mean of session
   recall@5 and turn recall@5 over them (both goals of issue 17 at once); with
   LongMemEval, the mean of the LoCoMo objective and the LongMemEval one (so
   that 16 questions weigh as much as 997: a setting must not give up one
   dataset for the other).
3. Leave-one-conversation-out: for each LoCoMo conversation, the setting with
   the best objective on the other conversations (and LongMemEval) is chosen
   and scored on the one left out; the mean of those held-out scores
   estimates what the procedure gives on conversations it was not fitted on
   (the reviewers' held-out half).
4. The setting chosen on all dev data is the one to adopt.

The learned re-ranker (on by default) replaces the fixed mixture's seeds,
thread neighbours and MMR, so a grid over ``lexical_share``,
``seed_temperature``, ``neighbour_*`` or ``mmr_lambda`` changes nothing
unless it includes ``MEMTRIO_RETRIEVAL_RERANK=false``; the re-ranker's own
weights are fitted by ``tools/fit_rerank.py``, and its ``position_penalty``
with a grid here (``--grid MEMTRIO_RETRIEVAL_POSITION_PENALTY=0.5,1,2``).

Usage::

    python tools/fit_recall.py --grid MEMTRIO_RETRIEVAL_NEIGHBOUR_WEIGHT=0,0.1,0.2 \\
        --grid MEMTRIO_RETRIEVAL_LEXICAL_SHARE=0.5,0.65 --json docs/bench-runs/fit-recall.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))
import eval_recall  # noqa: E402

LME = "longmemeval"


def objective(rows: list[dict[str, Any]]) -> float:
    s = [r["session@5"] for r in rows]
    t = [r["turn@5"] for r in rows if r["turn@5"] is not None]
    return (sum(s) / len(s) + sum(t) / len(t)) / 2


async def grid_rows(
    args: argparse.Namespace, settings: dict[str, str]
) -> dict[str, list[dict[str, Any]]]:
    """haystack -> per-question rows (every unit format), under ``settings``."""
    data = Path(args.data) if args.data else eval_recall.default_data("locomo")
    cache = Path(args.cache).expanduser()
    out: dict[str, list[dict[str, Any]]] = {}
    for units in args.units.split(","):
        for stack, turns, qs in eval_recall.haystacks("locomo", data, units):
            session_of = {t: s for t, s, _ in turns}
            home, owner = await eval_recall.filled(cache, f"locomo-{units}-{stack}", turns)
            rows = await eval_recall.run_mode(home, "default", qs, owner, session_of, settings)
            out.setdefault(stack, []).extend(rows)
    if args.longmemeval:
        data = eval_recall.default_data("longmemeval")
        for units in eval_recall.UNITS["longmemeval"]:
            for stack, turns, qs in eval_recall.haystacks("longmemeval", data, units):
                session_of = {t: s for t, s, _ in turns}
                home, owner = await eval_recall.filled(cache, f"longmemeval-{units}-{stack}", turns)
                rows = await eval_recall.run_mode(home, "default", qs, owner, session_of, settings)
                out.setdefault(LME, []).extend(rows)
    return out


def combined(rows: dict[str, list[dict[str, Any]]], stacks: list[str]) -> float:
    """The objective over the LoCoMo ``stacks``, averaged with LongMemEval's when present."""
    locomo = objective([r for s in stacks for r in rows[s]])
    return (locomo + objective(rows[LME])) / 2 if LME in rows else locomo


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2,...")
    parser.add_argument("--units", default="speaker")
    parser.add_argument("--data")
    parser.add_argument("--cache", default="~/.cache/memtrio-eval")
    parser.add_argument(
        "--longmemeval", action="store_true", help="fit on LongMemEval-S-16 too (see step 2)"
    )
    parser.add_argument("--json", help="write every setting's scores and the CV result here")
    args = parser.parse_args()
    keys = [g.split("=", 1)[0] for g in args.grid]
    values = [g.split("=", 1)[1].split(",") for g in args.grid]
    results = []
    for combo in itertools.product(*values):
        settings = dict(zip(keys, combo, strict=True))
        per_stack = trio.run(grid_rows, args, settings)
        stacks = sorted(s for s in per_stack if s != LME)
        overall = combined(per_stack, stacks)
        parts = {
            "locomo": objective([r for s in stacks for r in per_stack[s]]),
            **({LME: objective(per_stack[LME])} if LME in per_stack else {}),
        }
        results.append(
            {"settings": settings, "objective": overall, "parts": parts, "rows": per_stack}
        )
        print(f"{overall:.4f} {settings} {parts}", flush=True)
    stacks = sorted(s for s in results[0]["rows"] if s != LME)
    held_out = []
    for left in stacks:

        def train(result: dict[str, Any], left: str = left) -> float:
            return combined(result["rows"], [s for s in stacks if s != left])

        best = max(results, key=train)
        held_out.append(
            {
                "left_out": left,
                "chosen": best["settings"],
                "held_out_objective": objective(best["rows"][left]),
                "held_out_questions": len(best["rows"][left]),
            }
        )
    n = sum(h["held_out_questions"] for h in held_out)
    cv = sum(h["held_out_objective"] * h["held_out_questions"] for h in held_out) / n
    chosen = max(results, key=lambda r: r["objective"])
    print(f"leave-one-conversation-out objective: {cv:.4f}")
    for h in held_out:
        print(f"  {h['left_out']}: chose {h['chosen']} -> {h['held_out_objective']:.4f}")
    print(f"chosen on all dev conversations: {chosen['settings']} ({chosen['objective']:.4f})")
    if args.json:
        summary = {
            "objective": "mean of session recall@5 and turn recall@5"
            + (", averaged over LoCoMo dev and LongMemEval-S-16" if args.longmemeval else ""),
            "units": args.units,
            "grid": [
                {
                    "settings": r["settings"],
                    "objective": round(r["objective"], 4),
                    "parts": {k: round(v, 4) for k, v in r["parts"].items()},
                }
                for r in results
            ],
            "leave_one_conversation_out": held_out,
            "cv_objective": round(cv, 4),
            "chosen": chosen["settings"],
        }
        Path(args.json).write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
