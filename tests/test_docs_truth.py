"""The numbers and commands of the docs are true (issue 32, item 11: the README's memory
figures were low, docs/operations.md showed schema version 5 when the store was at 6,
docs/transports.md named a `memtrio recall` command that does not exist, `--vec-backend`'s
help named the wrong default, and the WebSocket snippet did not run as written).

- Every ``memtrio ...`` command of README.md and docs/*.md parses: those of shell blocks
  in full, with their arguments; those quoted inline (`` `memtrio search` ``) name a
  command and options it has. A failure names the page and line.
- A figure (a number with a unit: s, ms, MB, MiB) in a sentence or table row that
  names a raw output under docs/bench-runs/ is in that output, as printed or rounded to
  the figure's decimals.
- The ``memtrio doctor`` output shown in docs/operations.md has the keys and schema
  versions of a real one; each flag's help names the configuration's real default.
- The WebSocket client of docs/transports.md runs as written against ``memtrio serve
  --transport ws`` (its port the only change).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
import zygote
from launch import server_env
from memtrio.supervisors import cli, commands, config
from memtrio.supervisors.hoist import hoist_options

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
SHELL = ("sh", "bash", "shell", "console")
SPAN = re.compile(r"`(memtrio [^`]+)`")
# A synopsis, not a command: placeholders, alternatives, optional parts.
SYNOPSIS = re.compile(r"[\[\]<>{}]|\.\.\.|\\\||(?<![\w-])[A-Z][A-Z_]+\b|\bN\b|\bT\b")


def where(page: Path, line: int) -> str:
    return f"{page.relative_to(ROOT)}:{line}"


# -- commands ------------------------------------------------------------------------------


def shell_commands(page: Path) -> Iterator[tuple[int, str]]:
    """(line, command) of every ``memtrio`` command in the page's shell blocks."""
    text = page.read_text(encoding="utf-8")
    for block in FENCE.finditer(text):
        if block.group(1) not in SHELL:
            continue
        first = text.count("\n", 0, block.start(2)) + 1
        for n, line in enumerate(block.group(2).splitlines()):
            for part in re.split(r"\|\||&&|\||;|\$\(", line):
                words = part.strip().removeprefix("$ ")
                words = re.sub(r"^(\w+=\S*\s+)+", "", words)  # VAR=value before it
                if words == "memtrio" or words.startswith("memtrio "):
                    yield first + n, words


def inline_commands(page: Path) -> Iterator[tuple[int, str]]:
    """(line, command) of every `` `memtrio ...` `` quoted in the page's prose."""
    for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        for span in SPAN.findall(line):
            if not span.split()[1].endswith(":"):  # output (`memtrio serve: listening...`)
                yield n, span


def parse(words: list[str]) -> str | None:
    """The parser's complaint about ``memtrio WORDS``, or None if it parses."""
    err = io.StringIO()
    words = hoist_options(words, cli.build_parser, cli.OWN_COMMANDS + cli.COMMANDS)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            cli.build_parser(cli.command_of(words)).parse_args(words)
    except SystemExit as exc:
        if exc.code:
            return err.getvalue().strip().splitlines()[-1]
    return None


def subparser(words: list[str]) -> tuple[argparse.ArgumentParser | None, list[str]]:
    """The parser of the (sub)command ``words`` start with, and the words after it."""
    parser: argparse.ArgumentParser = cli.build_parser(cli.command_of(words))
    rest = list(words)
    while rest and not rest[0].startswith("-"):
        choices = next(
            (
                a.choices
                for a in parser._actions
                if isinstance(a, argparse._SubParsersAction) and a.choices
            ),
            None,
        )
        if choices is None:
            break
        if rest[0] not in choices:
            return None, rest
        parser = choices[rest.pop(0)]
    return parser, rest


def names_a_command(words: list[str]) -> str | None:
    """Why the quoted ``memtrio WORDS`` is not a command with those options, or None
    (options before the command are the command's, as `cli.main` reads them)."""
    words = hoist_options(words, cli.build_parser, cli.OWN_COMMANDS + cli.COMMANDS)
    parser, rest = subparser(words)
    if parser is None:
        return f"no command {' '.join(words[: len(words) - len(rest) + 1])!r}"
    options = {o for a in parser._actions for o in a.option_strings}
    unknown = [
        w.split("=")[0] for w in rest if w.startswith("--") and w.split("=")[0] not in options
    ]
    return f"{parser.prog} takes no {', '.join(unknown)}" if unknown else None


