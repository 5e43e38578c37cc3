from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from memtrio.supervisors import faults  # noqa: E402 - after the path is set up


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An empty MEMTRIO_HOME for one test (private, as memtrio creates it: doctor checks)."""
    path = tmp_path / "home"
    path.mkdir(mode=0o700)
    return path


@pytest.fixture(autouse=True)
def no_faults() -> Iterator[None]:
    """Fault points a test switched on in this process are off again after it."""
    yield
    faults.configure(None)


@pytest.fixture
def cli_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git checkout as the current directory, for in-process CLI runs: the home is
    ``tmp_path/home``, embeddings, code and fault injection off."""
    path = (tmp_path / "proj").resolve()
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    monkeypatch.chdir(path)
    monkeypatch.setenv("MEMTRIO_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MEMTRIO_EMBEDDINGS", "off")
    monkeypatch.setenv("MEMTRIO_CODE", "off")
    monkeypatch.delenv("MEMTRIO_FAULTS", raising=False)
    return path
