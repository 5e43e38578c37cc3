"""tools/eval_families.py: the metrics and the families' data are what the docs say they are.

The numbers docs/recall.md publishes come from these functions, so a wrong metric (an
MRR that counts the last gold instead of the first, a recall@5 that is hit@5 when a
question has several gold units, an overall mean weighted by family size, a neighbour
found in another store) would change them silently. Each test checks one rule on data
small enough to work out by hand, and the knowledge-graph test runs the real import,
reembed, export and recall to check that a returned observation maps back to its own
entity when several entities hold the same text.
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import build_code_eval  # noqa: E402
import build_kg_eval  # noqa: E402
import eval_families as ef  # noqa: E402

PLACE = {u: i for i, u in enumerate("abcdefghij")}


def test_rank_metrics_use_the_first_gold_unit() -> None:
    row = ef.score(["x", "y", "c", "d", "a"], ["a", "c"], PLACE)
    assert row["hit@1"] == 0.0
    assert row["mrr@10"] == pytest.approx(1 / 3)  # the first gold is third
    assert row["recall@5"] == 1.0  # both golds in the first five
    first = ef.score(["c", "x"], ["c"], PLACE)
    assert (first["hit@1"], first["mrr@10"], first["recall@5"]) == (1.0, 1.0, 1.0)


def test_recall_at_5_is_the_share_of_gold_units_in_the_first_five() -> None:
    row = ef.score(["a", "x", "y", "z", "w", "b"], ["a", "b"], PLACE)
    assert row["recall@5"] == 0.5  # b is sixth
    assert row["mrr@10"] == 1.0
    late = ef.score(["p", "q", "r", "s", "t", "u", "a"], ["a"], PLACE)
    assert late["recall@5"] == 0.0
    assert late["mrr@10"] == pytest.approx(1 / 7)
    beyond = ef.score([f"n{i}" for i in range(10)] + ["a"], ["a"], PLACE)
    assert beyond["mrr@10"] == 0.0  # eleventh: not within 10


def test_neighbour_at_1_is_a_wrong_first_result_written_next_to_a_gold_unit() -> None:
    gold = ["e"]  # place 4
    assert ef.score(["d", "e"], gold, PLACE)["neighbour@1"] == 1.0  # just before
    assert ef.score(["g", "e"], gold, PLACE)["neighbour@1"] == 1.0  # two after
    assert ef.score(["h", "e"], gold, PLACE)["neighbour@1"] == 0.0  # three after
    assert ef.score(["e", "d"], gold, PLACE)["neighbour@1"] == 0.0  # the gold itself
    assert ef.score([None, "e"], gold, PLACE)["neighbour@1"] == 0.0  # not a unit
    assert ef.score([], gold, PLACE)["neighbour@1"] == 0.0
    # any of several gold units counts
    assert ef.score(["a"], ["j", "b"], PLACE)["neighbour@1"] == 1.0


def test_bm25_is_plain_okapi() -> None:
    units = [("a", "the cat sat"), ("b", "cat cat cat dog"), ("c", "a dog barked at the moon")]
    rank = ef.bm25_ranking(units)
    assert rank("cat") == ["b", "a"]  # term frequency counts; c has no cat
    assert rank("moon") == ["c"]
    assert rank("Cats") == []  # no stemming
    # the score of one word in one document, by hand: idf * tf (k1+1) / (tf + k1 (1-b+b len/avg))
    n, df, avg = 3, 2, (3 + 4 + 6) / 3
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    a = idf * 1 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 3 / avg))
    b = idf * 3 * 2.2 / (3 + 1.2 * (0.25 + 0.75 * 4 / avg))
    assert b > a
    ties = ef.bm25_ranking([("x", "same words"), ("y", "same words")])
    assert ties("same") == ["x", "y"]  # ties: written first


def test_overall_weighs_each_family_the_same_and_pairs_modes() -> None:
    def rows(family: str, hits: list[float], ms: float) -> list[dict]:
        return [
            {"family": family, "store": family, "id": f"{family}{i}", "category": "c",
             "hit@1": h, "mrr@10": h, "recall@5": h, "neighbour@1": 0.0, "ms": ms}
            for i, h in enumerate(hits)
        ]  # fmt: skip

    data = {
        "big": {"default": rows("big", [1.0] * 9, 1.0), "other": rows("big", [1.0] * 9, 2.0)},
        "small": {"default": rows("small", [0.0], 5.0), "other": rows("small", [1.0], 6.0)},
    }
    summary = ef.summarize(data, rounds=200)
    overall = summary["overall"]
    assert overall["default"]["hit@1"]["mean"] == 0.5  # (1 + 0) / 2, not 9 / 10
    assert overall["other"]["hit@1"]["mean"] == 1.0
    assert overall["other"]["hit@1"]["delta"] == 0.5
    assert summary["families"]["big"]["other"]["hit@1"]["delta"] == 0.0
    assert summary["families"]["big"]["other"]["hit@1"]["delta_ci"] == [0.0, 0.0]
    assert summary["families"]["small"]["default"]["recall_ms_p50"] == 5.0
    assert "delta" not in summary["families"]["big"]["default"]["hit@1"]


def test_bootstrap_interval_covers_the_mean_and_pairs_resamples() -> None:
    values = [float(i % 2) for i in range(100)]
    out = ef.bootstrap([values], [values], rounds=500)
    assert out["mean"] == 0.5
    lo, hi = out["ci"]
    assert lo < 0.5 < hi and hi - lo < 0.3
    assert out["delta_ci"] == [0.0, 0.0]  # the same questions under the same resample
    shifted = [1.0] * 100
    better = ef.bootstrap([shifted], [values], rounds=500)
    assert better["delta"] == 0.5
    assert better["delta_ci"][0] > 0.3


def test_code_question_is_the_symbol_name_in_words() -> None:
    assert build_code_eval.words("CodeService.near") == "code service near"
    assert build_code_eval.words("code_candidates") == "code candidates"
    assert build_code_eval.words("HTTPServer.serve_forever") == "http server serve forever"
    source = '''
def public_one():
    """Does the first thing that matters here, explained at enough length to count.

    Details that are not the first paragraph.
    """

def _private():
    """A private helper is not a note, however long its docstring happens to be."""

class Thing:
    """A thing that is described well enough to be a note about the class itself."""

    def act(self):
        """Acting on a thing, described well enough to be a note about the method."""

    def short(self):
        """Too short."""
'''
    found = build_code_eval.symbols(source)
    assert [name for name, _ in found] == ["public_one", "Thing", "Thing.act"]
    assert (
        found[0][1]
        == "Does the first thing that matters here, explained at enough length to count."
    )


def test_package_metadata_becomes_observations(tmp_path: Path) -> None:
    info = tmp_path / "demo_pkg-1.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.2\n"
        "Summary: Talks to demo servers\nAuthor-email: Ada Lovelace <ada@example.org>\n"
        "License-Expression: MPL-2.0\nRequires-Python: >=3.10\n"
        "Classifier: Topic :: Internet :: WWW/HTTP\nClassifier: Programming Language :: Rust\n"
        "Project-URL: Source, https://example.org/demo\n"
        "Requires-Dist: anyio>=3\nRequires-Dist: pytest; extra == 'test'\n"
    )
    dist = importlib.metadata.PathDistribution(info)
    facts = [text for _, _, text in build_kg_eval.package(dist)["facts"]]
    assert facts == [
        "Talks to demo servers",
        "licensed under MPL-2.0",
        "requires Python >=3.10",
        "depends on anyio",  # not pytest: only for an extra
        "written by Ada Lovelace",  # no e-mail address
        "topic: Internet :: WWW/HTTP",
        "implemented in Rust",
        "source code at https://example.org/demo",
        "version 1.2",
    ]


def test_committed_sets_ask_only_for_units_their_stores_hold() -> None:
    (kg,) = ef.kg_stores(ef.SETS / "kg-packages")
    units = {u for u, _ in kg.units}
    assert len(units) == len(kg.units)  # an (entity, observation) pair is one unit
    assert 50 <= len(kg.questions) <= 400
    for q in kg.questions:
        assert q.gold and set(q.gold) <= units, q.id
    (code,) = ef.code_stores(ef.SETS / "code-notes", "code")
    notes = {u for u, _ in code.units}
    assert all(set(q.gold) <= notes and q.code for q in code.questions)
    (plain,) = ef.code_stores(ef.SETS / "code-notes", "code-query")
    assert all(q.code is None for q in plain.questions)


async def test_kg_observations_map_back_to_their_own_entity(tmp_path: Path) -> None:
    """Three packages hold the same observation text; recall's memory ids, mapped through
    the import's export, name the entity, so only the asked one's counts as the answer."""
    data = tmp_path / "set"
    data.mkdir()
    lines = [
        {"type": "entity", "name": n, "entityType": "python-package", "observations": [s, "licensed under MIT"]}
        for n, s in (("alpha", "parses tomato files"), ("beta", "renders cucumber charts"), ("gamma", "zips pepper"))
    ]  # fmt: skip
    (data / "memory.jsonl").write_text("\n".join(json.dumps(x) for x in lines))
    (data / "questions.jsonl").write_text(
        json.dumps({"id": "q", "category": "license", "question": "licensed under MIT",
                    "gold": [["beta", "licensed under MIT"]]}) + "\n"
    )  # fmt: skip
    (store,) = ef.kg_stores(data)
    ef.fill_kg(tmp_path / "cache", data, store)
    assert sorted(store.owner.values()) == sorted(u for u, _ in store.units)
    rows = await ef.run_store(store, "lexical", {})
    (row,) = rows
    ranked = [json.loads(u)[0] for u in row["ranked"] if u]
    assert sorted(ranked) == ["alpha", "beta", "gamma"]  # the three "licensed under MIT"
    assert row["recall@5"] == 1.0
    assert row["hit@1"] == float(ranked[0] == "beta")
    assert row["mrr@10"] == pytest.approx(1 / (ranked.index("beta") + 1))
