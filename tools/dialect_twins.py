#!/usr/bin/env python
"""How much Python the two storage backends repeat: identical function-body lines.

For each concept module present in both backends (``actors/store/sqlite/X.py`` and
``actors/store/pg/X.py``), the lines of every function body (methods and nested
functions included; the ``def`` line, its parameters, its return annotation, its
decorators and its docstring excluded) are normalised and compared as multisets:
a line counts as many times as it occurs in both files (``min`` of the two counts).

Normalisation, so that a line differing only by dialect spelling still counts:

- leading and trailing whitespace dropped; blank lines and comment-only lines skipped;
- lines made only of brackets and punctuation (``)``, ``],``, ``}``) skipped: they
  match everywhere and say nothing;
- placeholders: ``%(name)s`` and ``%s`` read as ``?``, ``%%`` as ``%``;
- driver calls: ``.native(`` (PostgreSQL's native-dialect call on `PgConnection`)
  reads as ``.execute(``;
- class-name prefixes: ``Pg`` and ``Sqlite`` before a capitalised name (``PgGraph``,
  ``SqliteGraph``) read as one prefix.

Usage::

    python tools/dialect_twins.py          # the total, then per module
    python tools/dialect_twins.py --lines  # and the shared lines themselves

``tests/test_storage_boundary.py`` holds the total under its ceiling.
"""

from __future__ import annotations

import argparse
import ast
import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STORE = ROOT / "actors" / "store"
BACKENDS = ("sqlite", "pg")

_PUNCTUATION = re.compile(r"^[\s()\[\]{},:;]*$")
_NAMED = re.compile(r"%\([A-Za-z_][A-Za-z0-9_]*\)s")
_PREFIX = re.compile(r"\b(?:Pg|Sqlite)(?=[A-Z])")


def normalise(line: str) -> str | None:
    """``line`` in its dialect-neutral spelling; None for a line that never counts."""
    text = line.strip()
    if not text or text.startswith("#") or _PUNCTUATION.match(text):
        return None
    text = _NAMED.sub("?", text).replace("%s", "?").replace("%%", "%")
    text = text.replace(".native(", ".execute(")
    return _PREFIX.sub("Backend", text)


def body_lines(source: str) -> list[int]:
    """The 1-based numbers of ``source``'s function-body lines (signatures, decorators and
    docstrings excluded; a nested function's body is its parent's too, counted once)."""
    tree = ast.parse(source)
    body: set[int] = set()
    outside: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        first = node.body[0]
        start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        outside.update(range(start, first.lineno))
        doc = ast.get_docstring(node, clean=False)
        stmts = node.body
        if doc is not None and isinstance(first, ast.Expr):
            outside.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
            stmts = node.body[1:]
        for stmt in stmts:
            body.update(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
    return sorted(body - outside)


def normalised_body(path: Path) -> Counter[str]:
    """The normalised body lines of ``path``, counted."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    found: Counter[str] = Counter()
    for number in body_lines(source):
        text = normalise(lines[number - 1])
        if text is not None:
            found[text] += 1
    return found


def twins(store: Path = STORE) -> dict[str, Counter[str]]:
    """The identical normalised body lines of each concept module both backends have."""
    sqlite, pg = (store / b for b in BACKENDS)
    shared = sorted(
        p.name for p in sqlite.glob("*.py") if p.name != "__init__.py" and (pg / p.name).exists()
    )
    return {name: normalised_body(sqlite / name) & normalised_body(pg / name) for name in shared}


def total(store: Path = STORE) -> int:
    """The identical body lines of all concept modules (the issue's measure)."""
    return sum(sum(c.values()) for c in twins(store).values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", action="store_true", help="print the shared lines too")
    args = parser.parse_args()
    found = twins()
    print(f"identical body lines: {sum(sum(c.values()) for c in found.values())}")
    for name, lines in sorted(found.items(), key=lambda kv: -sum(kv[1].values())):
        print(f"  {sum(lines.values()):4d}  {name}")
        if args.lines:
            for text, n in sorted(lines.items()):
                print(f"        {n} x {text}")


if __name__ == "__main__":
    main()
