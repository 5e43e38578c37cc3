#!/usr/bin/env python
"""Fit the learned re-ranker's weights (``actors/ranker/rerank.py``) on the dev data.

Procedure (the one behind ``rerank.WEIGHTS``):

1. The stores ``tools/eval_recall.py`` filled (its cache, one per LoCoMo dev
   conversation and unit format, one for LongMemEval-S-16, one per FAQ project)
   and the knowledge graph ``tools/eval_families.py --families kg`` imported are
   opened in process with the ranker's own cache. Run those tools once per
   dataset first: this tool never fills a store.
2. For every question, the candidates and their features are computed by
   ``rank.rerank_candidates`` (the code recall runs); a candidate is a positive when
   it is one of the question's supporting turns.
3. The model is linear; its loss is the listwise softmax cross-entropy (the
   supporting turns share the target mass) plus ``--l2`` times the squared
   weights, over standardised features, minimised by L-BFGS (scipy).
   LongMemEval's 16 questions are counted ``--lme-weight`` times, so that the
   long assistant replies of that dataset weigh against LoCoMo's 997 short turns.
   ``--later FEATURES`` fits those features in a second stage: the others are
   fitted without them, then held at those values (the shipped topic features).
4. Held out, three ways. Leave-one-conversation-out: for each LoCoMo conversation the weights are
   fitted on the others (and LongMemEval) and the whole recall pipeline
   (``rank.rank``: seeds, PageRank, dates, `rerank.diversify`) is scored on the one
   left out: session and turn recall@5, the issue-17 metrics. Their mean
   estimates what the weights give on conversations they were not fitted on.
   LongMemEval has one haystack: each of its questions is scored with the
   weights fitted without it (leave-one-question-out). The FAQ notes
   (``faq-notes-dev``, ``--faq-units note``, each question weighing
   ``--faq-weight``): leave-one-project-out, each project's store scored with the
   weights fitted on every other store (hit@1, MRR@10, recall@5, neighbour@1).
   The knowledge graph (``tools/eval_sets/kg-packages`` as ``tools/eval_families.py``
   imports it, each question weighing ``--kg-weight``): leave-one-category-out,
   each kind of question ("Who wrote X?", "Which license...") scored with the
   weights fitted without that kind.
   Leave-one-family-out: each dataset scored with the weights fitted on the
   others only, the check that the model is not one family's habits.
5. The weights fitted on all of it are printed in raw feature units (the
   standardisation folded in), to paste into ``rerank.WEIGHTS``.

Needs scipy (``pip install scipy``; a development tool, not a dependency).

Usage::

    python tools/fit_rerank.py --later topic_cosine,topic_gap,neighbour_topic --json FILE
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import eval_families  # noqa: E402
import eval_recall  # noqa: E402
from memtrio.actors.embedder.model import OnnxEncoder, resolve_spec  # noqa: E402
from memtrio.actors.ranker import rank, rerank  # noqa: E402
from memtrio.actors.ranker.graph import KINDS, RecallCache  # noqa: E402
from memtrio.actors.store.sqlite.tx import tx as sqlite_tx  # noqa: E402


class Stack:
    """One filled store, opened read-only, with its questions' candidates and features."""

    def __init__(
        self,
        dataset: str,
        units: str,
        stack: str,
        turns: list,
        qs: list,
        cache: Path,
        params: rank.Params,
        home: Path | None = None,
    ):
        """``home``: the filled store's directory (default: `eval_recall`'s for ``turns``)."""
        home = home or cache / f"{dataset}-{units}-{stack}-{eval_recall.cache_key(turns)}"
        owner_file = home / "eval-owner.json"
        if not owner_file.exists():
            fill = (
                "eval_families.py --families kg"
                if dataset == "kg"
                else f"eval_recall.py --dataset {dataset} --units {units}"
            )
            raise SystemExit(
                f"no filled store for {dataset} {units} {stack} in {cache}: run "
                f"`python tools/{fill} --modes default` first"
            )
        self.name = f"{dataset}/{units}/{stack}"
        self.dataset, self.qs = dataset, qs
        self.params = params  # the ranking settings the pipeline is scored with
        self.owner = {int(k): v for k, v in json.loads(owner_file.read_text()).items()}
        self.session_of = {turn_id: session_id for turn_id, session_id, _ in turns}
        self.conn = sqlite3.connect(
            f"file:{home / 'memtrio.sqlite'}?mode=ro", uri=True, check_same_thread=False
        )
        model, revision, dim = self.conn.execute(
            "SELECT model, revision, dim FROM vectors LIMIT 1"
        ).fetchone()
        self.cache = RecallCache(model, revision, dim, dates=True)
        self.tx = sqlite_tx(self.conn)  # the store seen as the ranker sees it
        self.conn.execute("BEGIN")
        self.cache.load(self.tx.snapshot)
        self.conn.execute("ROLLBACK")
        self.masks = {kind: self.cache.items[kind].allowed(None) for kind in KINDS}

    def prepare(self, encoder: OnnxEncoder) -> None:
        prefix = encoder.spec.query_prefix
        self.qvecs, _ = encoder.encode([prefix + q["question"] for q in self.qs])
        topics = [rerank.topic_query(q["question"]) for q in self.qs]
        named = [i for i, t in enumerate(topics) if t]
        tvecs = encoder.encode([prefix + topics[i] for i in named])[0] if named else []
        self.tvecs: list[np.ndarray | None] = [None] * len(self.qs)
        for i, vec in zip(named, tvecs, strict=True):
            self.tvecs[i] = vec
        self.lexical = [rank.fts_candidates(self.tx, q["question"]) for q in self.qs]
        turn_to_memory = {turn: m for m, turn in self.owner.items()}
        self.examples: list[tuple[list[int], np.ndarray, np.ndarray]] = []
        for q, qvec, lexical, tvec in zip(
            self.qs, self.qvecs, self.lexical, self.tvecs, strict=True
        ):
            query = rank.SeedQuery(
                self.cache, self.tx, q["question"], qvec, self.masks, self.params, lexical, tvec
            )
            c = rank.rerank_candidates(query)
            ids, rows = c.ids, c.rows
            gold = {turn_to_memory[t] for t in q["gold_turns"] if t in turn_to_memory}
            self.examples.append((ids, rows, np.array([float(m in gold) for m in ids])))

    def score(self, weights: np.ndarray, only: list[int] | None = None) -> list[dict[str, Any]]:
        """Per-question rows of the whole pipeline with ``weights`` (``only``: these questions)."""
        saved = rerank.WEIGHTS
        rerank.WEIGHTS = weights
        try:
            rows = []
            for i in only if only is not None else range(len(self.qs)):
                q, qvec, lexical = self.qs[i], self.qvecs[i], self.lexical[i]
                ranked = rank.rank(
                    self.cache,
                    self.tx,
                    q["question"],
                    qvec,
                    self.masks,
                    10,
                    self.params,
                    lexical,
                    self.tvecs[i],
                )
                turns = [self.owner.get(m) for m, _ in ranked]
                rows.append(eval_recall.score(q, turns, self.session_of))
            return rows
        finally:
            rerank.WEIGHTS = saved


