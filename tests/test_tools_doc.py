"""docs/tools.md is what tools/gen_tools_doc.py generates from the live registry."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "gen_tools_doc.py"


def test_tools_doc_is_up_to_date() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_check_fails_on_a_stale_doc(tmp_path: Path) -> None:
    stale = tmp_path / "tools.md"
    stale.write_text((ROOT / "docs" / "tools.md").read_text() + "\nedited by hand\n")
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--check", "--output", str(stale)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "stale" in done.stderr
