"""Defect 1 of issue #11: a checkout's own Git configuration must never make
memtrio run a command, and no git call may bypass the one hardened helper.

The hostile checkout (`memtrio.actors.chaos.hostile`) sets every exec-capable
configuration key, driver, hook and a promisor remote reached by an ``ext::``
command, each making a marker file; it also holds symlinks out of the
checkout. The server and the CLI are driven at it through every path that
runs git, with a hostile ``GIT_*`` environment too; no marker may appear and
no outside text may come back.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from gitrepo import git, make_repo
from mcp_client import fails, ok, open_client
from memtrio.actors.chaos.hostile import Hostile, make_hostile_checkout
from memtrio.actors.code.checkout import checkout_root
from memtrio.actors.store.domain.scopes import canonical, default_scope
from memtrio.protocol.errors import DomainError
from memtrio.supervisors.git import git_output

PACKAGE = Path(__file__).resolve().parent.parent
HELPER = "supervisors/git.py"
# Modules allowed to start git themselves, and why.
EXEMPT = {
    "actors/chaos/harness.py": "builds the chaos scenarios' own fixture repository; never run by the server",
}


@pytest.fixture
def hostile(tmp_path: Path) -> Hostile:
    return make_hostile_checkout(tmp_path / "h")


def hostile_env(markers: Path) -> dict[str, str]:
    """GIT_* variables a parent process could leave: each would run or redirect something."""

    def cmd(name: str) -> str:
        return f"touch {markers / name}; :"

    return {
        "GIT_CONFIG_COUNT": "2",
        "GIT_CONFIG_KEY_0": "core.fsmonitor",
        "GIT_CONFIG_VALUE_0": cmd("env.GIT_CONFIG_COUNT"),
        "GIT_CONFIG_KEY_1": "core.pager",
        "GIT_CONFIG_VALUE_1": cmd("env.GIT_CONFIG_COUNT.pager"),
        "GIT_CONFIG_PARAMETERS": f"'diff.external'='{cmd('env.GIT_CONFIG_PARAMETERS')}'",
        "GIT_EXTERNAL_DIFF": cmd("env.GIT_EXTERNAL_DIFF"),
        "GIT_SSH_COMMAND": cmd("env.GIT_SSH_COMMAND"),
        "GIT_ASKPASS": cmd("env.GIT_ASKPASS"),
        "GIT_PAGER": cmd("env.GIT_PAGER"),
        "GIT_EDITOR": cmd("env.GIT_EDITOR"),
        "GIT_TRACE": str(markers / "env.GIT_TRACE"),
        "GIT_DIR": str(markers / "no-such-git-dir"),  # would break every command
        "GIT_WORK_TREE": "/",
    }


def assert_clean(hostile: Hostile, texts: list[str]) -> None:
    assert hostile.fired() == [], f"commands ran: {hostile.fired()}"
    for text in texts:
        assert hostile.leaked(text) == [], f"outside content returned: {text[:300]}"


def test_defect1_hostile_checkout_is_armed(hostile: Hostile) -> None:
    """Control: plain git on this machine does run the checkout's commands."""
    subprocess.run(["git", "ls-files"], cwd=hostile.root, capture_output=True)
    missing = subprocess.run(
        ["git", "rev-parse", "feature:lazy.py"], cwd=hostile.root, capture_output=True, text=True
    ).stdout
    subprocess.run(
        ["git", "cat-file", "--batch-check"],
        cwd=hostile.root,
        input=missing.encode(),
        capture_output=True,
    )
    assert {"core.fsmonitor", "ext-transport"} <= set(hostile.fired())


async def test_defect1_server_runs_no_command_from_a_hostile_checkout(
    hostile: Hostile, home: Path, tmp_path: Path
) -> None:
    root, texts = hostile.root, []
    written = tmp_path / "written-by-git"
    env = hostile_env(hostile.markers)
    async with open_client(home, cwd=root, env=env) as client:
        # scopes: the server's own (its cwd) and explicit repo: scopes
        stored = await ok(client, "remember", content="hostile checkout note")
        assert stored["scopes"] == [f"repo:{root / '.git'}"]
        for scope in (f"repo:{root}", f"repo:{root / '.git'}", f"repo:{root / 'sub'}"):
            found = await ok(client, "recall", query="hostile checkout note", scopes=[scope])
            texts.append(str(found))
        assert "hostile checkout note" in texts[0]
        texts.append(str(await ok(client, "list_scopes")))
        # code tools
        outline = await ok(client, "code_outline", path="app.py")
        assert "function inside_app" in outline
        texts.append(outline)
        texts.append(await ok(client, "code_imports", path="app.py", root=str(root)))
        assert "inside_app" in await ok(client, "find_symbol", query="inside_app")
        for name in ("outside_secret_fn", "outside_inner_fn", "OutsideSecretClass", "inside_sub"):
            assert await ok(client, "find_symbol", query=name, root=str(root)) == ""
        for path in ("escape.py", "sub/inner.py", "linkdir/inner.py"):
            assert "symlink" in (refusal := await fails(client, "code_outline", path=path))
            texts.append(refusal)
        texts.append(await fails(client, "code_imports", path=str(hostile.outside / "secret.py")))
        diff = await ok(client, "code_diff", base=hostile.base, head=hostile.head)
        assert "function added_on_feature" in diff
        assert "new.py\trenamed from old.py" in diff
        assert "skipped (object missing): lazy.py" in diff  # never fetched
        texts.append(diff)
        for base, head in ((f"--output={written}", "HEAD"), ("main", f"--output={written}")):
            assert "starts with '-'" in await fails(client, "code_diff", base=base, head=head)
        assert "control character" in await fails(client, "code_diff", base="main\n--output=x")
    assert not written.exists()
    assert_clean(hostile, texts)


