"""Real Git repositories for tests, made in a temporary directory."""

from __future__ import annotations

import subprocess
from pathlib import Path

GIT = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", "-c", "commit.gpgsign=false"]


def git(root: Path, *args: str) -> str:
    """Run git in ``root``; its stdout, stripped (raises on failure)."""
    return subprocess.run(
        [*GIT, "-C", str(root), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def write(root: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)


def make_repo(path: Path, files: dict[str, str | bytes]) -> Path:
    """A repository on branch main with ``files`` in one commit; its resolved root."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    write(path, files)
    git(path, "add", "-A")
    git(path, "commit", "-qm", "init")
    return path.resolve()
