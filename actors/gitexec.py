"""Running git: the one place the server starts a git process."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path


def git_output(args: Sequence[str], cwd: Path, timeout: float = 10.0) -> str | None:
    """Run git quietly; stdout stripped, or None when git fails or is missing."""
    try:
        proc = subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"},
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    return proc.stdout.strip()
