"""The README and docs/ as a newcomer meets them: the tour runs as written, every
page is reachable from the README, every link and quoted file exists, the client
snippets parse, and no command names one development machine's paths.

The tour is the ```sh block after the ``<!-- tests/test_readme.py runs this
block ... -->`` marker. Its lines run in order in one bash process, as a user
types them into one terminal (so its ``export`` behaves as it would there, and
``memtrio serve --detach`` must return only once its server is ready), in a fresh Git checkout with ``HOME`` and ``TMPDIR`` in
the test's temporary directory. The one change from a user's machine:
``MEMTRIO_PORT=0`` lets ``memtrio serve`` take a free port instead of 7700. The
install commands at the top are not run here: they are what ``.ci/run`` runs.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

import memtrio
from gitrepo import make_repo
from memtrio.actors.hooks.install import server_entry
from memtrio.actors.net.spawn import kill_owners

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
TOUR_MARKER = "<!-- tests/test_readme.py runs this block"


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def fenced(text: str, lang: str) -> list[str]:
    """The bodies of the ```lang blocks of ``text``."""
    return [body for tag, body in FENCE.findall(text) if tag == lang]


def tour_lines(text: str) -> list[str]:
    """The commands of the walked block: its non-blank lines, comments left out."""
    after = text.split(TOUR_MARKER, 1)[1]
    match = FENCE.search(after)
    assert match is not None and match.group(1) == "sh", "the marker must precede a ```sh block"
    lines = [line.strip() for line in match.group(2).splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


# -- the two commands at the top, and CI --------------------------------------------------

INSTALL_AND_RUN = "python3 -m pip install . && memtrio mcp"
INSTALL_AND_TEST = "python3 -m pip install '.[test]' && python3 -m pytest"


def test_readme_starts_with_the_run_and_test_commands() -> None:
    blocks = FENCE.findall(read(README))
    assert [body.strip() for _, body in blocks[:2]] == [INSTALL_AND_RUN, INSTALL_AND_TEST]
    assert read(README).split("```", 1)[0].strip() == "# memtrio", "nothing before them"


def test_ci_runs_exactly_the_readme_test_command() -> None:
    ci = read(ROOT / ".ci" / "run")
    assert "python3 -m venv" in ci  # a fresh environment, whose python3 it then uses
    assert INSTALL_AND_TEST in ci.splitlines()


# -- the tour ------------------------------------------------------------------------------


def _script(lines: list[str], out: Path) -> str:
    """A bash script that runs ``lines`` in order, each one's stdout, stderr and exit
    code into ``out/N.*``; a background line is waited for until its server is ready."""
    parts = ["trap 'kill $(jobs -p) 2>/dev/null' EXIT"]
    background: list[int] = []
    for n, line in enumerate(lines):
        parts.append(f'{{\n{line}\n}} >"{out}/{n}.out" 2>"{out}/{n}.err"')
        if re.search(r"&\s*$", line):
            assert line.startswith("memtrio serve"), (
                f"only memtrio serve runs in the background: {line}"
            )
            background.append(n)
            # A user sees the "listening on" line; attach also needs the runtime file.
            parts.append(
                f'bg_{n}=$!\nfor _ in $(seq 1200); do [ -s "${{MEMTRIO_HOME:-$HOME/.memtrio}}/run/serve.json" ]'
                " && break; sleep 0.05; done"
            )
        else:
            parts.append(f'echo $? >"{out}/{n}.rc"')
    for n in background:  # the tour stops it itself (kill %1); its exit code is recorded
        parts.append(f'wait $bg_{n}; echo $? >"{out}/{n}.rc"')
    return "\n".join(parts) + "\n"


def _tour_env(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "memtrio"  # the installed command, for this checkout's code
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m memtrio.supervisors.cli "$@"\n')
    shim.chmod(0o755)
    (tmp_path / "home").mkdir()
    (tmp_path / "tmp").mkdir()
    return {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(tmp_path / "home"),
        "TMPDIR": str(tmp_path / "tmp"),
        "PYTHONPATH": str(Path(next(iter(memtrio.__path__))).parent),
        "MEMTRIO_PORT": "0",
        "LANG": "C.UTF-8",
    }


Check = Callable[[str, str], None]


def _remembered_in_repo(out: str, err: str) -> None:
    assert re.fullmatch(r"remembered #1 in repo:\S+/checkout/\.git\n", out), out


def _remembered_global(out: str, err: str) -> None:
    assert out == "remembered #2 in global\n", out


def _search(out: str, err: str) -> None:
    repo, _, rest = out.partition("global (1):")
    assert repo.startswith("repo:") and "We use trio, never asyncio" in repo, out
    assert "Prefer msgspec Structs" in rest, out


def _list(out: str, err: str) -> None:
    assert out.index("Prefer msgspec Structs") < out.index("We use trio"), "newest first"


def _show(out: str, err: str) -> None:
    assert out.startswith("memory #1  [convention]  importance 0.8"), out
    assert "We use trio, never asyncio, in this project" in out


def _code_index(out: str, err: str) -> None:
    assert re.match(r"indexed 2 source files of \S+/checkout ", out), out


def _serve(out: str, err: str) -> None:
    assert out == ""  # stdout belongs to the protocol
    assert re.match(
        r"memtrio serve: listening on http://127\.0\.0\.1:\d+/mcp \(pid \d+\), detached", err
    ), err


def _stop(out: str, err: str) -> None:
    assert re.fullmatch(r"memtrio serve: stopped pid \d+\n", err), err


def _attached_ping(out: str, err: str) -> None:
    assert json.loads(out) == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert re.match(r"memtrio: attaching to memtrio serve pid \d+", err), err


# What each step of the tour shows; a step the README drops fails the test.
EXPECTED: dict[str, Check] = {
    'memtrio remember "We use trio': _remembered_in_repo,
    "memtrio remember --scope global": _remembered_global,
    "memtrio search ": _search,
    "memtrio list": _list,
    "memtrio show 1": _show,
    "memtrio code index": _code_index,
    "memtrio serve --detach": _serve,
    "| memtrio mcp": _attached_ping,
    "memtrio serve --stop": _stop,
}


def test_the_tour_runs_as_written(tmp_path: Path) -> None:
    lines = tour_lines(read(README))
    assert lines[0] == "export MEMTRIO_HOME=$(mktemp -d)" and "memtrio serve --stop" in lines
    checkout = make_repo(
        tmp_path / "checkout",
        {
            "app.py": "def greet(name):\n    return f'hi {name}'\n",
            "lib/door.py": "class Door:\n    def open(self) -> None:\n        pass\n",
        },
    )
    out = tmp_path / "out"
    out.mkdir()
    env = _tour_env(tmp_path)
    try:
        done = subprocess.run(
            ["bash", "-c", _script(lines, out)],
            cwd=checkout,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
    finally:
        left = kill_owners(tmp_path)  # a server the tour detached and did not stop
    assert left == [], "the tour's memtrio serve --stop stopped its server"
    assert done.returncode == 0, done.stderr
    seen: set[str] = set()
    for n, line in enumerate(lines):
        stdout, stderr = (out / f"{n}.out").read_text(), (out / f"{n}.err").read_text()
        code = (out / f"{n}.rc").read_text().strip()
        assert code == "0", f"{line}\nexit {code}\n{stderr}"
        for prefix, check in EXPECTED.items():
            if prefix in line:
                check(stdout, stderr)
                seen.add(prefix)
    assert seen == set(EXPECTED), f"the tour lost {set(EXPECTED) - seen}"
    # The scratch home the tour made is where everything went; the user's is untouched.
    homes = list((tmp_path / "tmp").glob("tmp.*"))  # what mktemp -d made
    assert len(homes) == 1 and (homes[0] / "memtrio.sqlite").is_file()
    assert not (tmp_path / "home" / ".memtrio").exists()
    assert not (homes[0] / "run" / "serve.json").exists(), "the stopped server cleaned up"


# -- client registrations ------------------------------------------------------------------


def test_every_client_snippet_parses_and_launches_memtrio_mcp() -> None:
    text = read(README)
    section = text.split("## Register it with your agent", 1)[1].split("\n## ", 1)[0]
    configs = [json.loads(body) for body in fenced(section, "json")]
    assert [sorted(c) for c in configs] == [["mcpServers"], ["mcpServers"], ["servers"]]
    for config in configs:
        (server,) = config.get("mcpServers", config.get("servers", {})).values()
        assert server["command"] == "memtrio" and server["args"] == ["mcp"]
    assert configs[2]["servers"]["memtrio"]["type"] == "stdio"  # VS Code
    (codex,) = [tomllib.loads(body) for body in fenced(section, "toml")]
    assert codex == {"mcp_servers": {"memtrio": {"command": "memtrio", "args": ["mcp"]}}}
    for client in ("Claude Code", "Claude Desktop", "Codex", "Cursor", "VS Code"):
        assert f"**{client}**" in section
    install, by_hand = fenced(section, "sh")[:2]
    assert "memtrio install claude-code" in install
    assert "claude mcp add memtrio -- memtrio mcp" in by_hand
    # The entries `memtrio install` writes are the ones shown.
    assert configs[0]["mcpServers"]["memtrio"] == server_entry("memtrio")
    assert configs[2]["servers"]["memtrio"] == server_entry("memtrio", vscode=True)
    for where in ("claude_desktop_config.json", "~/.codex/config.toml", ".cursor/mcp.json"):
        assert where in section
    assert ".vscode/mcp.json" in section


# -- links and files ---------------------------------------------------------------------

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
QUOTED_DOCS_FILE = re.compile(r"(?<![\w/.])docs/[\w./{},-]*\w")


def _prose(text: str) -> str:
    """``text`` without its fenced code blocks (their brackets are not links)."""
    return FENCE.sub("", text)


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    headings = re.findall(r"^#+ (.*)$", _prose(read(path)), re.MULTILINE)
    return {_slug(h) for h in headings}


def _expand(path: str) -> list[str]:
    """``a-{x,y}.txt`` -> ``a-x.txt``, ``a-y.txt`` (the brace form docs use)."""
    match = re.search(r"\{([^{}]*)\}", path)
    if match is None:
        return [path]
    return [
        expanded
        for choice in match.group(1).split(",")
        for expanded in _expand(path[: match.start()] + choice + path[match.end() :])
    ]


def test_every_docs_page_is_linked_from_the_readme() -> None:
    links = set(LINK.findall(read(README)))
    assert len(DOCS) >= 12
    missing = [p.name for p in DOCS if f"docs/{p.name}" not in links]
    assert missing == [], f"README.md links no {missing}"


def test_every_relative_link_points_at_an_existing_file_and_heading() -> None:
    broken: list[str] = []
    for page in [README, *DOCS]:
        for target in LINK.findall(_prose(read(page))):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            file_part, _, anchor = target.partition("#")
            resolved = (page.parent / file_part).resolve() if file_part else page
            where = f"{page.relative_to(ROOT)}: ({target})"
            if not resolved.exists() or not resolved.is_relative_to(ROOT):
                broken.append(f"{where}: no such file in the checkout")
            elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
                broken.append(f"{where}: no heading #{anchor}")
    assert broken == []


def test_every_docs_file_the_docs_quote_exists() -> None:
    """Raw outputs quoted beside figures (``docs/bench-runs/...``) are committed."""
    missing: list[str] = []
    named = 0
    for page in [README, *DOCS]:
        for quoted in QUOTED_DOCS_FILE.findall(read(page)):
            for path in _expand(quoted.rstrip(".,")):
                named += 1
                if not (ROOT / path).exists():
                    missing.append(f"{page.relative_to(ROOT)}: {path}")
    assert named >= 10
    assert missing == []


# -- commands anyone can run from a checkout --------------------------------------------------

# Paths of one machine: its checkouts, its temporary files, its interpreter. Generic
# examples (/home/me/..., /srv/...) are fine.
MACHINE_PATH = re.compile(
    r"/work/|/root/|/tmp/|/Users/|\.pyenv|/usr/local/|site-packages/|(?<!\w)/home/(?!me/|me\b)\w"
    r"|(?<![\w.])\.\./shared/"
)
# tools/ may name where the evaluation data sits beside a checkout (``../shared/eval``).
TOOLS_MACHINE_PATH = re.compile(MACHINE_PATH.pattern.rpartition("|")[0])


def test_docs_name_no_machine_paths() -> None:
    """README, every file under docs/ (the raw runs of docs/bench-runs/ too) and tools/."""
    pages = [README, *(p for p in sorted((ROOT / "docs").rglob("*")) if p.is_file())]
    tools = [p for p in sorted((ROOT / "tools").rglob("*")) if p.is_file()]
    found = [
        f"{page.relative_to(ROOT)}:{n}: {line.strip()[:160]}"
        for pages_of, pattern in ((pages, MACHINE_PATH), (tools, TOOLS_MACHINE_PATH))
        for page in pages_of
        if page.suffix not in (".png", ".jpg", ".pyc")
        for n, line in enumerate(page.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == []


def test_machine_path_pattern_catches_what_it_should() -> None:
    for bad in (
        "/root/.pyenv/versions/3.11.7/bin/python tools/bench_code.py",
        "memtrio chaos --home /tmp/chaos",
        "python tools/eval_recall.py --data ../shared/eval/longmemeval-s-16",
        "cd /work/main && pytest",
        "/home/alice/project",
    ):
        assert MACHINE_PATH.search(bad), bad
    for fine in (
        "repo:/home/me/project/.git",
        "the home /srv/mem",
        "~/.memtrio",
        "docs/x.md",
        "beside it (DIR/home/vector-index/)",
    ):
        assert not MACHINE_PATH.search(fine), fine
    assert TOOLS_MACHINE_PATH.search("PYTHONPATH=/work/wt/leancode-py python3 tools/x.py")
    assert not TOOLS_MACHINE_PATH.search("default ../shared/eval/<dataset>")


TOOL_COMMAND = re.compile(r"python3? (tools/[\w.]+\.py)([^`\n|#]*)")


def test_every_tools_command_in_the_docs_names_a_script_and_flags_it_has() -> None:
    """``python tools/X.py --flag`` beside a figure: X exists and takes ``--flag``."""
    problems: list[str] = []
    commands = 0
    for page in [README, *DOCS]:
        for script, args in TOOL_COMMAND.findall(read(page)):
            commands += 1
            path = ROOT / script
            if not path.is_file():
                problems.append(f"{page.name}: {script} does not exist")
                continue
            source = read(path)
            for flag in re.findall(r"(?<![\w-])--[a-z][\w-]*", args):
                if f'"{flag}"' not in source:
                    problems.append(f"{page.name}: {script} takes no {flag}")
    assert commands >= 10
    assert problems == []


def test_the_home_table_names_the_code_index_file_memtrio_writes(tmp_path: Path) -> None:
    from memtrio.actors.code.index import index_path

    name = index_path(tmp_path).name
    table = read(README).split("## Where data, config and logs live", 1)[1]
    assert f"`{name}`" in table and not re.search(rf"`code-v(?!{name[6:-7]}\b)\d+\.sqlite`", table)
