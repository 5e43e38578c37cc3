#!/usr/bin/env python
"""Build the notes-anchored-to-code evaluation set from this repository at a fixed commit.

The checkout is memtrio's own source at ``--commit`` (``git archive``, so anyone
with the repository's history gets the same files): the files under
``actors/``, ``protocol/`` and ``supervisors/``. Each note is what a coding agent
would write about a symbol it has read: the first paragraph of the symbol's
docstring (whitespace joined, cut at a sentence or word within 300
characters), anchored to that symbol (``code: [{path, symbol}]``, the symbol's
qualified name as ``code_outline`` gives it: ``Class``, ``Class.method``,
``function``). The question is the symbol's name in words, as an agent about to
change it would ask (``CodeService.near`` -> "code service near"), recalled
with ``code=<its file>`` and without; gold = the note about that symbol.

Selection, in path order: public (no leading ``_``) top-level functions,
classes and methods of top-level classes whose docstring's first paragraph
has at least ``MIN_CHARS`` characters, at most ``--per-file`` of them per file
in source order; names whose words would repeat another question are skipped
(one gold per question). Notes are written in that order (a file's notes one
after the other, as an agent reading a file writes them), so a note's
neighbours are notes about the same file.

Usage::

    python tools/build_code_eval.py --out tools/eval_sets/code-notes
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
COMMIT = "ab16a30b25a10e1634eba221e2bd925d54b6de06"  # the code issue #38 measured
FOLDERS = ("actors/", "protocol/", "supervisors/")
MIN_CHARS = 60
PER_FILE = 2
MAX_TEXT = 300
CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def archive(commit: str, repo: Path = ROOT) -> bytes:
    """The tree of ``commit`` as a tar archive (``git archive``)."""
    try:
        return subprocess.run(
            ["git", "-C", str(repo), "archive", "--format=tar", commit],
            check=True,
            capture_output=True,
        ).stdout
    except subprocess.CalledProcessError as exc:
        raise SystemExit(
            f"git archive {commit} failed ({exc.stderr.decode().strip()}): "
            "the evaluation needs the repository's history (not a shallow clone)"
        ) from None


def sources(tar: bytes) -> dict[str, str]:
    """Python files under `FOLDERS` of an archive, path -> text."""
    out: dict[str, str] = {}
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        for member in t.getmembers():
            if member.isfile() and member.name.endswith(".py") and member.name.startswith(FOLDERS):
                f = t.extractfile(member)
                if f is not None:
                    out[member.name] = f.read().decode("utf-8")
    return dict(sorted(out.items()))


def first_paragraph(doc: str) -> str:
    para = " ".join(doc.strip().split("\n\n", 1)[0].split())
    if len(para) <= MAX_TEXT:
        return para
    cut = para[:MAX_TEXT]
    end = cut.rfind(". ")
    return cut[: end + 1] if end >= MIN_CHARS else cut.rsplit(" ", 1)[0] + "..."


def words(qualified: str) -> str:
    """``CodeService.near`` -> "code service near"; ``code_candidates`` -> "code candidates"."""
    parts = [w.lower() for piece in re.split(r"[._]+", qualified) for w in CAMEL.findall(piece)]
    return " ".join(parts)


def symbols(text: str) -> list[tuple[str, str]]:
    """(qualified name, docstring paragraph) of a module's public documented symbols, in order."""
    found: list[tuple[str, str]] = []
    tree = ast.parse(text)

    def take(node: ast.AST, name: str) -> None:
        doc = ast.get_docstring(node)  # type: ignore[arg-type]
        if doc and not name.split(".")[-1].startswith("_"):
            para = first_paragraph(doc)
            if len(para) >= MIN_CHARS:
                found.append((name, para))

    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            take(node, node.name)
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            take(node, node.name)
            for sub in node.body:
                if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef):
                    take(sub, f"{node.name}.{sub.name}")
    return found


def build(
    commit: str, per_file: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    files = sources(archive(commit))
    notes: list[dict[str, Any]] = []
    questions: list[dict[str, Any]] = []
    asked: set[str] = set()
    for path, text in files.items():
        taken = 0
        for name, para in symbols(text):
            question = words(name)
            if taken == per_file or question in asked or len(question.split()) < 2:
                continue
            asked.add(question)
            taken += 1
            nid = f"code/{len(notes):04d}"
            notes.append(
                {"id": nid, "position": len(notes), "path": path, "symbol": name, "content": para}
            )
            questions.append(
                {
                    "id": f"code/q{len(questions):04d}",
                    "question": question,
                    "path": path,
                    "symbol": name,
                    "gold": [nid],
                }
            )
    meta = {
        "name": "code-notes: docstring notes anchored to memtrio's own source at a fixed commit",
        "generator": "tools/build_code_eval.py",
        "commit": commit,
        "folders": list(FOLDERS),
        "per_file": per_file,
        "min_chars": MIN_CHARS,
        "files_with_notes": len({n["path"] for n in notes}),
        "notes": len(notes),
        "questions": len(questions),
    }
    return notes, questions, meta


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--out", required=True, help="directory for notes.jsonl, questions.jsonl, meta.json"
    )
    parser.add_argument("--commit", default=COMMIT, help="the commit whose files are the checkout")
    parser.add_argument("--per-file", type=int, default=PER_FILE, help="notes per file at most")
    args = parser.parse_args()
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--verify", f"{args.commit}^{{commit}}"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    notes, questions, meta = build(commit, args.per_file)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, rows in (("notes.jsonl", notes), ("questions.jsonl", questions)):
        (out / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    (out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(
        f"{meta['notes']} notes in {meta['files_with_notes']} files, {meta['questions']} questions"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