def test_every_memtrio_command_in_the_docs_parses() -> None:
    problems: list[str] = []
    checked = 0
    for page in PAGES:
        for line, command in shell_commands(page):
            if SYNOPSIS.search(command):
                continue
            words = [w for w in shlex.split(command, comments=True)[1:] if w != "&"]
            checked += 1
            complaint = parse(words)
            if complaint:
                problems.append(f"{where(page, line)}: {command}: {complaint}")
        for line, command in inline_commands(page):
            if SYNOPSIS.search(command):
                continue
            checked += 1
            complaint = names_a_command(shlex.split(command)[1:])
            if complaint:
                problems.append(f"{where(page, line)}: `{command}`: {complaint}")
    assert checked > 200
    assert problems == []


def test_the_command_check_catches_what_it_should(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "Use `memtrio recall` or `memtrio search --no-such-flag`.\n\n"
        "```sh\nmemtrio serve --transport carrier-pigeon\necho x | memtrio mcp\n```\n"
    )
    spans = [names_a_command(shlex.split(c)[1:]) for _, c in inline_commands(page)]
    assert spans[0] == "no command 'recall'" and "takes no --no-such-flag" in (spans[1] or "")
    lines = list(shell_commands(page))
    assert [n for n, _ in lines] == [4, 5]
    assert "invalid choice" in (parse(shlex.split(lines[0][1])[1:]) or "")
    assert parse(shlex.split(lines[1][1])[1:]) is None


# -- figures quoted from docs/bench-runs ---------------------------------------------------

RUN = re.compile(r"(?:docs/)?bench-runs/[\w.{},/-]*\w")
FIGURE = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)\s?(ms|s|MB|MiB)\b")
NUMBER = re.compile(r"\d+(?:\.\d+)?")
BOUND = re.compile(r"(?:under|below|within|at most|at least|over|<=|>=|<|>)\s*$")


def expand(path: str) -> list[str]:
    """``a-{x,y}.txt`` -> ``a-x.txt``, ``a-y.txt``."""
    match = re.search(r"\{([^{}]*)\}", path)
    if match is None:
        return [path]
    return [
        e
        for choice in match.group(1).split(",")
        for e in expand(path[: match.start()] + choice + path[match.end() :])
    ]


# Where a sentence ends: a figure is checked against the run its own sentence names.
SENTENCE = re.compile(r"(?<=[.:;])\s+(?=[A-Z(`])")


def blocks(text: str) -> Iterator[tuple[int, str]]:
    """(first line, text) of each sentence, and of each row of a table, outside code."""
    line = 1
    for chunk in re.split(r"(\n\s*\n)", text):
        if chunk.strip() and not chunk.lstrip().startswith("```"):
            rows = chunk.splitlines()
            if rows and all(r.lstrip().startswith("|") for r in rows if r.strip()):
                for k, row in enumerate(rows):
                    yield line + k, row
            else:
                for sentence in SENTENCE.split(chunk):
                    yield line + chunk[: chunk.find(sentence)].count("\n"), sentence
        line += chunk.count("\n")


def numbers_of(run: str) -> set[float]:
    path = ROOT / "docs" / run.removeprefix("docs/")
    if not path.is_file() or path.suffix == ".gz":
        return set()
    text = path.read_text(encoding="utf-8", errors="replace").replace(",", "")
    return {float(n) for n in NUMBER.findall(text)}


def unquoted(block: str) -> list[str]:
    """The figures of ``block`` that are not in the bench-runs files it names."""
    runs = [e for found in RUN.findall(block) for e in expand(found.rstrip(".,)"))]
    if not runs:
        return []
    printed = set().union(*(numbers_of(r) for r in runs))
    if not printed:
        return []
    missing = []
    for found in FIGURE.finditer(block):
        value, unit = found.groups()
        if BOUND.search(block[: found.start()]):
            continue  # a bound ("under 100 ms"), not a figure of the run
        figure = float(value.replace(",", ""))
        decimals = len(value.split(".")[1]) if "." in value else 0
        if not any(round(n * scale, decimals) == figure for n in printed for scale in (1, 1000)):
            missing.append(f"{value} {unit}")
    return missing


def test_every_figure_beside_a_bench_run_is_in_that_run() -> None:
    problems: list[str] = []
    for page in PAGES:
        name = str(page.relative_to(ROOT))
        for line, block in blocks(page.read_text(encoding="utf-8")):
            for figure in unquoted(block):
                problems.append(f"{name}:{line}: {figure} is not in {RUN.findall(block)}")
    assert problems == []