def kg_stack(cache: Path, data: Path, params: rank.Params) -> Stack:
    """The knowledge graph of ``data`` as `eval_families` imported it: its observations
    are the units, each question's gold observations the positives."""
    (store,) = eval_families.kg_stores(data)
    home = cache / f"kg-{eval_families.fill_key((data / 'memory.jsonl').read_text())}"
    qs = [
        {
            "id": q.id,
            "category": q.category,
            "question": q.question,
            "gold_turns": q.gold,
            "near": [],  # one entity's observations are not a burst: no neighbour share
        }
        for q in store.questions
    ]
    return Stack("kg", "observations", store.name, [], qs, cache, params, home)


def load_stacks(
    locomo_units: str,
    lme_units: str,
    cache: Path,
    params: rank.Params,
    faq_units: str = "",
    kg: Path | None = None,
) -> tuple[OnnxEncoder, list[Stack]]:
    """The encoder the stores were filled with, and every filled store's `Stack`, prepared
    (``kg``: the knowledge graph's data directory, None to leave it out)."""
    # eval_recall.py keys its cache by the model too
    encoder = OnnxEncoder(resolve_spec(os.environ.get("MEMTRIO_EMBEDDING_MODEL", ""), 256), "cpu")
    stacks: list[Stack] = []
    for dataset, units_list in (
        ("locomo", locomo_units),
        ("longmemeval", lme_units),
        ("faq", faq_units),
    ):
        for units in filter(None, units_list.split(",")):
            data = eval_recall.default_data(dataset)
            for stack, turns, qs in eval_recall.haystacks(dataset, data, units):
                if qs:
                    stacks.append(Stack(dataset, units, stack, turns, qs, cache, params))
    if kg is not None:
        stacks.append(kg_stack(cache, kg, params))
    for s in stacks:
        s.prepare(encoder)
        print(f"  {s.name}: {len(s.qs)} questions", file=sys.stderr)
    return encoder, stacks


