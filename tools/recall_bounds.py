#!/usr/bin/env python
"""How far can recall go with what memtrio's ranker sees? Bounds on the dev data.

Issue #17 asks for session recall@5 >= 0.92 on LoCoMo and >= 0.95 on
LongMemEval-S-16. This lab tool measures, in process over the stores
``tools/eval_recall.py`` filled (run it once per dataset first; this tool never
fills a store), what the ranking stages leave on the table:

* ``coverage``: the gold sessions among the re-ranker's candidates, and among
  its first 5 / 10 / 20 / 40 by the model's score, before diversification.
  If the candidates hold nearly every gold session, the loss is in the order.
* ``sessions``: the whole recall pipeline (``rank.rank``) with each memory's
  *true* session as a second diversity key: a candidate pays ``P`` in log score
  for each memory of its session already chosen (``--session-penalties``).
  The protocol writes a conversation in one burst, so memtrio cannot see
  session boundaries; this is what a session key given to ``remember`` (a
  lever the issue names) could give at most with this diversification.
* ``--trees``: boosted regression trees (LightGBM, ``pip install lightgbm``)
  fitted on the same features and the same listwise softmax loss as the
  linear model, as a correction to its scores (the linear model's scores are
  the trees' starting point); scored leave-one-conversation-out on LoCoMo
  against the linear model refitted the same way. Does a non-linear model of
  these features rank better?
* ``--sentences``: each memory's sentences embedded on their own; two extra
  features (the best sentence's cosine less the memory's, and its gap to the
  best sentence of the candidates), fitted in a second stage on top of the
  shipped weights, leave-one-conversation-out. Do whole-memory vectors dilute
  a short answer inside a longer turn?

Usage::

    python tools/recall_bounds.py --trees --sentences > docs/bench-runs/recall-bounds.txt

Needs scipy (the fits); ``--trees`` needs lightgbm. Development tools, not
dependencies.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fit_rerank  # noqa: E402
from memtrio.actors.embedder.model import OnnxEncoder  # noqa: E402
from memtrio.actors.ranker import rank, rerank  # noqa: E402
from memtrio.actors.ranker.signals import thread_neighbours  # noqa: E402

KS = (5, 10, 20, 40)
TOPIC = ("topic_cosine", "topic_gap", "neighbour_topic")  # the shipped second stage
SENTENCE = re.compile(r"(?<=[.!?])\s+")
Stack = fit_rerank.Stack


def figures(rows: list[dict[str, Any]]) -> str:
    return " / ".join(f"{fit_rerank.mean(rows, k):.3f}" for k in ("session@5", "turn@5"))


def coverage(stacks: list[Stack]) -> None:
    print("\n## Gold sessions among the re-ranker's candidates (before diversification)\n")
    print("| stores | candidates | " + " | ".join(f"first {k}" for k in KS) + " | all |")
    print("| --- " * (len(KS) + 3) + "|")
    for name in names(stacks):
        seen: dict[Any, list[float]] = {}
        sizes = []
        for s in (s for s in stacks if group(s) == name):
            for q, (ids, rows, _) in zip(s.qs, s.examples, strict=True):
                order = np.argsort(-rerank.scores(rows), kind="stable")
                sess = [s.session_of.get(s.owner.get(ids[i], "")) for i in order]
                gold = set(q["gold_sessions"])
                for k in (*KS, "all"):
                    top = sess if k == "all" else sess[: int(k)]
                    seen.setdefault(k, []).append(len(gold & set(top)) / len(gold))
                sizes.append(len(ids))
        cells = " | ".join(f"{np.mean(seen[k]):.3f}" for k in (*KS, "all"))
        print(f"| {name} | {np.mean(sizes):.0f} | {cells} |")


def session_diversify(session: dict[int, str | None], penalty: float) -> Callable[..., Any]:
    """`rerank.diversify` with ``penalty`` per chosen memory of the same true session."""

    def diversify(cache, ranked, allowed, limit, position_penalty, window=1):  # type: ignore[no-untyped-def]
        pool = ranked[: max(rerank.DIVERSIFY_POOL, min(limit, 2 * rerank.DIVERSIFY_POOL))]
        if len(pool) <= 1:
            return ranked[:limit]
        log_score = [math.log(max(s, 1e-300)) for _, s in pool]
        adjacent = [{o for o, _ in thread_neighbours(cache, m, allowed, window)} for m, _ in pool]
        chosen: list[int] = []
        taken: set[int] = set()
        per_session: dict[str | None, int] = {}
        free = set(range(len(pool)))

        def value(i: int) -> float:
            near = position_penalty if adjacent[i] & taken else 0.0
            return log_score[i] - near - penalty * per_session.get(session.get(pool[i][0]), 0)

        while free and len(chosen) < limit:
            best = max(sorted(free), key=value)
            chosen.append(best)
            taken.add(pool[best][0])
            free.discard(best)
            key = session.get(pool[best][0])
            per_session[key] = per_session.get(key, 0) + 1
        return [pool[i] for i in chosen] + ranked[len(pool) : limit]

    return diversify


def sessions(stacks: list[Stack], penalties: list[float]) -> None:
    print("\n## The true session as a diversity key (session@5 / turn@5, whole pipeline)\n")
    print("| penalty | " + " | ".join(names(stacks)) + " |")
    print("| --- " * (len(names(stacks)) + 1) + "|")
    shipped = rerank.diversify
    try:
        for penalty in penalties:
            rows: dict[str, list[dict[str, Any]]] = {}
            for s in stacks:
                session = {m: s.session_of.get(t) for m, t in s.owner.items()}
                rerank.diversify = session_diversify(session, penalty)
                rows.setdefault(group(s), []).extend(s.score(rerank.WEIGHTS))
            label = "0 (shipped)" if penalty == 0 else f"{penalty:g}"
            print(f"| {label} | " + " | ".join(figures(rows[n]) for n in names(stacks)) + " |")
    finally:
        rerank.diversify = shipped


LME_WEIGHT = 10.0  # fit_rerank.py's default --lme-weight


def held_out(
    stacks: list[Stack], variants: dict[str, Callable[[list[Stack]], Callable[[], Any]]]
) -> dict[str, list[dict[str, Any]]]:
    """LoCoMo rows of each variant, each conversation scored by a variant fitted without it.

    A variant takes the training stacks and returns a function that installs the
    fitted model and returns the weights to score with."""
    out: dict[str, list[dict[str, Any]]] = {}
    for conv in sorted({s.name.rsplit("/", 1)[1] for s in stacks if s.dataset == "locomo"}):
        train = [s for s in stacks if not s.name.endswith("/" + conv)]
        for label, variant in variants.items():
            install = variant(train)
            for s in (s for s in stacks if s.name.endswith("/" + conv)):
                out.setdefault(label, []).extend(s.score(install()))
        print(f"  held out {conv}", file=sys.stderr)
    return out


def held_out_table(title: str, what: str, rows: dict[str, list[dict[str, Any]]]) -> None:
    print(f"\n## {title} (LoCoMo, leave-one-conversation-out)\n")
    print(f"| {what} | session@5 / turn@5 |\n| --- | --- |")
    for label, r in rows.items():
        print(f"| {label} | {figures(r)} |")


def trees(stacks: list[Stack], rounds: int) -> None:
    import lightgbm as lgb

    later = np.array([f in TOPIC for f in rerank.FEATURES])
    shipped = rerank.scores

    def linear(train: list[Stack]) -> Callable[[], Any]:
        weights = fit_rerank.fit(fit_rerank.examples(train, LME_WEIGHT), 0.01, later)

        def install() -> Any:
            rerank.scores = shipped
            return weights

        return install

    def boosted(train: list[Stack]) -> Callable[[], Any]:
        data = [
            (x, y / y.sum(), w) for x, y, w in fit_rerank.examples(train, LME_WEIGHT) if y.sum() > 0
        ]
        weights = fit_rerank.fit(data, 0.01, later)
        x_all = np.concatenate([x for x, _, _ in data])
        target = np.concatenate([y for _, y, _ in data])
        row_weight = np.concatenate([np.full(len(x), w) for x, _, w in data])
        bounds = np.cumsum([0] + [len(x) for x, _, _ in data])

        def listwise(preds: np.ndarray, _data: Any) -> tuple[np.ndarray, np.ndarray]:
            grad, hess = np.empty_like(preds), np.empty_like(preds)
            for a, b in zip(bounds[:-1], bounds[1:], strict=True):
                p = np.exp(preds[a:b] - preds[a:b].max())
                p /= p.sum()
                grad[a:b] = row_weight[a:b] * (p - target[a:b])
                hess[a:b] = row_weight[a:b] * np.maximum(p * (1 - p), 1e-6)
            return grad, hess

        params = {
            "objective": listwise,
            "num_leaves": 7,
            "learning_rate": 0.05,
            "min_data_in_leaf": 50,
            "lambda_l2": 1.0,
            "feature_fraction": 0.8,
            "bagging_fraction": 0.8,
            "bagging_freq": 1,
            "verbose": -1,
            "seed": 1,
        }
        dataset = lgb.Dataset(x_all, init_score=x_all @ weights, free_raw_data=False)
        booster = lgb.train(params, dataset, num_boost_round=rounds)

        def install() -> Any:
            def scores(rows: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
                base = rows @ (weights if w is None else w)
                return base + booster.predict(rows, raw_score=True)

            rerank.scores = scores
            return weights

        return install

    try:
        rows = held_out(stacks, {"linear (shipped form)": linear, f"trees ({rounds})": boosted})
    finally:
        rerank.scores = shipped
    held_out_table("A non-linear model of the same features", "model", rows)


def sentences(stacks: list[Stack], encoder: OnnxEncoder) -> None:
    """Sentence cosines as two extra features, refitting only them (second stage)."""
    vectors: dict[int, np.ndarray] = {}
    shipped = rerank.features

    def features(cache, conn, query, qvec, allowed, lexical, dense, tvec=None):  # type: ignore[no-untyped-def]
        ids, rows, lenders, turns = shipped(cache, conn, query, qvec, allowed, lexical, dense, tvec)
        q = np.asarray(qvec, dtype=np.float32).reshape(-1)
        cos = rows[:, rerank.COSINE_COLUMN]
        best = np.array(
            [
                max(float((vectors[m] @ q).max()), c) if m in vectors else c
                for m, c in zip(ids, cos, strict=True)
            ]
        )
        gap = cos - cos.max()
        extra = np.stack([best - cos, (best - best.max()) - gap], axis=1)
        return ids, np.concatenate([rows, extra], axis=1), lenders, turns

    per_stack: dict[str, dict[int, np.ndarray]] = {}
    rerank.features = features
    try:
        for s in stacks:
            vectors.clear()
            split = [
                (m, SENTENCE.split(text.strip()))
                for m, text in s.conn.execute("SELECT id, content FROM memories")
            ]
            pieces = [(m, p) for m, parts in split if len(parts) > 1 for p in parts if p]
            found = encoder.encode([p for _, p in pieces])[0] if pieces else []
            grouped: dict[int, list[np.ndarray]] = {}
            for (m, _), vec in zip(pieces, found, strict=True):
                grouped.setdefault(m, []).append(vec)
            vectors.update({m: np.stack(v) for m, v in grouped.items()})
            per_stack[s.name] = dict(vectors)
            s.prepare(encoder)  # the candidates' rows now carry the two extra features
        base = np.concatenate([rerank.WEIGHTS, np.zeros(2)])
        later = np.array([False] * len(rerank.WEIGHTS) + [True, True])

        def shipped_weights(_train: list[Stack]) -> Callable[[], Any]:
            return lambda: base

        def with_sentences(train: list[Stack]) -> Callable[[], Any]:
            weights = base + fit_rerank.fit_columns(
                fit_rerank.examples(train, LME_WEIGHT), 0.01, later, base
            )
            return lambda: weights

        originals = {s.name: s.score for s in stacks}
        for s in stacks:  # each stack scores with its own sentence vectors

            def score(weights: Any, only: Any = None, s: Stack = s) -> Any:
                vectors.clear()
                vectors.update(per_stack[s.name])
                return originals[s.name](weights, only)

            s.score = score  # type: ignore[method-assign]
        rows = held_out(stacks, {"shipped": shipped_weights, "with sentences": with_sentences})
    finally:
        rerank.features = shipped
    held_out_table("Sentence vectors as features", "features", rows)


def group(s: Stack) -> str:
    return s.name.rsplit("/", 1)[0]


def names(stacks: list[Stack]) -> list[str]:
    return list(dict.fromkeys(group(s) for s in stacks))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--locomo-units", default="speaker")
    parser.add_argument("--lme-units", default="bare,role")
    parser.add_argument("--session-penalties", default="0,0.5,1,2,5")
    parser.add_argument("--trees", action="store_true", help="fit boosted trees (lightgbm)")
    parser.add_argument("--rounds", type=int, default=200, help="boosting rounds for --trees")
    parser.add_argument("--sentences", action="store_true", help="sentence-vector features")
    parser.add_argument("--cache", default="~/.cache/memtrio-eval")
    args = parser.parse_args()
    for flag, module in (("always", "scipy"), ("--trees", "lightgbm")):
        if (flag == "always" or args.trees) and importlib.util.find_spec(module) is None:
            parser.error(f"needs {module}: pip install {module}")
    cache = Path(args.cache).expanduser()
    encoder, stacks = fit_rerank.load_stacks(
        args.locomo_units, args.lme_units, cache, rank.Params()
    )
    print("# Recall bounds on the dev data (`python tools/recall_bounds.py`)")
    coverage(stacks)
    sessions(stacks, [float(p) for p in args.session_penalties.split(",") if p])
    locomo = [s for s in stacks if s.dataset == "locomo" or s.name == "longmemeval/bare/all"]
    if args.trees:
        trees(locomo, args.rounds)
    if args.sentences:
        sentences(locomo, encoder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
