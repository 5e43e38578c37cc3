#!/usr/bin/env python
"""The prompt-time injection curve of ``memtrio hook user-prompt-submit`` on faq-notes-dev.

Each question of the set is a prompt; each project's notes are the memories of one
store (one fresh home per project, the notes remembered in document order). For
each threshold of ``[hooks] prompt_threshold`` it runs the hook's own recall
(`actors.hooks.context.prompt_context`, lexical, in process, the default token
budget) and reports:

- ``injected``: the share of prompts that get an injection;
- ``holds answer``: of those, the share whose injected memories include the
  question's gold note;
- ``answered``: the share of all prompts whose injection holds the answer.

Usage::

    python tools/eval_prompt_threshold.py [--data ../shared/eval/faq-notes-dev]
        [--thresholds 0.2,0.3,...] [--json OUT]

Nothing downloads; the model is never loaded (the hook does not load it).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from memtrio.actors.hooks.context import prompt_context
from memtrio.actors.memory import tools
from memtrio.actors.memory.args import RememberArgs
from memtrio.actors.store.tooling.runner import STORE_ONLY, tool_context
from memtrio.supervisors.cli import run_with_app
from memtrio.supervisors.config_hooks import HooksConfig
from memtrio.supervisors.context import AppContext

DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "eval" / "faq-notes-dev"
SHOWN = int(__import__("os").environ.get("SHOWN", "5"))
THRESHOLDS = (0.0, 0.1, 0.2, 0.25, 0.3, 0.34, 0.4, 0.45, 0.5, 0.6, 0.67, 0.75, 0.8, 1.0)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def run_haystack(
    home: Path,
    notes: list[dict[str, Any]],
    questions: list[dict[str, Any]],
    thresholds: list[float],
) -> dict[float, list[tuple[bool, bool]]]:
    """threshold -> [(injected, holds the gold note)] for each question of one project."""
    args = argparse.Namespace(home=str(home), log_level="warning")
    tokens = HooksConfig().prompt_tokens
    out: dict[float, list[tuple[bool, bool]]] = {t: [] for t in thresholds}

    async def body(app: AppContext) -> int:
        ctx = tool_context(app)
        ids: dict[str, int] = {}
        for note in notes:
            made = await tools.remember(
                ctx, RememberArgs(content=note["content"], scopes=["global"])
            )
            ids[note["id"]] = made.id
        for q in questions:
            gold = {ids[g] for g in q["gold"]}
            for t in thresholds:
                found, _ = await prompt_context(
                    app, q["question"], t, tokens, ["global"], shown=SHOWN
                )
                out[t].append((bool(found.ids), bool(gold & set(found.ids))))
        return 0

    run_with_app(args, body, features=STORE_ONLY, extra_config={"code": {"enabled": False}})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--thresholds", help="comma-separated (default: a grid from 0 to 1)")
    parser.add_argument("--json", type=Path, help="write the curve here as JSON")
    args = parser.parse_args()
    thresholds = (
        [float(t) for t in args.thresholds.split(",")] if args.thresholds else list(THRESHOLDS)
    )
    notes = read_jsonl(args.data / "notes.jsonl")
    questions = read_jsonl(args.data / "questions.jsonl")
    started = time.perf_counter()
    results: dict[float, list[tuple[bool, bool]]] = {t: [] for t in thresholds}
    with tempfile.TemporaryDirectory(prefix="memtrio-threshold-") as tmp:
        for stack in sorted({n["haystack"] for n in notes}):
            home = Path(tmp) / stack
            home.mkdir(mode=0o700)
            got = run_haystack(
                home,
                [n for n in notes if n["haystack"] == stack],
                [q for q in questions if q["haystack"] == stack],
                thresholds,
            )
            for t in thresholds:
                results[t] += got[t]
    rows = []
    print(
        f"faq-notes-dev: {len(questions)} prompts, {len(notes)} memories in {len(set(n['haystack'] for n in notes))} stores"
    )
    print(f"{'threshold':>9}  {'injected':>8}  {'holds answer':>12}  {'answered':>8}")
    for t in thresholds:
        pairs = results[t]
        injected = sum(i for i, _ in pairs)
        holds = sum(h for _, h in pairs)
        row = {
            "threshold": t,
            "prompts": len(pairs),
            "injected": injected / len(pairs),
            "holds_answer": holds / injected if injected else 0.0,
            "answered": holds / len(pairs),
        }
        rows.append(row)
        print(
            f"{t:>9.2f}  {row['injected']:>8.1%}  {row['holds_answer']:>12.1%}  {row['answered']:>8.1%}"
        )
    print(f"({time.perf_counter() - started:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
