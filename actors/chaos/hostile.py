"""A hostile checkout: a Git repository built to make a careless reader run
commands or read files outside it.

`make_hostile_checkout` writes a repository whose ``.git/config`` sets every
configuration key that can make git run a command (each one to a command
that creates a file in ``markers``), whose ``.gitattributes`` sends every
file through those diff, filter and merge drivers, whose promisor remote
would be fetched by an ``ext::`` command, and whose tree holds symlinks out
of the checkout (a file, a directory, and a tracked file's directory swapped
for a symlink after the commit). The chaos scenario ``hostile-checkout`` and
``tests/test_hostile_checkout.py`` drive memtrio at it: no marker may appear
and no outside text may come back.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from ...supervisors.git import run

# Text that exists only outside the checkout: it must never come back.
OUTSIDE_NAMES = ("outside_secret_fn", "outside_inner_fn", "OutsideSecretClass")
# Hooks a git command could run (all point at marker-making scripts).
HOOKS = (
    "applypatch-msg",
    "commit-msg",
    "fsmonitor-watchman",
    "post-checkout",
    "post-commit",
    "post-index-change",
    "post-merge",
    "post-rewrite",
    "pre-auto-gc",
    "pre-commit",
    "pre-merge-commit",
    "pre-push",
    "pre-rebase",
    "prepare-commit-msg",
    "push-to-checkout",
    "reference-transaction",
)
# Commands git runs that take a pager.<cmd> or alias.<cmd> setting.
COMMANDS = ("rev-parse", "ls-files", "merge-base", "diff", "cat-file", "version", "status", "log")

# Configuration keys whose value is a command git may run (each set to a marker-making one).
COMMAND_KEYS = (
    "core.fsmonitor",
    "core.pager",
    "core.editor",
    "core.askPass",
    "core.sshCommand",
    "core.gitProxy",
    "core.alternateRefsCommand",
    "sequence.editor",
    "diff.external",
    "diff.evil.textconv",
    "diff.evil.command",
    "filter.evil.clean",
    "filter.evil.smudge",
    "filter.evil.process",
    "merge.evil.driver",
    "gpg.program",
    "gpg.ssh.program",
    "gpg.x509.program",
    "remote.origin.uploadpack",
    "remote.origin.receivepack",
    "uploadpack.packObjectsHook",
)

_IDENTITY = [
    "-c",
    "user.name=hostile",
    "-c",
    "user.email=h@example.com",
    "-c",
    "commit.gpgsign=false",
]


@dataclass
class Hostile:
    root: Path  # the checkout
    markers: Path  # must stay empty
    outside: Path  # files outside the checkout the symlinks point at
    base: str = "main"  # branches for a structural diff
    head: str = "feature"

    def fired(self) -> list[str]:
        """The marker files created so far (each names the key or hook that ran)."""
        return sorted(os.listdir(self.markers))

    def leaked(self, text: str) -> list[str]:
        """The outside-only names found in ``text``."""
        return [name for name in OUTSIDE_NAMES if name in text]


def _git(root: Path, *args: str) -> None:
    done = run([*_IDENTITY, *args], root)
    if done.returncode != 0:
        raise RuntimeError(f"git {args[0]} failed: {done.stderr.decode(errors='replace')}")


def make_hostile_checkout(base: Path) -> Hostile:
    """Build the hostile checkout under ``base`` (``repo``, ``markers``, ``outside``)."""
    root, markers, outside = base / "repo", base / "markers", base / "outside"
    for path in (root, markers, outside / "dir"):
        path.mkdir(parents=True, exist_ok=True)
    if any(c in str(base) for c in " %'\"\\"):
        raise ValueError(f"{base} must not contain spaces, quotes or '%'")
    (outside / "secret.py").write_text("def outside_secret_fn():\n    pass\n")
    (outside / "dir" / "inner.py").write_text(
        "class OutsideSecretClass:\n    pass\n\n\ndef outside_inner_fn():\n    pass\n"
    )
    _commit_branches(root, outside)
    _break_checkout(root, outside)
    hooks = _install_hooks(root, markers)
    with open(root / ".git" / "config", "a") as fh:
        fh.write("\n".join(_config_lines(hooks, markers)) + "\n")
    return Hostile(root.resolve(), markers, outside)


def _commit_branches(root: Path, outside: Path) -> None:
    """Branch ``main`` (with symlinks out of the checkout), then ``feature`` changing it."""
    _git(root, "init", "-q", "-b", "main")
    files = {
        "app.py": "import os\n\n\ndef inside_app():\n    return 1\n",
        "old.py": "def inside_old():\n    return 1\n\n\ndef kept():\n    return 2\n",
        "lazy.py": "def inside_lazy():\n    return 1\n",
        "sub/inner.py": "def inside_sub():\n    return 1\n",
        ".gitattributes": "* diff=evil filter=evil merge=evil\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "escape.py").symlink_to(outside / "secret.py")
    (root / "linkdir").symlink_to(outside / "dir")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "base")
    _git(root, "checkout", "-qb", "feature")
    (root / "app.py").write_text(files["app.py"] + "\n\ndef added_on_feature():\n    return 2\n")
    (root / "lazy.py").write_text("def inside_lazy():\n    return 2\n")
    (root / "old.py").rename(root / "new.py")
    (root / "new.py").write_text(files["old.py"] + "\n\ndef renamed_and_changed():\n    return 3\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "feature")


def _break_checkout(root: Path, outside: Path) -> None:
    """Drop an object a partial clone would fetch; swap a tracked directory for a symlink out."""
    # The feature version of lazy.py goes missing: a partial clone would fetch it.
    lazy = run(["rev-parse", "feature:lazy.py"], root).stdout.decode().strip()
    (root / ".git" / "objects" / lazy[:2] / lazy[2:]).unlink()
    _git(root, "checkout", "-q", "main")
    # A tracked file whose directory becomes a symlink out of the checkout.
    for child in (root / "sub").iterdir():
        child.unlink()
    (root / "sub").rmdir()
    (root / "sub").symlink_to(outside / "dir")


def _install_hooks(root: Path, markers: Path) -> Path:
    """A hooks directory where every hook makes its marker; returns it."""
    hooks = root / ".git" / "evil-hooks"
    hooks.mkdir()
    for hook in HOOKS:
        script = hooks / hook
        script.write_text(f"#!/bin/sh\ntouch {shlex.quote(str(markers / ('hook-' + hook)))}\n")
        script.chmod(0o755)
    return hooks


def _config_lines(hooks: Path, markers: Path) -> list[str]:
    """The lines appended to ``.git/config``: every command-running key set to make a marker."""

    def cmd(name: str) -> str:
        return f"touch {shlex.quote(str(markers / name))}; :"

    lines = ["[core]", "\trepositoryformatversion = 1", f"\thooksPath = {hooks}"]
    lines += ["[extensions]", "\tpartialClone = origin"]
    lines += ['[remote "origin"]', "\tpromisor = true"]
    lines.append(f"\turl = ext::sh -c touch% {markers / 'ext-transport'}")
    lines += ["[protocol]", "\tallow = always", '[protocol "ext"]', "\tallow = always"]
    lines += ['[filter "evil"]', "\trequired = true"]
    lines += ["[log]", "\tshowSignature = true", "[credential]"]
    lines.append(f"\thelper = !{cmd('credential.helper')}")
    for key in COMMAND_KEYS:
        section, _, name = key.rpartition(".")
        head, _, sub = section.partition(".")
        lines.append(f'[{head} "{sub}"]' if sub else f"[{head}]")
        lines.append(f'\t{name} = "{cmd(key)}"')
    for command in COMMANDS:
        lines += ["[pager]", f'\t{command} = "{cmd("pager." + command)}"']
        lines += ["[alias]", f'\t{command} = "!{cmd("alias." + command)}"']
    return lines
