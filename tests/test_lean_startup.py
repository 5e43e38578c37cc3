"""Start-up cost of the CLI: commands that need no model load none of the heavy libraries.

Importing numpy, igraph, onnxruntime, tokenizers or tree-sitter costs tens of milliseconds
each; `memtrio list` and friends must not pay for them (issue #16). Each
command runs in a fresh interpreter, which then reports what it imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("numpy", "igraph", "onnxruntime", "tokenizers", "tree_sitter")
PROBE = """
import json, sys
from memtrio.supervisors.cli import main
code = main(sys.argv[1:])
heavy = sorted(m for m in sys.modules if m.split(".")[0] in {heavy!r})
print(json.dumps({{"code": code, "heavy": heavy}}), file=sys.stderr)
"""


def loaded_by(argv: list[str], home: Path) -> list[str]:
    """The heavy modules a fresh interpreter imported to run ``memtrio ARGV``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMTRIO_")}
    env["MEMTRIO_EMBEDDINGS"] = "off"
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=set(HEAVY)), *argv, "--home", str(home)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    assert report["code"] == 0, done.stderr
    return report["heavy"]


def test_importing_the_cli_loads_no_heavy_library(tmp_path: Path) -> None:
    assert loaded_by(["stats"], tmp_path) == []


@pytest.mark.parametrize(
    "argv",
    [["list"], ["show", "1"], ["scopes"], ["search", "--lexical", "memory"]],
)
def test_model_free_commands_load_no_heavy_library(tmp_path: Path, argv: list[str]) -> None:
    loaded_by(["remember", "a memory about start-up"], tmp_path)  # the memory to show
    assert loaded_by(argv, tmp_path) == []
