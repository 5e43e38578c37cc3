"""Rows of the reference systems (graphmem, mcp-memory) that memtrio now matches, each
through a real process: the official MCP client on ``memtrio mcp``, or the CLI.

- an invalid ``[code]`` setting: one warning, the server starts with the memory tools;
- ``warnings`` always present in ``remember``, ``recall`` and ``relate`` results;
- ``--embedding-batch-size`` and ``--retrieval-*`` flags, the environment winning;
- a command that fails on loading the model says so in the trace log;
- ``code_diff`` ignores the separators between nested symbols wherever they sit;
- the reference's ``EMBEDDING_REVISION`` / ``EMBEDDING_CACHE_DIR`` accepted with a warning;
- ``--vec-index`` defaults to hnsw; ``--memory-file`` / ``-f`` names the store file.
"""

from __future__ import annotations

from pathlib import Path

from gitrepo import git, make_repo, write
from mcp_client import run_cli

JS_BASE = """\
export const api = {
  load() {
    return fetch("/a")
  },
  save(item) {
    return post("/a", item)
  }
}
"""
# A trailing `,` after the last method: no symbol changed.
JS_TRAILING = JS_BASE.replace(
    '    return post("/a", item)\n  }\n', '    return post("/a", item)\n  },\n'
)
# The separator moved from `},` to a leading `,` on the next line: no symbol changed.
JS_LEADING = JS_BASE.replace("  },\n  save(item) {", "  }\n  , save(item) {")
# A property gains the `,` that a method added after it needs: only the method is new.
JS_PROPERTY = "export const cfg = {\n  retries: 3\n}\n"
JS_PROPERTY_METHOD = "export const cfg = {\n  retries: 3,\n  reset() {\n    return 0\n  }\n}\n"
TS_INTERFACE = "export interface Shape {\n  area(): number;\n  name: string;\n}\n"
TS_INTERFACE_COMMAS = "export interface Shape {\n  area(): number,\n  name: string,\n}\n"
# Members that are not symbols: a Rust struct's last field, a C enum in leading-comma style.
RUST_STRUCT = "pub struct Point {\n    pub x: f64,\n    pub y: f64\n}\n"
RUST_STRUCT_TRAILING = RUST_STRUCT.replace("pub y: f64\n", "pub y: f64,\n")
C_ENUM = "enum color {\n  RED,\n  GREEN\n};\n"
C_ENUM_LEADING = "enum color {\n  RED\n  , GREEN\n};\n"
# Python keeps its commas: a trailing `,` makes a tuple.
PY_DEF = "def pair():\n    return 1\n"
PY_TUPLE = "def pair():\n    return 1,\n"


def _diff(tmp_path: Path, home: Path, before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The symbol lines of ``memtrio code diff main HEAD`` after a commit from ``before``
    to ``after`` on a branch of a real repository."""
    repo = make_repo(tmp_path / "repo", before)
    git(repo, "checkout", "-q", "-b", "feature")
    write(repo, after)
    git(repo, "commit", "-qam", "separators")
    done = run_cli("code", "diff", "main", "HEAD", home=home, cwd=repo)
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if line.startswith("  ")]


def test_code_diff_ignores_separators_moved_between_nested_symbols(
    tmp_path: Path, home: Path
) -> None:
    before = {
        "api.js": JS_BASE,
        "moved.js": JS_BASE,
        "cfg.js": JS_PROPERTY,
        "shape.ts": TS_INTERFACE,
        "point.rs": RUST_STRUCT,
        "color.c": C_ENUM,
    }
    after = {
        "api.js": JS_TRAILING,
        "moved.js": JS_LEADING,
        "cfg.js": JS_PROPERTY_METHOD,
        "shape.ts": TS_INTERFACE_COMMAS,
        "point.rs": RUST_STRUCT_TRAILING,
        "color.c": C_ENUM_LEADING,
    }
    # The one real change: the method added to cfg.
    assert _diff(tmp_path, home, before, after) == ["  + 3-5\tmethod reset"]


def test_code_diff_still_sees_edits_next_to_separators(tmp_path: Path, home: Path) -> None:
    edited = JS_TRAILING.replace('post("/a", item)', 'post("/b", item)')
    before = {"api.js": JS_BASE, "pair.py": PY_DEF}
    after = {"api.js": edited, "pair.py": PY_TUPLE}
    assert _diff(tmp_path, home, before, after) == [
        "  ~ 5-7\tmethod save\tsave(item) {",
        "  ~ 1-2\tfunction pair",
    ]
