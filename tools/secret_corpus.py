#!/usr/bin/env python
"""Build the corpus ``tools/eval_secrets.py`` measures: real secret formats from the test
data of two maintained secret scanners, written to ``tests/data/secrets/corpus.json``.

- **detect-secrets** (Yelp, Apache-2.0): every ``@pytest.mark.parametrize`` case of
  ``tests/plugins/*_test.py`` that labels a line (``should_flag``, ``expected_secret``,
  or a list of lines all flagged), evaluated in the test module's own namespace; the
  ``ip_public`` plugin's cases are left out (a public IP address is no credential), and so
  is a line that two cases label differently (a plugin's file-extension rules).
- **gitleaks** (MIT): the literal elements of every rule's ``tps`` list (the true
  positives each rule is tested on) in ``cmd/generate/config/rules/*.go``; generated
  samples (``utils.GenerateSampleSecret(...)``) and lines marked ``gitleaks:allow`` are
  left out.

Each case keeps its source (``repo:path::test``). Lines over `MAX_TEXT` characters are
dropped (one detect-secrets negative of 32 kB), so the committed file stays small.

Usage::

    python tools/secret_corpus.py DETECT_SECRETS_CHECKOUT GITLEAKS_CHECKOUT
"""

from __future__ import annotations

import ast
import base64
import json
import random
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "secrets" / "corpus.json"
MAX_TEXT = 4000


def _commit(checkout: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def _show(checkout: Path, path: str) -> str:
    return subprocess.run(
        ["git", "-C", str(checkout), "show", f"HEAD:{path}"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip


def _files(checkout: Path, under: str) -> list[str]:
    listing = subprocess.run(
        ["git", "-C", str(checkout), "ls-tree", "-r", "--name-only", "HEAD", under],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return sorted(listing.split())


def _label(row: dict[str, Any], fields: list[str]) -> bool | None:
    if "should_flag" in row:
        return bool(row["should_flag"])
    if "expected_secret" in row:
        return row["expected_secret"] is not None
    return True if len(fields) == 1 else None


def _module_namespace(tree: ast.Module, where: str) -> dict[str, Any]:
    """The test module's constants and helper functions (what its cases are built from)."""
    ns: dict[str, Any] = {"textwrap": textwrap, "base64": base64, "randint": random.randint}
    random.seed(0)
    for node in tree.body:
        helper = isinstance(node, ast.FunctionDef) and not node.decorator_list
        if isinstance(node, ast.Assign) or helper:
            try:
                exec(compile(ast.Module([node], []), where, "exec"), ns)  # noqa: S102 - the scanner's own test data
            except Exception:  # noqa: BLE001, S112 - a constant needing the scanner itself
                continue
    return ns


def detect_secrets_cases(checkout: Path) -> list[dict[str, Any]]:  # noqa: C901
    rows: list[dict[str, Any]] = []
    for path in _files(checkout, "tests/plugins"):
        if not path.endswith("_test.py") or "ip_public" in path:
            continue
        tree = ast.parse(_show(checkout, path))
        ns = _module_namespace(tree, path)
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef):
                continue
            for dec in node.decorator_list:
                if not (
                    isinstance(dec, ast.Call) and getattr(dec.func, "attr", "") == "parametrize"
                ):
                    continue
                if not isinstance(dec.args[0], ast.Constant) or not isinstance(
                    dec.args[0].value, str
                ):
                    continue
                fields = [n.strip() for n in dec.args[0].value.split(",")]
                try:
                    cases = eval(compile(ast.Expression(dec.args[1]), path, "eval"), ns)  # noqa: S307
                except Exception:  # noqa: BLE001, S112 - cases needing the scanner itself
                    continue
                for case in cases:
                    values = case if isinstance(case, tuple) and len(fields) > 1 else (case,)
                    row = dict(zip(fields, values, strict=False))
                    text = row.get("line", row.get("payload", row.get("file_content")))
                    label = _label(row, fields)
                    if isinstance(text, str) and label is not None:
                        rows.append(
                            {
                                "source": f"detect-secrets:{path}::{node.name}",
                                "text": text,
                                "secret": label,
                            }
                        )
    labels: dict[str, set[bool]] = {}
    for row in rows:
        labels.setdefault(row["text"], set()).add(row["secret"])
    return [r for r in rows if len(labels[r["text"]]) == 1]


def _go_literal(src: str, j: int) -> tuple[str, int]:
    """The Go string literal at ``src[j]`` and the index after it."""
    if src[j] == "`":
        k = src.index("`", j + 1)
        return src[j + 1 : k], k + 1
    k, raw = j + 1, ""
    while src[k] != '"':
        step = 2 if src[k] == "\\" else 1
        raw += src[k : k + step]
        k += step
    return json.loads(f'"{raw}"'), k + 1


def _elements(src: str, i: int) -> list[str]:
    """The literals that are whole elements (no ``+``, not a call's argument) of the list
    or call opening at ``src[i]``."""
    depth, out, j, prev = 0, [], i, ""
    while j < len(src):
        c = src[j]
        if src.startswith("//", j):
            j = src.find("\n", j)
            continue
        if c in "({)}":
            depth += 1 if c in "({" else -1
            prev, j = c, j + 1
            if depth == 0:
                return out
            continue
        if c in '`"':
            value, k = _go_literal(src, j)
            after = re.sub(r"^\s*(//[^\n]*\n\s*)*", "", src[k:])
            if depth == 1 and prev in "({," and after[:1] in (",", ")", "}"):
                out.append(value)
            prev, j = "L", k
            continue
        prev = prev if c.isspace() else c
        j += 1
    return out


def gitleaks_cases(checkout: Path) -> list[dict[str, Any]]:
    rows = []
    for path in _files(checkout, "cmd/generate/config/rules"):
        if not path.endswith(".go"):
            continue
        src = _show(checkout, path)
        for m in re.finditer(r"\btps\s*(:=\s*\[\]string\s*\{|=\s*append\(tps,)", src):
            start = m.end() - 1 if m.group(1).endswith("{") else src.index("(", m.start())
            for text in _elements(src, start):
                if text.strip() and "gitleaks:allow" not in text:
                    rows.append({"source": f"gitleaks:{path}::tps", "text": text, "secret": True})
    return rows


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    ds, gl = Path(argv[0]), Path(argv[1])
    cases: list[dict[str, Any]] = []
    seen: set[str] = set()
    for row in [*detect_secrets_cases(ds), *gitleaks_cases(gl)]:
        if row["text"] not in seen and len(row["text"]) <= MAX_TEXT:
            seen.add(row["text"])
            cases.append(row)
    corpus = {
        "about": "real secret formats from two maintained secret scanners' test data (tools/secret_corpus.py)",
        "sources": [
            {"name": "detect-secrets", "repository": "https://github.com/Yelp/detect-secrets",
             "commit": _commit(ds), "license": "Apache-2.0", "files": "tests/plugins/*_test.py"},
            {"name": "gitleaks", "repository": "https://github.com/gitleaks/gitleaks",
             "commit": _commit(gl), "license": "MIT", "files": "cmd/generate/config/rules/*.go (tps)"},
        ],
        "cases": cases,
    }  # fmt: skip
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(corpus, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    positives = sum(c["secret"] for c in cases)
    print(f"{OUT.relative_to(ROOT)}: {len(cases)} cases, {positives} secrets")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
