#!/usr/bin/env python
"""How well the store's secret detector (``memtrio.protocol.secrets``) finds credentials,
and what it takes for one that is not.

- **Recall** on ``tests/data/secrets/corpus.json`` (built by ``tools/secret_corpus.py``
  from the test data of detect-secrets and gitleaks): the share of the lines labelled
  secret in which `find_secrets` finds one, per scanner and per test file (per rule).
- **Lines labelled not secret** in that corpus that it flags: for information (those
  labels belong to each scanner's own rules, e.g. an AWS key one character too long).
- **False positives** where there must be none: the notes of
  ``../shared/eval/faq-notes-dev`` (when present) and this repository's own docs
  (``docs/*.md``, ``README.md``); each detection is listed.
- **Cost**: CPU seconds (``time.process_time``, so that other processes on a shared
  machine do not count) to scan 250 kB of adversarial text (long runs of what the patterns
  match) and 1 MB (the largest memory), whose ratio (4 when linear) shows the scan is
  linear.

Usage::

    python tools/eval_secrets.py [--out docs/bench-runs/eval-secrets.txt] [--misses]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from memtrio.protocol.secrets import find_secrets

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "secrets" / "corpus.json"
NOTES = ROOT.parent / "shared" / "eval" / "faq-notes-dev" / "notes.jsonl"
ADVERSARIAL = {
    "one letter": "a",
    "key names": "_key=",
    "JWT starts": "eyJ",
    "PEM headers": "-----BEGIN RSA PRIVATE KEY-----",
    "URL userinfo": "https://a:",
    "quotes": '"',
}


def load_corpus(path: Path = CORPUS) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["cases"]
    return cases


def recall(cases: list[dict[str, Any]]) -> dict[str, Any]:
    """Recall over the secrets of ``cases``, overall, per scanner and per source file;
    the misses; how many lines labelled not secret are flagged."""
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # source -> [found, secrets]
    misses, flagged, negatives = [], [], 0
    for case in cases:
        found = bool(find_secrets(case["text"]))
        scanner, rest = case["source"].split(":", 1)
        where = rest.split("::", 1)[0].rsplit("/", 1)[-1]
        if case["secret"]:
            for key in ("all", scanner, f"{scanner}:{where}"):
                per[key][0] += found
                per[key][1] += 1
            if not found:
                misses.append(case)
        else:
            negatives += 1
            if found:
                flagged.append(case)
    return {"per": dict(per), "misses": misses, "flagged": flagged, "negatives": negatives}


def doc_texts() -> list[tuple[str, str]]:
    """(name, text) of this repository's docs and README."""
    paths = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
    return [(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8")) for p in paths]


def note_texts(path: Path = NOTES) -> list[tuple[str, str]]:
    """(id, content) of the faq-notes-dev notes; none when the shared data is absent."""
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return [(row["id"], row["content"]) for row in rows]


def detections(texts: list[tuple[str, str]]) -> list[str]:
    """Each secret found in ``texts``, as ``name: kind at offset``."""
    return [f"{name}: {f.kind} at {f.start}" for name, text in texts for f in find_secrets(text)]


def scan_seconds(unit: str, size: int) -> float:
    text = unit * (size // len(unit))
    start = time.process_time()
    find_secrets(text)
    return time.process_time() - start


def report(show_misses: bool) -> str:
    cases = load_corpus()
    result = recall(cases)
    per = result["per"]
    lines = ["Secret detection (memtrio.protocol.secrets), tools/eval_secrets.py", ""]
    lines.append(f"corpus: {CORPUS.relative_to(ROOT)}, {len(cases)} lines")
    for key in ("all", "detect-secrets", "gitleaks"):
        found, total = per[key]
        lines.append(f"recall {key:15} {found:4}/{total:<4} = {found / total:.3f}")
    lines += ["", "per source file (found/secrets):"]
    files = sorted(k for k in per if k.count(":") == 1 and k not in ("all",))
    lines += [f"  {k:48} {per[k][0]:3}/{per[k][1]:<3}" for k in files]
    lines += [
        "",
        f"lines labelled not secret by their scanner that are flagged: "
        f"{len(result['flagged'])}/{result['negatives']} (for information)",
    ]
    notes, docs = note_texts(), doc_texts()
    for label, texts in (("faq-notes-dev notes", notes), ("docs/*.md and README.md", docs)):
        found_here = detections(texts)
        lines.append(f"false positives on {label} ({len(texts)} texts): {len(found_here)}")
        lines += [f"  {d}" for d in found_here]
    lines += ["", "scan cost (CPU seconds; 1 MB / 250 kB is 4 when linear):"]
    for name, unit in ADVERSARIAL.items():
        small, large = scan_seconds(unit, 250_000), scan_seconds(unit, 1_000_000)
        lines.append(
            f"  {name:14} 250 kB {small:5.2f}   1 MB {large:5.2f}   ratio {large / small:4.1f}"
        )
    if show_misses:
        lines += ["", "misses:"]
        lines += [f"  {m['source']}: {m['text'][:100]!r}" for m in result["misses"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="also write the report to this file")
    parser.add_argument("--misses", action="store_true", help="list the secrets not found")
    args = parser.parse_args(argv)
    text = report(args.misses)
    sys.stdout.write(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
