#!/usr/bin/env python
"""Recall evaluated on every kind of store memtrio's users have, side by side, through the real MCP server.

Families (``--families``, default all):

- ``locomo``: conversations, LoCoMo dev (``../shared/eval/locomo-dev``, 5
  conversations, one store each, ``Speaker: text`` turns), through
  ``tools/eval_recall.py``'s dataset ``locomo``; gold = the supporting turns.
- ``longmemeval``: conversations, LongMemEval-S-16 (bare turns, one store),
  eval_recall's dataset ``longmemeval``; gold = the turns marked ``has_answer``.
- ``faq``: short agent notes, the FAQ notes of 14 public projects
  (``../shared/eval/faq-notes-dev``), eval_recall's dataset ``faq`` (one store
  per project, notes in document order); gold = the answer's note. Skipped,
  saying so, when eval_recall has no ``faq`` dataset.
- ``kg``: a knowledge graph in the reference server's ``memory.jsonl`` format
  (``tools/eval_sets/kg-packages``: the metadata of installed Python packages,
  ``tools/build_kg_eval.py``), imported with ``memtrio import`` and embedded
  with ``memtrio reembed``; gold = one to three observations (entity and
  text), each question's category its kind (summary, licence, dependency...).
- ``code`` and ``code-query``: notes anchored to code
  (``tools/eval_sets/code-notes``, ``tools/build_code_eval.py``: docstring
  notes about memtrio's own symbols at a fixed commit, written with
  ``remember(content, code=[{path, symbol}])`` in a checkout of that commit made
  with ``git archive``); the question is the symbol's name in words, asked with
  ``recall(question, code=<its file>)`` (``code``) and without (``code-query``);
  gold = the note about that symbol. Both families share one store.

Every unit is written in its order (one ``remember`` after the other, or the
import's order), so each memory has a place; each question is asked with
``recall(question, limit=10)`` by a server started with the mode's settings.

Metrics per question, from the returned units: **hit@1** (the first is a gold
unit), **MRR@10** (1 / rank of the first gold unit, 0 when none is in the 10),
**recall@5** (the share of the gold units in the first 5; one gold: hit@5),
**neighbour@1** (the first is not gold but a unit written at most 2 places
before or after a gold one in the same store: a neighbour lifted above the
answer), and the recall's wall time seen by the client (each server answers
one recall first, untimed: it loads the model and checks the code index). Per family: the mean
over its questions with a 95 % percentile bootstrap interval (resampling
questions), the paired difference of each mode from ``default`` under the same
resamples, the median latency, and every store's means. **Overall**: the mean
of the family means (each family weighs the same, whatever its size), its
bootstrap resampling questions within each family.

Modes (``--modes``): ``default``; ``no-rerank`` (``[retrieval] rerank =
false``); ``semantic`` (graph and lexical seeds off); ``lexical``
(``recall(use_embeddings=false)``: FTS5 only); ``bm25``, a plain Okapi BM25 over
the stored texts computed in this process (k1 1.2, b 0.75, lowercase ``\\w+``
tokens, no stemming, no stop words), the reference of the FAQ set (not run on
``code``: it cannot take ``code=``); any other mode of eval_recall's ``MODES``
works too. Filled stores are cached (``--cache``) as eval_recall caches them,
so a rerun only ranks; ``--rows`` prints the tables of a saved run again.

Usage::

    python tools/eval_families.py --markdown docs/bench-runs/eval-families.md --json docs/bench-runs/eval-families-rows.json.gz
    python tools/eval_families.py --rows docs/bench-runs/eval-families-rows.json.gz
    python tools/eval_families.py --families kg,code,code-query --modes default,no-rerank
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import trio
from mcp import Client, StdioServerParameters

sys.path.insert(0, str(Path(__file__).resolve().parent))
import eval_recall  # noqa: E402  (the conversations' data, fill and server settings)
from build_code_eval import archive  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SETS = ROOT / "tools" / "eval_sets"
FAMILIES = ("locomo", "longmemeval", "faq", "kg", "code", "code-query")
# the units each conversation family is stored as (eval_recall's first, its published figures)
CONVERSATION_UNITS = {"locomo": "speaker", "longmemeval": "bare", "faq": "note"}
DEFAULT_MODES = "default,no-rerank,semantic,lexical,bm25"
BM25 = "bm25"
METRICS = ("hit@1", "mrr@10", "recall@5", "neighbour@1")
LIMIT = 10
NEAR = 2  # a unit written this many places or fewer from a gold one is its neighbour
FILL_VERSION = 1  # bump when what a filled kg or code store holds changes
GIT_DATE = "2026-12-07T00:00:00Z"  # the code checkout's one commit: same id in every run


@dataclass
class Question:
    id: str
    question: str
    gold: list[str]  # unit ids
    category: str = ""
    code: str | None = None  # recall's `code` argument


@dataclass
class Store:
    """One store: its units in the order they were written, and the questions asked of it."""

    family: str
    name: str
    units: list[tuple[str, str]]  # (unit id, text), in write order
    questions: list[Question]
    home: Path | None = None
    cwd: Path | None = None
    owner: dict[int, str] = field(default_factory=dict)  # memory id -> unit id
    scopes: list[str] | None = field(default_factory=lambda: ["global"])  # recall's
    env: dict[str, str] = field(default_factory=dict)  # its servers' settings


# -- scoring -------------------------------------------------------------------------


def score(
    ranked: Sequence[str | None], gold: Sequence[str], place: dict[str, int]
) -> dict[str, float]:
    """One question's metrics from the returned unit ids (best first; None: a memory that
    is no unit) and its gold units; ``place`` gives each unit's position in the store."""
    wanted = set(gold)
    rank = next((i + 1 for i, u in enumerate(ranked[:LIMIT]) if u in wanted), None)
    first = ranked[0] if ranked else None
    near = False
    if first is not None and first not in wanted and first in place:
        near = any(g in place and 0 < abs(place[first] - place[g]) <= NEAR for g in wanted)
    return {
        "hit@1": float(rank == 1),
        "mrr@10": 1.0 / rank if rank else 0.0,
        "recall@5": len(wanted & set(ranked[:5])) / len(wanted) if wanted else 0.0,
        "neighbour@1": float(near),
    }