FAMILY_WEIGHT: dict[str, float] = {}  # dataset -> weight of each of its questions (main)


def examples(chosen: list[Stack], lme_weight: float) -> list[tuple[np.ndarray, np.ndarray, float]]:
    """(feature rows, labels, weight) of every question of ``chosen``; LongMemEval's
    weigh ``lme_weight`` each, the notes' and the graph's ``--faq-weight`` and
    ``--kg-weight`` (`FAMILY_WEIGHT`)."""
    return [
        (rows, y, lme_weight if s.dataset == "longmemeval" else FAMILY_WEIGHT.get(s.dataset, 1.0))
        for s in chosen
        for _, rows, y in s.examples
    ]


def fit(
    examples: list[tuple[np.ndarray, np.ndarray, float]], l2: float, later: np.ndarray | None = None
) -> np.ndarray:
    """Weights in raw feature units minimising the weighted listwise softmax loss.

    ``later`` (a boolean mask of features): fitted in a second stage, the other weights
    held at their first-stage values (fitted without them)."""
    if later is None or not later.any():
        return fit_columns(examples, l2, np.ones(examples[0][0].shape[1], dtype=bool), None)
    first = fit_columns(examples, l2, ~later, None)
    return first + fit_columns(examples, l2, later, first)


def fit_columns(
    examples: list[tuple[np.ndarray, np.ndarray, float]],
    l2: float,
    cols: np.ndarray,
    fixed: np.ndarray | None,
) -> np.ndarray:
    """The weights of the ``cols`` features (0 elsewhere), the others' scores ``fixed``."""
    from scipy.optimize import minimize

    data = [(x, y / y.sum(), w) for x, y, w in examples if y.sum() > 0]
    stacked = np.concatenate([x[:, cols] for x, _, _ in data])
    mu, sd = stacked.mean(0), stacked.std(0) + 1e-9
    xs = [
        ((x[:, cols] - mu) / sd, y, w, x @ fixed if fixed is not None else 0.0) for x, y, w in data
    ]
    total = sum(w for _, _, w, _ in xs)

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        value, grad = 0.0, np.zeros_like(theta)
        for x, y, w, offset in xs:
            z = x @ theta + offset
            z -= z.max()
            p = np.exp(z)
            p /= p.sum()
            value -= w * float((y * np.log(p + 1e-12)).sum())
            grad -= w * (x.T @ (y - p))
        return value / total + l2 * float(theta @ theta), grad / total + 2 * l2 * theta

    theta = minimize(loss, np.zeros(stacked.shape[1]), jac=True, method="L-BFGS-B").x
    out = np.zeros(len(cols))
    out[cols] = theta / sd
    return out


def parse_params(items: list[str], parser: argparse.ArgumentParser) -> rank.Params:
    """`rank.Params` with the ``NAME=VALUE`` settings of --param."""
    params = rank.Params()
    fields = {f.name: str(f.type) for f in dataclasses.fields(rank.Params)}
    for item in items:
        name, _, value = item.partition("=")
        if name not in fields or not value:
            parser.error(f"--param {item!r}: give NAME=VALUE, NAME one of {', '.join(fields)}")
        kind = {"bool": lambda v: v.lower() in ("1", "true", "on"), "int": int}.get(
            fields[name], float
        )
        try:
            params = dataclasses.replace(params, **{name: kind(value)})
        except ValueError:
            parser.error(f"--param {item!r}: {name} takes a {fields[name]}")
    return params


