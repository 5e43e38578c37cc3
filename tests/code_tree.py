"""A fixed tree of varied source files, and the rows the code index holds for it.

`tree_files` is deterministic: every language's sample from ``test_code_languages``,
each also with comments added, re-indented and wrapped differently, twice in one file,
and cut short (a syntax error); HTML with embedded script and style; and Python
written to stress the outline and the digests (deep nesting, decorators, names
that repeat, non-ASCII names, strings holding comment and whitespace runs, a
long file). `index_rows` reads every file row and symbol row of an index.

``tests/data/code_index_golden.json`` holds those rows as the index of commit
367691c (before issue #42's changes to the parser workers and the writes) made
them; `test_code_index_golden` checks the index still holds the same. Regenerate
it only when the index is meant to change (bump ``index.VERSION`` then)::

    python tests/code_tree.py
"""

from __future__ import annotations

import json
import sqlite3
import sys
import tempfile
from pathlib import Path

GOLDEN = Path(__file__).parent / "data" / "code_index_golden.json"

_PYTHON_STRESS = '''\
"""Module docstring  with   runs of   spaces."""
import os, sys  # two imports
from collections import (
    OrderedDict,
    defaultdict,
)


@decorator(
    "arg",
)
class Outer(Base,  Mixin):
    """Doc."""

    attr: int = 1

    class Inner:
        def method(self, a,
                   b=2) -> "Inner":  # wrapped
            def closure():
                return a   +   b
            return closure

    @property
    def value(self):
        # a comment inside
        return "  # not a comment  "

    async def run(self, *args, **kwargs):
        async with self.lock:
            yield   await  self.step()


def café(naïve: str) -> str:
    return naïve


def duplicate():
    pass


def duplicate():
    return 1


lambda_value = lambda x: x
'''


def _long_python(n: int) -> str:
    parts = []
    for i in range(n):
        parts.append(
            f"class C{i}:\n"
            f"    def m{i}(self, x):\n"
            f"        # note {i}\n"
            f"        if x > {i}:\n"
            f"            return x * {i}\n"
            f"        return [\n            x,\n            {i},\n        ]\n\n\n"
            f"def f{i}(a, b={i}):\n    return C{i}().m{i}(a) + b\n\n\n"
        )
    return "".join(parts)


_HTML = """\
<!doctype html>
<html>
<head>
  <style>
    .card { color: red; }
    @media (max-width: 600px) { .card { color: blue; } }
  </style>
  <script>
    import { render } from "./render.js";
    function mount(el) { return render(el); }
    class Widget { draw() { return 1; } }
  </script>
</head>
<body><div id="app"></div></body>
</html>
"""


def _variants(name: str, source: str) -> dict[str, str]:
    """``source`` as written and four variations of it, keyed by file name."""
    stem, dot, ext = name.rpartition(".")
    stem = stem or name
    lines = source.splitlines(keepends=True)
    cut = "".join(lines[: max(1, (2 * len(lines)) // 3)]) + "(\n"
    return {
        name: source,
        f"{stem}_twice{dot}{ext}": source + "\n" + source,
        f"{stem}_spaced{dot}{ext}": source.replace(", ", ",   ").replace("(", "( "),
        f"{stem}_tabs{dot}{ext}": source.replace("    ", "\t"),
        f"{stem}_cut{dot}{ext}": cut,
    }


def tree_files() -> dict[str, str]:
    """The tree: relative path -> text."""
    sys.path.insert(0, str(Path(__file__).parent))
    from test_code_languages import CASES

    files: dict[str, str] = {}
    for language, (name, source, _) in sorted(CASES.items()):
        for variant, text in _variants(name, source).items():
            files[f"{language}/{variant}"] = text
    files["python/stress.py"] = _PYTHON_STRESS
    files["python/stress_twice.py"] = _PYTHON_STRESS + "\n\n" + _PYTHON_STRESS.replace("    ", "  ")
    files["python/long.py"] = _long_python(300)
    files["web/page.html"] = _HTML
    files["web/empty.py"] = ""
    files["web/only_comments.py"] = "# nothing\n# here\n"
    return files


def index_rows(index_file: Path) -> dict[str, object]:
    """Every file row and symbol row of an index, keyed by path (ids left out)."""
    conn = sqlite3.connect(index_file)
    try:
        out: dict[str, object] = {}
        for fid, path, language, coverage, skipped, digest in conn.execute(
            "SELECT id, path, language, coverage, skipped, digest FROM files ORDER BY path"
        ):
            symbols = conn.execute(
                "SELECT seq, kind, name, lname, tail, start, end, depth, parent, signature, qname, digest"
                " FROM symbols WHERE file = ? ORDER BY seq",
                (fid,),
            ).fetchall()
            out[path] = {
                "language": language,
                "coverage": coverage,
                "skipped": skipped,
                "digest": digest,
                "symbols": [list(row) for row in symbols],
            }
        return out
    finally:
        conn.close()


async def index_tree(root: Path, home: Path, workers: int = 2) -> dict[str, object]:
    """Index ``root`` cold in ``home`` with parser worker processes; its rows."""
    from memtrio.actors.code.standalone import standalone_service

    async with standalone_service(home, workers=workers, name="golden") as (service, _):
        await service.refresh(root)
        index_file = service.index.path
    return index_rows(index_file)


def main() -> None:
    import trio
    from gitrepo import make_repo

    with tempfile.TemporaryDirectory() as tmp:
        root = make_repo(Path(tmp) / "tree", dict(tree_files()))
        home = Path(tmp) / "home"
        home.mkdir()
        rows = trio.run(index_tree, root, home)
    lines = (
        f"{json.dumps(path)}: {json.dumps(row, ensure_ascii=False)}" for path, row in rows.items()
    )
    GOLDEN.write_text("{\n" + ",\n".join(lines) + "\n}\n")  # one file a line
    print(f"{GOLDEN.name}: {len(rows)} files")


if __name__ == "__main__":
    main()
