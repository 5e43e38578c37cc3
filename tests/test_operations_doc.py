"""docs/operations.md runs as written: every line of its ```sh blocks, in order, in a
temporary home (embeddings and code off), exits 0.

Convention (stated at the top of the document): ```sh blocks are runnable, one
command per line; a line ending in ``# not run: REASON`` is skipped (it needs the
embedding model or takes long); ```text blocks show output and are not run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import memtrio

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "operations.md"
SKIP = re.compile(r"#\s*not run:\s*(\S.*)$")
BLOCK = re.compile(r"^```sh\n(.*?)^```", re.MULTILINE | re.DOTALL)


def runnable_lines(text: str) -> tuple[list[str], list[str]]:
    """The lines of the document's ```sh blocks: (to run, skipped with a reason)."""
    run: list[str] = []
    skipped: list[str] = []
    for block in BLOCK.findall(text):
        for raw in block.splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            (skipped if SKIP.search(line) else run).append(line)
    return run, skipped


def test_the_runnable_blocks_cover_every_operation() -> None:
    run, skipped = runnable_lines(DOC.read_text(encoding="utf-8"))
    assert all("memtrio" in line for line in run + skipped)
    commands = " ".join(run)
    for needed in ("memtrio trace", "memtrio doctor", "memtrio export", "memtrio import", "--fix"):
        assert needed in commands, needed
    assert any("memtrio reembed" in line for line in skipped)
    assert not any("/work/" in line for line in run + skipped), "no paths of one machine"


def test_every_runnable_command_of_the_operations_doc_exits_0(tmp_path: Path) -> None:
    run, _ = runnable_lines(DOC.read_text(encoding="utf-8"))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "memtrio"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m memtrio.supervisors.cli "$@"\n')
    shim.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    package_parent = str(Path(next(iter(memtrio.__path__))).parent)
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(tmp_path),  # so the default home ~/.memtrio is the temporary one
        "PYTHONPATH": package_parent,
        "MEMTRIO_EMBEDDINGS": "off",
        "MEMTRIO_CODE": "off",
    }
    outputs: dict[str, str] = {}
    for line in run:
        done = subprocess.run(
            ["bash", "-c", f"set -o pipefail; {line}"],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, f"{line}\nexit {done.returncode}\n{done.stderr}"
        outputs[line] = done.stdout + done.stderr
    # The output shown in the document's text blocks, where it does not vary.
    assert "stdio.session tools/call [tool=recall]" in outputs["memtrio trace --last 1"]
    assert "1 of 1 request took 0 ms or more" in outputs["memtrio trace --slow 0"]
    assert "status: ok" in outputs["memtrio doctor"]
    assert "permissions: ok (directories 0700, files 0600)" in outputs["memtrio doctor"]
    assert (
        "exported 1 memory, 0 entities, 0 relations, 0 vectors to memtrio-backup.jsonl"
        in (outputs["memtrio export -o memtrio-backup.jsonl"])
    )
    assert (
        "added 1 memory, 0 entities, 0 relations, 0 vectors (0 memories were already present)"
        in (outputs["memtrio import memtrio-backup.jsonl --home restored-home"])
    )
    assert (
        "added 0 memories, 0 entities, 0 relations, 0 vectors (1 memory was already present)"
        in (outputs["memtrio import memtrio-backup.jsonl"])
    )
    assert (tmp_path / ".memtrio" / "memtrio.sqlite").exists()
    assert (work / "restored-home" / "memtrio.sqlite").exists()


def test_the_readme_links_the_operations_doc() -> None:
    assert "(docs/operations.md)" in (ROOT / "README.md").read_text(encoding="utf-8")