def test_the_readme_and_attach_figures_are_checked_against_their_run() -> None:
    """The footprint the README quotes is next to the run it comes from (so the check
    above covers it), and a figure that is not in the run is caught."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (row,) = [b for _, b in blocks(readme) if b.startswith("| runtime and footprint")]
    assert "bench-runs/attach.txt" in row and FIGURE.search(row)
    assert unquoted(row) == []
    assert unquoted(row.replace("31 MiB", "37 MiB")) == ["37 MiB"]


# -- what the docs show of memtrio's own output and defaults ----------------------------------


def test_the_doctor_output_in_the_operations_doc_is_a_real_one(tmp_path: Path) -> None:
    doc = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    shown = next(b for tag, b in FENCE.findall(doc) if tag == "text" and "schema_version" in b)
    env = server_env(tmp_path / "home", {"MEMTRIO_CODE": "off"})
    subprocess.run(
        zygote.command(["remember", "one"]), env=env, cwd=tmp_path, check=True, timeout=60
    )
    real = subprocess.run(
        zygote.command(["doctor"]),
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout

    def fields(text: str) -> dict[str, str]:
        return dict(line.split(": ", 1) for line in text.strip().splitlines())

    shown_fields, real_fields = fields(shown), fields(real)
    assert list(shown_fields) == list(real_fields)
    for key in ("latest_schema_version", "schema_version", "journal_mode", "status"):
        assert shown_fields[key] == real_fields[key], key


def runnable_options() -> Iterator[argparse.Action]:
    for name in ("mcp", "serve"):
        parser, _ = subparser([name])
        assert parser is not None
        yield from parser._actions


def test_each_flag_help_names_the_real_default() -> None:
    defaults = config.Config()
    flag_keys = {flag: key for key, flag in commands.FLAGS.items()}
    wrong: list[str] = []
    named = 0
    for action in runnable_options():
        match = re.search(r"\(default ([\w.,]+)", action.help or "")
        key = next((flag_keys[o] for o in action.option_strings if o in flag_keys), None)
        if match is None or key is None:
            continue
        named += 1
        real = getattr(getattr(defaults, key[0]), key[1])
        if isinstance(real, bool):
            real = "on" if real else "off"
        said = match.group(1).rstrip(",.").replace(",", "")
        if said != str(real):
            wrong.append(f"{action.option_strings[0]}: help says {said}, default is {real}")
    assert named >= 10
    assert wrong == []


# -- the WebSocket client of docs/transports.md ----------------------------------------------


def test_the_websocket_snippet_runs_as_written(tmp_path: Path) -> None:
    doc = (ROOT / "docs" / "transports.md").read_text(encoding="utf-8")
    section = doc.split("## WebSocket", 1)[1].split("\n## ", 1)[0]
    (snippet,) = [b for tag, b in FENCE.findall(section) if tag == "python"]
    assert "ws://127.0.0.1:7700/" in snippet
    home = tmp_path / "home"
    env = server_env(home, {"MEMTRIO_CODE": "off", "MEMTRIO_AUTH_TOKEN": "s3cret-token"})
    server = subprocess.Popen(
        [sys.executable, "-m", "memtrio.supervisors.cli", "serve", "--transport", "ws"]
        + ["--bind", "127.0.0.1:0"],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stderr is not None
        listening = server.stderr.readline()
        port = re.search(r"ws://127\.0\.0\.1:(\d+)", listening)
        assert port is not None, listening
        script = tmp_path / "client.py"
        script.write_text(snippet.replace("127.0.0.1:7700", f"127.0.0.1:{port.group(1)}"))
        ran = subprocess.run(
            [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60
        )
        assert ran.returncode == 0, ran.stderr
        assert msgspec.json.decode(ran.stdout) == {"jsonrpc": "2.0", "id": 1, "result": {}}
        # Without the token the server refuses it: the snippet really sends it.
        refused = subprocess.run(
            [sys.executable, str(script)],
            env={k: v for k, v in env.items() if k != "MEMTRIO_AUTH_TOKEN"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert refused.returncode != 0
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_page_names_a_command_memtrio_lacks(page: Path) -> None:
    """The commands a page names in prose (`memtrio X`) exist: a quick per-page view of the
    first check, so a failure names the page in the test id."""
    missing = [
        f"{where(page, n)}: {c}"
        for n, c in inline_commands(page)
        if not SYNOPSIS.search(c) and subparser(shlex.split(c)[1:])[0] is None
    ]
    assert missing == []
    assert os.sep not in page.name