def run_cli(args: list[str], cwd: Path, home: Path, env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "memtrio.supervisors.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "MEMTRIO_HOME": str(home), "MEMTRIO_EMBEDDINGS": "off", **env},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def test_defect1_cli_runs_no_command_from_a_hostile_checkout(hostile: Hostile, home: Path) -> None:
    env = hostile_env(hostile.markers)
    index = run_cli(["code", "index", "--root", str(hostile.root)], home, home, env)
    for path in ("escape.py", "sub/inner.py"):
        assert f"  {path}\tsymlink" in index.splitlines()
    diff = run_cli(["code", "diff", "main", "feature"], hostile.root, home, env)
    assert "function added_on_feature" in diff
    doctor = run_cli(["doctor"], hostile.root, home, env)
    assert re.search(r"^git: git version \d", doctor, re.M), doctor
    assert f"current_scope: repo:{hostile.root / '.git'}" in doctor
    assert_clean(hostile, [index, diff, doctor])


async def test_defect1_core_worktree_cannot_move_the_checkout(tmp_path: Path) -> None:
    """A repository's core.worktree pointing elsewhere does not make that directory the checkout."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "private.py").write_text("def private_fn():\n    pass\n")
    repo = make_repo(tmp_path / "repo", {"a.py": "def a():\n    pass\n"})
    git(repo, "config", "core.worktree", str(elsewhere))
    assert git_output(["rev-parse", "--show-toplevel"], repo) == str(elsewhere)  # git's view
    with pytest.raises(DomainError, match="work tree"):
        await checkout_root(str(repo), tmp_path)
    # Its scope is its Git directory, never the redirected work tree.
    assert default_scope(repo) == f"repo:{repo / '.git'}"
    assert canonical(f"repo:{elsewhere}") == f"repo:{elsewhere}"


# -- no git call bypasses the helper -----------------------------------------------

_SPAWN = {
    "run", "Popen", "call", "check_call", "check_output", "getoutput", "getstatusoutput",
    "system", "popen", "run_process", "open_process", "create_subprocess_exec",
    "create_subprocess_shell", "execv", "execve", "execvp", "execvpe", "execl", "execlp",
    "spawnv", "spawnvp", "spawnl", "spawnlp", "posix_spawn", "posix_spawnp", "which",
}  # fmt: skip
_GIT_WORD = re.compile(r"^\s*(\S*/)?git(\s|$)")


def _names_git(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return bool(_GIT_WORD.match(node.value))
    if isinstance(node, (ast.List, ast.Tuple)) and node.elts:
        return _names_git(node.elts[0])
    if isinstance(node, ast.BinOp):  # ["git"] + args
        return _names_git(node.left)
    if isinstance(node, ast.Starred):
        return _names_git(node.value)
    return False


def git_invocations(source: str) -> list[int]:
    """Lines that build a git argv or hand "git" to a process-starting call."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.List, ast.Tuple)) and node.elts and _names_git(node.elts[0]):
            lines.append(node.lineno)
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            args = [*node.args, *(k.value for k in node.keywords if k.arg in ("args", "cmd"))]
            if name in _SPAWN and any(_names_git(a) for a in args):
                lines.append(node.lineno)
    return sorted(set(lines))


def test_defect1_scanner_finds_direct_git_calls() -> None:
    """Control: each way of starting git directly is found."""
    for snippet in (
        'subprocess.run(["git", "status"])',
        'await trio.run_process(("git", *args))',
        'os.system("git status")',
        'subprocess.Popen(args=["/usr/bin/git", "log"])',
        'shutil.which("git")',
        'argv = ["git"] + args',
    ):
        assert git_invocations(snippet) == [1], snippet
    assert git_invocations('print("git is a tool"); x = {"git": 1}') == []


def test_defect1_git_runs_only_through_the_helper() -> None:
    found = {}
    for package in ("actors", "protocol", "supervisors"):
        for path in sorted((PACKAGE / package).rglob("*.py")):
            rel = path.relative_to(PACKAGE).as_posix()
            if rel == HELPER or rel in EXEMPT:
                continue
            lines = git_invocations(path.read_text())
            if lines:
                found[rel] = lines
    assert found == {}, f"git started outside {HELPER}: {found}"
    assert git_invocations((PACKAGE / HELPER).read_text()), "the helper itself must be scanned"
