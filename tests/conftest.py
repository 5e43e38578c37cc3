from __future__ import annotations

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