def mean(rows: list[dict[str, Any]], key: str) -> float:
    values = [r[key] for r in rows if r[key] is not None]
    return sum(values) / len(values)


NOTE_FAMILIES = ("faq", "kg")  # scored by the gold unit's rank, not by sessions


def figures(dataset: str, rows: list[dict[str, Any]]) -> dict[str, float]:
    """The dataset's headline means: session and turn recall@5, or the notes' metrics."""
    keys = eval_recall.NOTE_METRICS if dataset in NOTE_FAMILIES else ("session@5", "turn@5")
    return {k: round(mean(rows, k), 4) for k in keys}


def questions_held_out(
    stacks: list[Stack],
    args: argparse.Namespace,
    later: np.ndarray,
    held_out: dict[str, list[dict[str, Any]]],
) -> None:
    """Leave one LongMemEval question out (fitted on LoCoMo and the other questions)."""
    lme = [s for s in stacks if s.dataset == "longmemeval"]
    for i in range(len(lme[0].qs) if lme else 0):
        rest = [
            (rows, y, args.lme_weight)
            for s in lme
            for j, (_, rows, y) in enumerate(s.examples)
            if j != i
        ]
        weights = fit(
            examples([s for s in stacks if s.dataset == "locomo"], args.lme_weight) + rest,
            args.l2,
            later,
        )
        for s in lme:
            held_out.setdefault(s.name.rsplit("/", 1)[0], []).extend(s.score(weights, [i]))


def kinds_held_out(
    s: Stack, stacks: list[Stack], args: argparse.Namespace, later: np.ndarray
) -> list[dict[str, Any]]:
    """The graph's questions, each kind ("Who wrote X?") scored with the weights fitted
    on every other store and the other kinds of ``s``: leave one kind of question out."""
    rows: list[dict[str, Any]] = []
    others = examples([o for o in stacks if o is not s], args.lme_weight)
    for kind in sorted({q["category"] for q in s.qs}):
        rest = [
            (x, y, FAMILY_WEIGHT.get(s.dataset, 1.0))
            for q, (_, x, y) in zip(s.qs, s.examples, strict=True)
            if q["category"] != kind
        ]
        weights = fit(others + rest, args.l2, later)
        rows += s.score(weights, [i for i, q in enumerate(s.qs) if q["category"] == kind])
    return rows


def held_out_runs(
    stacks: list[Stack], args: argparse.Namespace, later: np.ndarray
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[dict[str, Any]]]]:
    """Per-question rows scored with weights fitted without them: (leave one LoCoMo
    conversation, LongMemEval question, kind of graph question or FAQ project out;
    leave one family out)."""
    held_out: dict[str, list[dict[str, Any]]] = {}
    conversations = sorted({s.name.rsplit("/", 1)[1] for s in stacks if s.dataset == "locomo"})
    for conv in conversations:
        weights = fit(
            examples([s for s in stacks if not s.name.endswith("/" + conv)], args.lme_weight),
            args.l2,
            later,
        )
        for s in stacks:
            if s.name.endswith("/" + conv):
                held_out.setdefault(s.name.rsplit("/", 1)[0], []).extend(s.score(weights))
    if not args.no_lme_questions:
        questions_held_out(stacks, args, later, held_out)
    for s in (s for s in stacks if s.dataset == "kg"):
        held_out.setdefault(s.name.rsplit("/", 1)[0], []).extend(
            kinds_held_out(s, stacks, args, later)
        )
    projects = [s for s in stacks if s.dataset == "faq"]
    for s in projects:  # leave one FAQ project (one store of notes) out
        weights = fit(examples([o for o in stacks if o is not s], args.lme_weight), args.l2, later)
        held_out.setdefault(s.name.rsplit("/", 1)[0], []).extend(s.score(weights))
    by_family: dict[str, list[dict[str, Any]]] = {}
    families = sorted({s.dataset for s in stacks})
    for family in families if len(families) > 1 else []:
        # leave one family out
        weights = fit(
            examples([s for s in stacks if s.dataset != family], args.lme_weight), args.l2, later
        )
        for s in stacks:
            if s.dataset == family:
                by_family.setdefault(s.name.rsplit("/", 1)[0], []).extend(s.score(weights))
    return held_out, by_family


