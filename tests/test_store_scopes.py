"""Scope resolution with real git repositories, worktrees, clones and a bare repository."""

from __future__ import annotations

from pathlib import Path

import pytest
from gitrepo import git
from memtrio.actors.store.domain.scopes import (
    GLOBAL,
    ScopeError,
    ScopePolicy,
    canonical,
    default_scope,
)


@pytest.fixture(scope="module")
def repos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """main checkout + linked worktree + separate clone + bare repo + a plain directory."""
    base = tmp_path_factory.mktemp("scopes").resolve()
    main = base / "main"
    main.mkdir()
    git(main, "init", "-q", "-b", "main")
    (main / "sub").mkdir()
    (main / "sub" / "f.txt").write_text("x")
    git(main, "add", ".")
    git(main, "commit", "-q", "-m", "init")
    git(main, "worktree", "add", "-q", "-b", "feature", str(base / "wt"))
    git(base, "clone", "-q", str(main), str(base / "clone"))
    git(base, "init", "-q", "--bare", str(base / "bare.git"))
    (base / "plain").mkdir()
    return {
        "base": base,
        "main": main,
        "wt": base / "wt",
        "clone": base / "clone",
        "bare": base / "bare.git",
        "plain": base / "plain",
    }


def test_default_scope_is_the_common_git_dir_shared_by_worktrees(repos: dict[str, Path]) -> None:
    expected = f"repo:{repos['main'] / '.git'}"
    assert default_scope(repos["main"]) == expected
    assert default_scope(repos["main"] / "sub") == expected
    assert default_scope(repos["wt"]) == expected  # a linked worktree shares the scope


def test_separate_clone_bare_repo_and_outside_differ(repos: dict[str, Path]) -> None:
    assert default_scope(repos["clone"]) == f"repo:{repos['clone'] / '.git'}"
    assert default_scope(repos["bare"]) == f"repo:{repos['bare']}"
    assert default_scope(repos["plain"]) == GLOBAL


def test_default_scope_is_global_without_git(
    repos: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(repos["plain"]))  # no git on PATH
    assert default_scope(repos["main"]) == GLOBAL


def test_explicit_repo_paths_resolve_checkout_root_and_common_dir_the_same(
    repos: dict[str, Path],
) -> None:
    expected = f"repo:{repos['main'] / '.git'}"
    assert canonical(f"repo:{repos['main']}") == expected
    assert canonical(f"repo:{repos['main']}/") == expected
    assert canonical(f"repo:{repos['main'] / '.git'}") == expected
    assert canonical(f"repo:{repos['wt']}") == expected
    assert canonical(f"repo:{repos['bare']}") == f"repo:{repos['bare']}"
    # Not a checkout root nor a git dir: a literal scope (normalised).
    assert canonical(f"repo:{repos['main'] / 'sub'}") == f"repo:{repos['main'] / 'sub'}"
    assert canonical("repo:/no/such/place/../here") == "repo:/no/such/here"
    assert canonical(" global ") == GLOBAL


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "Global",
        "repo:",
        "repo:relative/path",
        "/abs/without/prefix",
        "user:/x",
        "repo:~/x",
        "repo:/a\nb",
    ],
)
def test_invalid_scope_strings_are_refused_with_what_is_allowed(bad: str) -> None:
    with pytest.raises(ScopeError) as info:
        canonical(bad)
    assert "`global` or `repo:/absolute/path`" in str(info.value)


def test_policy_selection_and_write_rules(repos: dict[str, Path]) -> None:
    policy = ScopePolicy.for_directory(repos["wt"])
    current = f"repo:{repos['main'] / '.git'}"
    clone = f"repo:{repos['clone'] / '.git'}"
    assert policy.current == current
    assert policy.select(None) == [current, GLOBAL]
    assert policy.select([]) == [current, GLOBAL]
    assert policy.select([f"repo:{repos['clone']}"]) == [
        clone,
        GLOBAL,
    ]  # explicit list: no current repo
    assert policy.write_scopes(None) == [current]
    assert policy.write_scopes(["global", f"repo:{repos['main']}"]) == [GLOBAL, current]
    with pytest.raises(ScopeError) as info:
        policy.write_scopes([f"repo:{repos['clone']}"])
    assert clone in str(info.value) and current in str(info.value) and "global" in str(info.value)
    with pytest.raises(ScopeError):
        policy.write_selection([clone])
    assert ScopePolicy.for_directory(repos["plain"]).writable == [GLOBAL]
