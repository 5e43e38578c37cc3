from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An empty MEMTRIO_HOME for one test (private, as memtrio creates it: doctor checks)."""
    path = tmp_path / "home"
    path.mkdir(mode=0o700)
    return path