def main() -> int:  # noqa: C901
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--locomo-units", default="speaker", help="LoCoMo unit formats to fit on")
    parser.add_argument("--lme-units", default="bare", help="LongMemEval unit formats to fit on")
    parser.add_argument("--lme-weight", type=float, default=30.0)
    parser.add_argument(
        "--faq-units", default="note", help="FAQ notes to fit on ('' to leave the notes out)"
    )
    parser.add_argument(
        "--faq-weight", type=float, default=5.0, help="weight of each FAQ question in the loss"
    )
    parser.add_argument(
        "--kg",
        default=None,
        help="the knowledge graph to fit on, as tools/eval_families.py imports it "
        "(default: tools/eval_sets/kg-packages; '' to leave the graph out)",
    )
    parser.add_argument(
        "--kg-weight", type=float, default=3.0, help="weight of each graph question in the loss"
    )
    parser.add_argument("--l2", type=float, default=0.01)
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a rank.Params setting for the scored pipeline, e.g. list_window=3 (a grid point)",
    )
    parser.add_argument(
        "--without",
        default="",
        help="comma-separated FEATURES fitted at weight 0 (an ablation of those features)",
    )
    parser.add_argument(
        "--later",
        default="",
        help="comma-separated FEATURES fitted in a second stage, the others' weights "
        "held at their values fitted without them",
    )
    parser.add_argument(
        "--no-held-out", action="store_true", help="fit on everything and score it, nothing else"
    )
    parser.add_argument(
        "--no-lme-questions",
        action="store_true",
        help="skip leave-one-LongMemEval-question-out (16 fits; leave-one-family-out stays)",
    )
    parser.add_argument("--cache", default="~/.cache/memtrio-eval")
    parser.add_argument("--json", help="write the weights and the held-out figures here")
    args = parser.parse_args()
    if importlib.util.find_spec("scipy") is None:
        parser.error("needs scipy for the fit: pip install scipy")
    cache = Path(args.cache).expanduser()
    params = parse_params(args.param, parser)
    without = [f for f in args.without.split(",") if f]
    later_names = [f for f in args.later.split(",") if f]
    unknown = [f for f in without + later_names if f not in rerank.FEATURES]
    if unknown:
        parser.error(f"unknown features {unknown}; known: {', '.join(rerank.FEATURES)}")
    keep = np.array([f not in without for f in rerank.FEATURES], dtype=np.float64)
    later = np.array([f in later_names for f in rerank.FEATURES])
    FAMILY_WEIGHT["faq"] = args.faq_weight
    FAMILY_WEIGHT["kg"] = args.kg_weight
    kg = (
        eval_families.SETS / "kg-packages"
        if args.kg is None
        else Path(args.kg)
        if args.kg
        else None
    )
    stacks = load_stacks(args.locomo_units, args.lme_units, cache, params, args.faq_units, kg)[1]
    for s in stacks:
        s.examples = [(ids, rows * keep, y) for ids, rows, y in s.examples]  # --without

    held_out, by_family = ({}, {}) if args.no_held_out else held_out_runs(stacks, args, later)
    weights = fit(examples(stacks, args.lme_weight), args.l2, later)
    report: dict[str, Any] = {
        "features": list(rerank.FEATURES),
        "weights": [round(float(w), 4) for w in weights],
        "settings": vars(args),
        "held_out": {},
        "held_out_family": {},
        "fitted_on_all": {},
    }
    for name, rows in held_out.items():
        report["held_out"][name] = figures(name.split("/")[0], rows)
    for name, rows in by_family.items():
        report["held_out_family"][name] = figures(name.split("/")[0], rows)
    on_all: dict[str, list[dict[str, Any]]] = {}
    for s in stacks:
        on_all.setdefault(s.name.rsplit("/", 1)[0], []).extend(s.score(weights))
    for name, rows in on_all.items():
        report["fitted_on_all"][name] = figures(name.split("/")[0], rows)
    print(json.dumps({k: v for k, v in report.items() if k != "settings"}, indent=1))
    print("WEIGHTS = [" + ", ".join(f"{w:.4f}" for w in weights) + "]")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