TOKEN = re.compile(r"\w+")


def bm25_ranking(
    units: Sequence[tuple[str, str]], k1: float = 1.2, b: float = 0.75
) -> Callable[[str], list[str]]:
    """Plain Okapi BM25 over the units' texts (lowercase ``\\w+`` tokens, no stemming, no
    stop words, idf ``ln(1 + (N - df + 0.5) / (df + 0.5))``): a function from a query to
    the best `LIMIT` unit ids, ties broken by write order. It is `eval_recall`'s, whose
    units are (id, session, text)."""
    return eval_recall.bm25_ranking([(uid, "", text) for uid, text in units], k1, b)


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def interval(xs: list[float]) -> list[float]:
    xs = sorted(x for x in xs if x == x)
    if not xs:
        return []
    return [round(xs[int(0.025 * len(xs))], 4), round(xs[max(int(0.975 * len(xs)) - 1, 0)], 4)]


def bootstrap(
    strata: list[list[float]], base: list[list[float]] | None, rounds: int, seed: int = 0
) -> dict[str, Any]:
    """The mean of the strata's means (one stratum: the plain mean), its 95 % interval
    resampling values within each stratum, and with ``base`` (the same questions under
    another mode, in the same order) the paired difference and its interval."""
    keep = [i for i, s in enumerate(strata) if s]
    xs = [np.asarray(strata[i], dtype=float) for i in keep]
    bs = [np.asarray(base[i], dtype=float) for i in keep] if base is not None else None
    out: dict[str, Any] = {"mean": round(float(np.mean([x.mean() for x in xs])), 4)}
    if bs is not None:
        out["delta"] = round(out["mean"] - float(np.mean([b.mean() for b in bs])), 4)
    rng = np.random.default_rng(seed)
    samples = np.zeros(rounds)
    deltas = np.zeros(rounds)
    for k, x in enumerate(xs):  # each stratum resampled on its own, the same picks for base
        picks = rng.integers(0, len(x), size=(rounds, len(x)))
        samples += x[picks].mean(axis=1)
        if bs is not None:
            deltas += x[picks].mean(axis=1) - bs[k][picks].mean(axis=1)
    out["ci"] = interval([float(v) for v in samples / len(xs)])
    if bs is not None:
        out["delta_ci"] = interval([float(v) for v in deltas / len(xs)])
    return out


