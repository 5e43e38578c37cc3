"""`memtrio --help` is complete and matches the docs: every command has a help line,
every option and argument a help text, and the page that documents a command names
the command and every one of its long options."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from memtrio.supervisors.cli import build_parser, main
from memtrio.supervisors.commands import RANKING_FLAGS, STORE_FLAGS

ROOT = Path(__file__).resolve().parent.parent

# The page that documents each top-level command (README.md is the overview).
PAGES = {
    "mcp": ("docs/transports.md", "docs/configuration.md"),
    "serve": ("docs/transports.md",),
    "remember": ("docs/memory.md",),
    "stale": ("docs/memory.md",),
    "context": ("docs/hooks.md",),
    "hook": ("docs/hooks.md",),
    "install": ("docs/hooks.md",),
    "list": ("docs/memory.md",),
    "show": ("docs/memory.md",),
    "search": ("docs/memory.md",),
    "graph": ("docs/memory.md",),
    "forget": ("docs/memory.md",),
    "flush": ("docs/memory.md",),
    "scopes": ("docs/memory.md",),
    "stats": ("docs/memory.md",),
    "doctor": ("docs/memory.md", "docs/operations.md"),
    "export": ("docs/memory.md", "docs/operations.md", "docs/knowledge-graph.md"),
    "import": ("docs/memory.md", "docs/operations.md", "docs/knowledge-graph.md"),
    "reembed": ("docs/recall.md", "docs/operations.md"),
    "code": ("docs/code.md",),
    "chaos": ("docs/reliability.md",),
    "trace": ("docs/operations.md",),
    "ui": ("docs/ui.md",),
    "migrate": ("docs/operations.md",),
}
# Options every command takes, documented once.
COMMON = {
    "--home": "docs/configuration.md",
    "--log-level": "docs/configuration.md",
    # The [store] flags of mcp and serve, documented with their keys.
    **{flag: "docs/configuration.md" for flag in STORE_FLAGS},
    "--store": "docs/configuration.md",
    "--memory-file": "docs/configuration.md",
    # The ranking flags of mcp, serve and search, one per [retrieval] key.
    **{flag: "docs/configuration.md" for flag in RANKING_FLAGS},
}


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def commands(
    parser: argparse.ArgumentParser | None = None, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser, str | None]]:
    """Every command and command group: (its words, its parser, its help line)."""
    parser = parser or build_parser()
    sub = _subparsers(parser)
    if sub is None:
        return
    lines = {choice.dest: choice.help for choice in sub._choices_actions}
    for name, child in sub.choices.items():
        yield (*path, name), child, lines.get(name)
        yield from commands(child, (*path, name))


def runnable() -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    for words, parser, _ in commands():
        if _subparsers(parser) is None:
            yield words, parser


def test_every_command_has_a_help_line() -> None:
    found = list(commands())
    assert len(found) >= 20
    assert [" ".join(words) for words, _, line in found if not line] == []


@pytest.mark.parametrize("words", [w for w, _, _ in commands()], ids=" ".join)
def test_every_command_help_opens_with_a_description(
    words: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    """``memtrio mcp --help`` (and every other command's, groups too) says what the
    command does under its usage, not only in the parent's command list."""
    with pytest.raises(SystemExit):
        main([*words, "--help"])
    out = capsys.readouterr().out
    usage, _, rest = out.partition("\n\n")
    assert usage.startswith("usage: memtrio")
    first = rest.split("\n", 1)[0]
    assert first and not first.startswith(" ") and not first.endswith(":"), (
        f"memtrio {' '.join(words)} --help has no description line: {rest[:200]!r}"
    )


def test_every_option_and_argument_has_a_help_text() -> None:
    missing = [
        f"memtrio {' '.join(words)} {action.option_strings[-1] if action.option_strings else action.dest}"
        for words, parser in runnable()
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction) and not action.help
    ]
    assert missing == []


@pytest.mark.parametrize("words", [w for w, _ in runnable()], ids=" ".join)
def test_help_shows_every_help_text(
    words: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    parser = dict(runnable())[words]
    with pytest.raises(SystemExit):
        main([*words, "--help"])
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    for action in parser._actions:
        if action.help and action.help != argparse.SUPPRESS:
            first = " ".join(action.help.split())[:30].replace("%%", "%")
            assert first in out, f"memtrio {' '.join(words)} --help lacks {first!r}"


def test_every_command_and_long_option_is_documented() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("## Command line", 1)[1].split("\n## ", 1)[0]
    undocumented: list[str] = []
    for words, parser in runnable():
        top = words[0]
        assert top in PAGES, f"memtrio {top}: add the page that documents it to PAGES"
        assert re.search(rf"`(memtrio )?{top}[` ]", table), f"README's table lacks {top}"
        text = "".join((ROOT / page).read_text(encoding="utf-8") for page in PAGES[top])
        command = "memtrio " + " ".join(words)
        if command not in text:
            undocumented.append(f"{command} (in {', '.join(PAGES[top])})")
        for action in parser._actions:
            for option in action.option_strings:
                if not option.startswith("--") or option == "--help":
                    continue
                page = COMMON.get(option)
                where = (ROOT / page).read_text(encoding="utf-8") if page else text
                if option not in where:
                    undocumented.append(f"{command} {option} (in {page or ', '.join(PAGES[top])})")
    assert undocumented == []
