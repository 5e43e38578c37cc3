"""Code anchors from the command line, and which edits make a memory stale (issue #39,
items 1 and 2).

1. ``memtrio remember`` ran without the code feature: after ``memtrio code index``,
   ``remember "The file app/retry.py and RetryPolicy.backoff matter"`` stored no
   anchor and said nothing, where the ``remember`` tool stores two. It now follows
   the tool's rules: anchors found in the text, ``--code PATH[:SYMBOL]``, the same
   refusals and warnings; ``memtrio search --code`` is recall's ``code``.
2. A memory anchored to ``RetryPolicy.backoff`` (and, found in its text, to its file)
   was reported stale after an edit to another function of the file. A file anchor
   no longer counts where the memory names symbols of that file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gitrepo import make_repo
from mcp_client import run_cli

RETRY = (
    "class RetryPolicy:\n"
    "    def backoff(self, attempt):\n"
    "        return 2 ** attempt\n"
    "\n"
    "    def jitter(self):\n"
    "        return 0\n"
)


def cli_json(*args: str, home: Path, cwd: Path) -> Any:
    done = run_cli(*args, "--json", home=home, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def anchors_of(memory: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(a["path"], a["symbol"], a.get("status", "")) for a in memory.get("code", [])]


def test_remember_from_the_cli_anchors_code_as_the_tool_does(tmp_path: Path, home: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"app/retry.py": RETRY})
    text = "The file app/retry.py and RetryPolicy.backoff matter"
    found = cli_json("remember", text, home=home, cwd=repo)
    assert anchors_of(found) == [
        ("app/retry.py", "", "fresh"),
        ("app/retry.py", "RetryPolicy.backoff", "fresh"),
    ], found
    given = cli_json(
        "remember", "jitter is zero for now", "--code", "app/retry.py:RetryPolicy.jitter",
        home=home, cwd=repo,
    )  # fmt: skip
    assert anchors_of(given) == [("app/retry.py", "RetryPolicy.jitter", "fresh")], given
    plain = run_cli("remember", "RetryPolicy.backoff doubles", "--code", "", home=home, cwd=repo)
    assert plain.returncode == 0 and "code:" not in plain.stdout, plain.stdout
    human = run_cli("remember", "see app/retry.py", home=home, cwd=repo)
    assert human.returncode == 0 and "code:     app/retry.py  fresh" in human.stdout, human.stdout
    stats = cli_json("stats", home=home, cwd=repo)
    assert stats["anchors"] == 4, stats
    # The tool's refusals, in one line, nothing stored.
    missing = run_cli("remember", "gone", "--code", "app/nope.py", home=home, cwd=repo)
    assert missing.returncode == 1 and "no such file in the checkout: app/nope.py" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1, missing.stderr
    elsewhere = tmp_path / "plain"
    elsewhere.mkdir()
    outside = run_cli("remember", "x", "--code", "app/retry.py", home=home, cwd=elsewhere)
    assert outside.returncode == 1 and "need the session's repository" in outside.stderr
    assert cli_json("stats", home=home, cwd=repo)["memories"] == 4
    # search --code is recall's code argument: the memory anchored to jitter comes first.
    hits = cli_json(
        "search", "RetryPolicy", "--code", "app/retry.py:RetryPolicy.jitter", "--lexical",
        home=home, cwd=repo,
    )  # fmt: skip
    assert hits["memories"][0]["id"] == given["id"], hits


def test_an_edit_elsewhere_in_the_file_does_not_make_a_symbol_memory_stale(
    tmp_path: Path, home: Path
) -> None:
    repo = make_repo(tmp_path / "repo", {"app/retry.py": RETRY})
    symbol = cli_json(
        "remember", "The file app/retry.py and RetryPolicy.backoff matter", home=home, cwd=repo
    )
    whole = cli_json("remember", "app/retry.py holds the retry rules", home=home, cwd=repo)
    assert anchors_of(whole) == [("app/retry.py", "", "fresh")], whole
    (repo / "app/retry.py").write_text(RETRY.replace("return 0", "return 1"))
    shown = cli_json("show", str(symbol["id"]), home=home, cwd=repo)
    assert ("app/retry.py", "", "changed") in anchors_of(shown)  # the file did change
    assert not shown.get("stale"), shown  # ... but not the symbol it is about
    stale = cli_json("stale", home=home, cwd=repo)
    assert [m["id"] for m in stale] == [whole["id"]], stale
    (repo / "app/retry.py").write_text(RETRY.replace("2 ** attempt", "3 ** attempt"))
    stale = cli_json("stale", home=home, cwd=repo)
    assert sorted(m["id"] for m in stale) == sorted([symbol["id"], whole["id"]]), stale