def breakdown(rows: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """The metrics' means and the latency median of the rows of each value of ``key``."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(r[key], []).append(r)
    return {
        name: {
            "questions": len(rs),
            "recall_ms_p50": round(statistics.median(r["ms"] for r in rs), 2),
            **{m: round(mean([r[m] for r in rs]), 4) for m in METRICS},
        }
        for name, rs in groups.items()
    }


def summarize(rows: dict[str, dict[str, list[dict[str, Any]]]], rounds: int) -> dict[str, Any]:
    """rows: family -> mode -> per-question rows (same questions, same order, in every mode).

    Returns per family and mode the metrics (mean, interval, paired difference from
    ``default``), the latency median and 95th percentile, and every store's means; and
    ``overall`` per mode, the families' means averaged."""
    out: dict[str, Any] = {"families": {}, "overall": {}}
    modes: list[str] = []
    for family, by_mode in rows.items():
        fam: dict[str, Any] = {}
        for mode, rs in by_mode.items():
            if mode not in modes:
                modes.append(mode)
            base = by_mode.get("default") if mode != "default" else None
            ms = sorted(r["ms"] for r in rs)
            fam[mode] = {
                "questions": len(rs),
                "recall_ms_p50": round(statistics.median(ms), 2),
                "recall_ms_p95": round(ms[int(0.95 * (len(ms) - 1))], 2),
                **{
                    m: bootstrap(
                        [[r[m] for r in rs]], [[r[m] for r in base]] if base else None, rounds
                    )
                    for m in METRICS
                },
                "stores": breakdown(rs, "store"),
                "categories": breakdown(rs, "category"),
            }
        out["families"][family] = fam
    for mode in modes:
        fams = [f for f, by_mode in rows.items() if mode in by_mode]
        if not fams:
            continue
        entry: dict[str, Any] = {"families": fams}
        has_base = mode != "default" and all("default" in rows[f] for f in fams)
        for m in METRICS:
            strata = [[r[m] for r in rows[f][mode]] for f in fams]
            paired = [[r[m] for r in rows[f]["default"]] for f in fams] if has_base else None
            entry[m] = bootstrap(strata, paired, rounds)
        entry["recall_ms_p50"] = round(
            statistics.median(r["ms"] for f in fams for r in rows[f][mode]), 2
        )
        out["overall"][mode] = entry
    return out


def cell(c: dict[str, Any], delta: bool) -> str:
    if c["mean"] != c["mean"]:
        return "-"
    text = f"{c['mean']:.3f} [{c['ci'][0]:.2f}, {c['ci'][1]:.2f}]"
    if delta and "delta" in c:
        text += f" ({c['delta']:+.3f} [{c['delta_ci'][0]:+.2f}, {c['delta_ci'][1]:+.2f}])"
    return text


def compact(summary: dict[str, Any]) -> str:
    """Markdown: every family and mode on one row, the means (and the median latency)."""
    lines = [
        "| family | questions | mode | hit@1 | MRR@10 | recall@5 | neighbour@1 | p50 ms |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for family, fam in summary["families"].items():
        for i, (mode, e) in enumerate(fam.items()):
            cells = " | ".join(f"{e[m]['mean']:.3f}" for m in METRICS)
            name = f"{family} | {e['questions']}" if i == 0 else " | "
            lines.append(f"| {name} | {mode} | {cells} | {e['recall_ms_p50']:.1f} |")
    return "\n".join(lines)


def tables(summary: dict[str, Any], deltas: bool = True) -> str:
    """Markdown: the overall table, then one per family (modes as rows) and its stores."""
    head = "| mode | hit@1 | MRR@10 | recall@5 | neighbour@1 | recall p50 ms |"
    rule = "| --- | --- | --- | --- | --- | --- |"
    every = list(summary["families"])
    lines = [f"### Overall (mean of the family means: {', '.join(every)})", "", head, rule]
    notes = []
    for mode, e in summary["overall"].items():
        cells = " | ".join(cell(e[m], deltas) for m in METRICS)
        lines.append(f"| {mode} | {cells} | {e['recall_ms_p50']:.1f} |")
        if e["families"] != every:
            left = ", ".join(f for f in every if f not in e["families"])
            notes.append(
                f"{mode}: without {left} (it did not run there), paired with default on the same families"
            )
    if notes:
        lines += ["", *(f"- {n}" for n in notes)]
    lines += ["", "### Every family", "", compact(summary)]
    lines += ["", "### hit@1 / recall@5 by family", ""]
    modes = list(summary["overall"])
    lines.append(
        "| family | questions | " + " | ".join(modes) + " | p50 ms (" + ", ".join(modes) + ") |"
    )
    lines.append("| --- | --- | " + " | ".join("---" for _ in modes) + " | --- |")
    for family, fam in summary["families"].items():
        first = next(iter(fam.values()))
        means = [
            f"{fam[m]['hit@1']['mean']:.3f} / {fam[m]['recall@5']['mean']:.3f}" if m in fam else "-"
            for m in modes
        ]
        ms = ", ".join(f"{fam[m]['recall_ms_p50']:.1f}" if m in fam else "-" for m in modes)
        lines.append(f"| {family} | {first['questions']} | " + " | ".join(means) + f" | {ms} |")
    for family, fam in summary["families"].items():
        lines += ["", f"### {family}", "", head, rule]
        for mode, e in fam.items():
            cells = " | ".join(cell(e[m], deltas) for m in METRICS)
            lines.append(f"| {mode} | {cells} | {e['recall_ms_p50']:.1f} |")
        first = next(iter(fam.values()))
        # per store; a family of one store, per category (its kind of question)
        key = "stores" if len(first["stores"]) > 1 else "categories"
        if len(first[key]) > 1:
            fmodes = list(fam)
            lines += [
                "",
                f"| {'store' if key == 'stores' else 'category'} | questions | "
                + " | ".join(f"{m} hit@1 / recall@5" for m in fmodes)
                + f" | {fmodes[0]} p50 ms |",
                "| --- | --- | " + " | ".join("---" for _ in fmodes) + " | --- |",
            ]
            for name, part in first[key].items():
                parts = [
                    f"{fam[m][key][name]['hit@1']:.3f} / {fam[m][key][name]['recall@5']:.3f}"
                    for m in fmodes
                ]
                lines.append(
                    f"| {name} | {part['questions']} | "
                    + " | ".join(parts)
                    + f" | {part['recall_ms_p50']:.1f} |"
                )
    return "\n".join(lines)


# -- families --------------------------------------------------------------------------


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def conversation_stores(family: str, data: Path | None) -> list[Store]:
    """A dataset of eval_recall (conversations, FAQ notes) as stores, its gold the units
    eval_recall scores (supporting turns, ``has_answer`` turns, the gold note)."""
    units = CONVERSATION_UNITS[family]
    stacks = eval_recall.haystacks(family, data or eval_recall.default_data(family), units)
    stores = []
    for stack, turns, qs in stacks:
        questions = [
            Question(q["id"], q["question"], list(q["gold_turns"]), str(q.get("category", stack)))
            for q in qs
            if q.get("gold_turns")
        ]
        if questions:
            stores.append(Store(family, stack, [(t, text) for t, _, text in turns], questions))
    return stores


def kg_unit(entity: str, observation: str) -> str:
    return json.dumps([entity, observation], ensure_ascii=False)


def kg_stores(data: Path) -> list[Store]:
    units = []
    for line in (data / "memory.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["type"] == "entity":
            units += [(kg_unit(rec["name"], o), o) for o in rec["observations"]]
    questions = [
        Question(q["id"], q["question"], [kg_unit(e, o) for e, o in q["gold"]], q["category"])
        for q in read_jsonl(data / "questions.jsonl")
    ]
    return [Store("kg", "packages", units, questions)]


def code_stores(data: Path, family: str) -> list[Store]:
    notes = read_jsonl(data / "notes.jsonl")
    questions = [
        Question(
            q["id"],
            q["question"],
            q["gold"],
            str(Path(q["path"]).parent),
            q["path"] if family == "code" else None,
        )  # fmt: skip
        for q in read_jsonl(data / "questions.jsonl")
    ]
    units = [(n["id"], n["content"]) for n in notes]
    # the repository's scope (the server runs in the checkout), with the code index on
    return [Store(family, "memtrio", units, questions, scopes=None, env={"MEMTRIO_CODE": "on"})]


# -- filling ---------------------------------------------------------------------------


def cli_env(home: Path, env: dict[str, str]) -> dict[str, str]:
    params = eval_recall.server(home, env)
    return dict(params.env or {})


def memtrio(home: Path, cwd: Path, env: dict[str, str], *args: str) -> str:
    """Run ``memtrio ARGS`` (the CLI of this checkout) and return its stdout."""
    done = subprocess.run(
        [sys.executable, "-m", "memtrio.supervisors.cli", *args],
        cwd=cwd, env=cli_env(home, env), capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"memtrio {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def fill_key(*parts: str) -> str:
    h = hashlib.sha256(f"v{FILL_VERSION}\0{os.environ.get('MEMTRIO_EMBEDDING_MODEL', '')}".encode())
    for p in parts:
        h.update(b"\0" + p.encode())
    return h.hexdigest()[:20]


def fill_kg(cache: Path, data: Path, store: Store) -> None:
    """``memtrio import`` the memory.jsonl, ``memtrio reembed`` it; memory ids from an export."""
    graph = (data / "memory.jsonl").read_text()
    home = cache / f"kg-{fill_key(graph)}"
    owner_file = home / "eval-owner.json"
    if not owner_file.exists():
        if home.exists():
            shutil.rmtree(home)
        home.mkdir(parents=True)
        started = time.perf_counter()
        on = {"MEMTRIO_EMBEDDINGS": "on"}
        memtrio(home, home, on, "import", str(data / "memory.jsonl"), "--format", "jsonl")
        memtrio(home, home, on, "reembed")
        memtrio(home, home, on, "export", str(home / "export.jsonl"))
        names: dict[int, str] = {}
        owner: dict[int, str] = {}
        for line in (home / "export.jsonl").read_text().splitlines():
            rec = json.loads(line)
            if rec["type"] == "entity":
                names[rec["id"]] = rec["name"]
        for line in (home / "export.jsonl").read_text().splitlines():
            rec = json.loads(line)
            if rec["type"] == "memory":
                (entity,) = rec["entities"]
                owner[rec["id"]] = kg_unit(names.get(entity, entity), rec["content"])
        (home / "export.jsonl").unlink()
        missing = {u for u, _ in store.units} - set(owner.values())
        if missing:
            raise RuntimeError(f"kg: {len(missing)} observations not found after the import")
        owner_file.write_text(json.dumps(owner))
        print(
            f"  filled kg: {len(owner)} observations in {time.perf_counter() - started:.1f} s",
            file=sys.stderr,
        )
    store.home, store.cwd = home, home
    store.owner = {int(k): v for k, v in json.loads(owner_file.read_text()).items()}


def checkout(commit: str, where: Path) -> None:
    """The files of ``commit`` in ``where`` as a one-commit Git repository (fixed dates)."""
    where.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive(commit))) as t:
        t.extractall(where, filter="data")
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "eval", "GIT_AUTHOR_EMAIL": "eval@example.invalid",
        "GIT_COMMITTER_NAME": "eval", "GIT_COMMITTER_EMAIL": "eval@example.invalid",
        "GIT_AUTHOR_DATE": GIT_DATE, "GIT_COMMITTER_DATE": GIT_DATE,
    }  # fmt: skip
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", commit]):
        subprocess.run(["git", *args], cwd=where, env=env, check=True, capture_output=True)


async def fill_code(cache: Path, data: Path, stores: list[Store]) -> None:
    """The notes written with ``remember(content, code=[{path, symbol}])`` in a checkout."""
    meta = json.loads((data / "meta.json").read_text())
    notes = read_jsonl(data / "notes.jsonl")
    base = cache / f"code-{fill_key(meta['commit'], (data / 'notes.jsonl').read_text())}"
    home, repo = base / "home", base / "checkout"
    owner_file = base / "eval-owner.json"
    if not owner_file.exists():
        if base.exists():
            shutil.rmtree(base)
        checkout(meta["commit"], repo)
        home.mkdir(parents=True)
        started = time.perf_counter()
        owner: dict[int, str] = {}
        on = {"MEMTRIO_EMBEDDINGS": "on", **stores[0].env}
        async with Client(server(home, repo, on), read_timeout_seconds=300) as client:
            for n in notes:
                out = await eval_recall.tool(
                    client, "remember", content=n["content"],
                    code=[{"path": n["path"], "symbol": n["symbol"]}],
                )  # fmt: skip
                owner[out["id"]] = n["id"]
        owner_file.write_text(json.dumps(owner))
        print(
            f"  filled code: {len(notes)} notes in {time.perf_counter() - started:.1f} s",
            file=sys.stderr,
        )
    for store in stores:
        store.home, store.cwd = home, repo
        store.owner = {int(k): v for k, v in json.loads(owner_file.read_text()).items()}


def server(home: Path, cwd: Path, env: dict[str, str]) -> StdioServerParameters:
    """eval_recall's server (embedded, no owner, quiet) over ``home``, started in ``cwd``."""
    params = eval_recall.server(home, env)
    return StdioServerParameters(
        command=params.command, args=params.args, env=params.env, cwd=str(cwd)
    )


# -- running ---------------------------------------------------------------------------


async def run_store(store: Store, mode: str, settings: dict[str, str]) -> list[dict[str, Any]]:
    """Every question of ``store`` under ``mode``: one row each (metrics, ranked units, ms)."""
    place = {u: i for i, (u, _) in enumerate(store.units)}
    rows = []

    def row(q: Question, ranked: list[str | None], ms: float) -> dict[str, Any]:
        return {
            "family": store.family, "store": store.name, "id": q.id, "category": q.category,
            **score(ranked, q.gold, place), "ms": round(ms, 2), "ranked": ranked,
        }  # fmt: skip

    if mode == BM25:
        ranking = bm25_ranking(store.units)
        for q in store.questions:
            started = time.perf_counter()
            found: list[str | None] = list(ranking(q.question))
            rows.append(row(q, found, (time.perf_counter() - started) * 1000))
        return rows
    assert store.home is not None and store.cwd is not None
    env = {"MEMTRIO_EMBEDDINGS": "on", **store.env, **settings, **eval_recall.MODES[mode]}
    lexical = env.get("MEMTRIO_EMBEDDINGS") == eval_recall.OFF
    async with Client(server(store.home, store.cwd, env), read_timeout_seconds=300) as client:
        # not timed: the server's first recall loads the model (and checks the code index)
        first = store.questions[0]
        await eval_recall.tool(
            client, "recall", query=first.question, limit=LIMIT, use_embeddings=not lexical,
            **({"code": first.code} if first.code else {}),
            **({"scopes": store.scopes} if store.scopes is not None else {}),
        )  # fmt: skip
        for q in store.questions:
            args: dict[str, Any] = {
                "query": q.question,
                "limit": LIMIT,
                "use_embeddings": not lexical,
            }
            if store.scopes is not None:
                args["scopes"] = store.scopes
            if q.code:
                args["code"] = q.code
            started = time.perf_counter()
            out = await eval_recall.tool(client, "recall", **args)
            ms = (time.perf_counter() - started) * 1000
            if out["ranking"] != ("lexical" if lexical else "semantic"):
                raise RuntimeError(
                    f"mode {mode}: recall ranked {out['ranking']} ({out.get('warnings')})"
                )
            rows.append(row(q, [store.owner.get(m["id"]) for m in out["memories"]], ms))
    return rows


def load(family: str, data: Path | None) -> list[Store]:
    if family in CONVERSATION_UNITS:
        return conversation_stores(family, data)
    if family == "kg":
        return kg_stores(data or SETS / "kg-packages")
    return code_stores(data or SETS / "code-notes", family)


async def evaluate(args: argparse.Namespace, families: list[str]) -> dict[str, Any]:
    cache = Path(args.cache).expanduser()
    settings = dict(item.split("=", 1) for item in args.set)
    modes = args.modes.split(",")
    rows: dict[str, dict[str, list[dict[str, Any]]]] = {}
    code_filled: list[Store] = []
    for family in families:
        started = time.perf_counter()
        stores = load(family, None)
        for store in stores:
            if family in CONVERSATION_UNITS:
                turns = [(u, store.name, text) for u, text in store.units]
                units = CONVERSATION_UNITS[family]
                store.home, owner = await eval_recall.filled(
                    cache, f"{family}-{units}-{store.name}", turns
                )
                store.cwd, store.owner = store.home, owner
            elif family == "kg":
                fill_kg(cache, SETS / "kg-packages", store)
            else:
                await fill_code(cache, SETS / "code-notes", [store])
                code_filled.append(store)
        rows[family] = {}
        for mode in modes:
            if mode == BM25 and any(q.code for s in stores for q in s.questions):
                continue  # BM25 over the texts cannot take `code=`: it would be code-query's
            rows[family][mode] = []
            for store in stores:
                rows[family][mode] += await run_store(store, mode, settings)
        questions = sum(len(s.questions) for s in stores)
        print(
            f"  {family}: {len(stores)} stores, {questions} questions, {time.perf_counter() - started:.0f} s",
            file=sys.stderr,
        )
    return {"modes": modes, "settings": settings, "rows": rows}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--families", default="all", help=f"comma-separated, of {', '.join(FAMILIES)}, or all"
    )
    parser.add_argument(
        "--modes", default=DEFAULT_MODES, help=f"comma-separated (default {DEFAULT_MODES}); "
        f"{BM25} or a mode of tools/eval_recall.py"
    )  # fmt: skip
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE",
        help="MEMTRIO_* setting for every mode (not for the filling server)",
    )  # fmt: skip
    parser.add_argument(
        "--cache", default="~/.cache/memtrio-eval", help="where filled stores are kept"
    )
    parser.add_argument("--rounds", type=int, default=1000, help="bootstrap resamples")
    parser.add_argument("--markdown", help="write the tables here too")
    parser.add_argument(
        "--json",
        help="write every question's row (metrics, latency) here, gzipped if it ends in .gz",
    )
    parser.add_argument(
        "--rows", help="no run: the tables of the rows a previous --json wrote (.json or .json.gz)"
    )
    args = parser.parse_args()
    if args.rows:
        raw = Path(args.rows).read_bytes()
        saved = json.loads(gzip.decompress(raw) if args.rows.endswith(".gz") else raw)
        print(tables(summarize(saved["rows"], args.rounds)), flush=True)
        return 0
    families = list(FAMILIES) if args.families == "all" else args.families.split(",")
    bad = [f for f in families if f not in FAMILIES]
    if bad:
        parser.error(f"unknown families {bad}; known: {', '.join(FAMILIES)}")
    modes = args.modes.split(",")
    bad = [m for m in modes if m != BM25 and m not in eval_recall.MODES]
    if bad:
        parser.error(f"unknown modes {bad}; known: {BM25}, {', '.join(eval_recall.MODES)}")
    if "faq" in families and "faq" not in eval_recall.DATA_DIRS:
        print(
            "  faq: skipped, tools/eval_recall.py has no faq dataset yet (branch recall-fit)",
            file=sys.stderr,
        )
        families.remove("faq")
    started = time.perf_counter()
    result = trio.run(evaluate, args, families)
    text = tables(summarize(result["rows"], args.rounds))
    print(text, flush=True)
    print(f"  all families: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    if args.markdown:
        Path(args.markdown).parent.mkdir(parents=True, exist_ok=True)
        Path(args.markdown).write_text(
            f"`python tools/eval_families.py --families {','.join(families)} --modes {args.modes}`\n\n"
            + text
            + "\n"
        )
    if args.json:
        for by_mode in result["rows"].values():  # the metrics, not the returned ids
            for rows in by_mode.values():
                for r in rows:
                    r.pop("ranked", None)
        data = (json.dumps(result) + "\n").encode()
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_bytes(gzip.compress(data) if args.json.endswith(".gz") else data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
