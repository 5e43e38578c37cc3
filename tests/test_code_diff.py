"""Structural diff on a real Git repository: added, removed, modified and
renamed symbols, renamed and skipped files, what does not count as a change."""

from __future__ import annotations

from pathlib import Path

import pytest
from gitrepo import git, make_repo, write
from memtrio.actors.code.diff import compare, structural_diff
from memtrio.actors.code.extract import outline
from memtrio.protocol.errors import DomainError
from test_code_index import running_service

BASE_SERVICE = """\
import os


class Billing:
    # Charge an amount.
    def charge(self, amount):
        return amount

    def refund(self, amount):
        return -amount


def old_helper():
    return 1


def untouched(x):
    return  x
"""

HEAD_SERVICE = """\
import os


class Billing:
    # Charge an amount, with tax.
    def charge(self, amount):
        return amount

    def refund(self,   amount):

        return -amount


def new_helper():
    return 1


def untouched(x):
    return x


def added(a: int) -> int:
    return a
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = make_repo(
        tmp_path / "repo",
        {
            "app/service.py": BASE_SERVICE,
            "lib/old_name.ex": "defmodule Util do\n  def f(x), do: x\nend\n",
            "gone.rb": "def bye\nend\n",
            "docs/ROADMAP.md": "# plan\n",
        },
    )
    git(root, "checkout", "-q", "-b", "feature")
    write(
        root,
        {
            "app/service.py": HEAD_SERVICE,
            "docs/ROADMAP.md": "# plan\n- more\n",
            "new.go": "package x\n\nfunc Hello() {}\n",
        },
    )
    git(root, "mv", "lib/old_name.ex", "lib/util.ex")
    (root / "gone.rb").unlink()
    git(root, "add", "-A")
    git(root, "commit", "-qm", "feature")
    # main moves on after the branch point: the merge base is what counts
    git(root, "checkout", "-q", "main")
    write(root, {"main_only.py": "def on_main():\n    pass\n"})
    git(root, "add", "-A")
    git(root, "commit", "-qm", "main moves")
    git(root, "checkout", "-q", "feature")
    return root


async def test_structural_diff(repo: Path, home: Path) -> None:
    merge_base = git(repo, "merge-base", "main", "feature")
    head = git(repo, "rev-parse", "HEAD")
    async with running_service(home) as (service, _):
        text = await structural_diff(service.pool, repo, "main", "HEAD", 200)
    assert text.split("\n") == [
        f"merge base {merge_base[:12]} head {head[:12]}",
        "app/service.py\tmodified",
        "  ~ 6-7\tmethod charge\tdef charge(self, amount):",
        "  - 13-14\tfunction old_helper",
        "  + 14-15\tfunction new_helper",
        "  + 22-23\tfunction added\tdef added(a: int) -> int:",
        "gone.rb\tdeleted",
        "  - 1-2\tfunction bye",
        "lib/util.ex\trenamed from lib/old_name.ex",
        "new.go\tadded",
        "  + 3-3\tfunction Hello",
        "skipped (unsupported file type): docs/ROADMAP.md",
    ]


async def test_diff_limit_partial_coverage_and_refusals(repo: Path, home: Path) -> None:
    write(repo, {"broken.py": "def ok():\n    pass\n\ndef broken(:\n    pass\n"})
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "broken")
    async with running_service(home) as (service, _):
        text = await structural_diff(service.pool, repo, "HEAD~1", "HEAD", 200)
        assert text.split("\n")[1:] == [
            "broken.py\tadded\tpartial: syntax error at line 4",
            "  + 1-2\tfunction ok",
            "  + 4-5\tfunction broken\tdef broken(:",
        ]
        limited = await structural_diff(service.pool, repo, "main", "HEAD", 2)
        assert limited.split("\n")[-1] == "2 of 6 changed files"
        for bad in ("--output=/tmp/x", "-p"):
            with pytest.raises(DomainError, match="starts with '-'"):
                await structural_diff(service.pool, repo, bad, "HEAD", 10)
            with pytest.raises(DomainError, match="starts with '-'"):
                await structural_diff(service.pool, repo, "main", bad, 10)
        with pytest.raises(DomainError, match="unknown revision"):
            await structural_diff(service.pool, repo, "no-such-branch", "HEAD", 10)


def test_template_edits_show_on_the_enclosing_definition() -> None:
    before = 'defmodule Web do\n  def render(assigns) do\n    ~H"""\n    <.button>Go</.button>\n    """\n  end\nend\n'
    after = before.replace(
        "<.button>Go</.button>", '<.button>Go</.button>\n    <.link navigate="/x">X</.link>'
    )
    changes = compare(
        outline("elixir", before.encode()), before, outline("elixir", after.encode()), after
    )
    assert changes == ["  ~ 2-7\tfunction render/1\tdef render(assigns) do"]
    heex_before = "<.card>\n  <.title>A</.title>\n</.card>\n<.footer />\n"
    heex_after = heex_before.replace("<.title>A</.title>", "<.title>B</.title>") + "<.banner />\n"
    changes = compare(
        outline("heex", heex_before.encode()),
        heex_before,
        outline("heex", heex_after.encode()),
        heex_after,
    )
    assert changes == ["  ~ 1-3\tcomponent .card", "  + 5-5\tcomponent .banner"]


def test_what_does_not_count_as_a_change() -> None:
    before = "class A:\n    # doc\n    def f(self, x):\n        return x\n\n    def g(self):\n        pass\n"
    spaced = "class A:\n    # doc\n    def f(self,  x):\n        return  x\n\n\n    def g(self):\n        pass\n"
    assert (
        compare(
            outline("python", before.encode()), before, outline("python", spaced.encode()), spaced
        )
        == []
    )
    reindented = before.replace("        return x", "            return x")
    assert compare(
        outline("python", before.encode()),
        before,
        outline("python", reindented.encode()),
        reindented,
    ) == ["  ~ 3-4\tmethod f\tdef f(self, x):"]
    commented = before.replace("# doc", "# changed doc")
    assert compare(
        outline("python", before.encode()), before, outline("python", commented.encode()), commented
    ) == ["  ~ 3-4\tmethod f\tdef f(self, x):"]
    twice = "def f():\n    return 1\n\ndef f():\n    return 2\n"
    edited = twice.replace("return 2", "return 3")
    assert compare(
        outline("python", twice.encode()), twice, outline("python", edited.encode()), edited
    ) == ["  ~ 4-5\tfunction f"]
