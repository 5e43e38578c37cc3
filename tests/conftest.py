from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from mcp_client import TRANSPORTS, selected_transport  # noqa: E402 - after the path is set up
from memtrio.supervisors import faults  # noqa: E402


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "transports(*names, reason=...): the MCP transports open_client runs the test over, "
        "once each (a module's pytestmark = mcp_client.every_transport; a test that runs on "
        "fewer says why)",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``transport`` (and so `open_client`) by the closest ``transports`` mark."""
    marker = metafunc.definition.get_closest_marker("transports")
    if marker is None or "transport" not in metafunc.fixturenames:
        return
    names = marker.args
    assert names and set(names) <= set(TRANSPORTS), f"unknown transports {names}"
    if set(names) != set(TRANSPORTS):
        assert marker.kwargs.get("reason"), f"{metafunc.definition.nodeid}: say why not all"
    chosen = os.environ.get("MEMTRIO_TEST_TRANSPORTS")
    if chosen:  # e.g. MEMTRIO_TEST_TRANSPORTS=stdio for a quicker run
        names = tuple(n for n in names if n in chosen.split(","))
    metafunc.parametrize("transport", names, indirect=True, scope="module")


@pytest.fixture(scope="module", autouse=True)
def transport(request: pytest.FixtureRequest) -> Iterator[str]:
    """The transport `open_client` uses in this test: ``stdio`` unless the module is marked."""
    with selected_transport(getattr(request, "param", "stdio")) as name:
        yield name


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
