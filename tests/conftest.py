from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import stores  # noqa: E402 - after the path is set up
import turns  # noqa: E402
import zygote  # noqa: E402
from mcp_client import TRANSPORTS, selected_transport  # noqa: E402
from memtrio.actors.net.spawn import kill_owners  # noqa: E402
from memtrio.actors.store.direct import Direct  # noqa: E402
from memtrio.supervisors import faults  # noqa: E402

# A `memtrio mcp` a test starts serves embedded, in its own process, unless the test
# asks for the attach model: by default the first child of a home starts a detached
# owner that outlives it (docs/transports.md, "Attach"). Children started with this
# process's environment inherit this; `launch.server_env` sets it too.
os.environ["MEMTRIO_SERVE_ATTACH"] = "off"


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist)
        turns.open_run()
    config.addinivalue_line(
        "markers",
        "exclusive: a test that runs with no other test beside it in a parallel run "
        "(it measures latency or waits on a short deadline: tests/turns.py)",
    )
    config.addinivalue_line(
        "markers",
        "transports(*names, reason=...): the MCP transports open_client runs the test over, "
        "once each (a module's pytestmark = mcp_client.every_transport; a test that runs on "
        "fewer says why)",
    )
    config.addinivalue_line(
        "markers",
        "stores(*names): the store backends a module's tests run on (tests/stores.py)",
    )


def pytest_unconfigure(config: pytest.Config) -> None:
    zygote.stop()  # this process's fork server and the children it still has
    if not hasattr(config, "workerinput"):
        turns.close_run()


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook (without it: -p no:xdist)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    return turns.workers(os.cpu_count())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    """In a parallel run, an ``exclusive`` test (and a ``slow`` one: the soak tests
    measure memory and latency) waits for the machine to itself."""
    where = turns.directory()
    if where is None:
        return (yield)
    alone = any(item.get_closest_marker(mark) for mark in ("exclusive", "slow"))
    with turns.turn(where, alone=alone):
        return (yield)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``transport`` (and so `open_client`) by the closest ``transports`` mark."""
    marker = metafunc.definition.get_closest_marker("transports")
    if marker is None or "transport" not in metafunc.fixturenames:
        stores_only = metafunc.definition.get_closest_marker("stores")
        if stores_only is not None:  # a module on one transport, over both stores
            chosen_stores = os.environ.get("MEMTRIO_TEST_STORES")
            names = tuple(
                s for s in stores_only.args if not chosen_stores or s in chosen_stores.split(",")
            )
            metafunc.parametrize("store", names, indirect=True, scope="module")
        return
    names = marker.args
    assert names and set(names) <= set(TRANSPORTS), f"unknown transports {names}"
    if set(names) != set(TRANSPORTS):
        assert marker.kwargs.get("reason"), f"{metafunc.definition.nodeid}: say why not all"
    chosen = os.environ.get("MEMTRIO_TEST_TRANSPORTS")
    if chosen:  # e.g. MEMTRIO_TEST_TRANSPORTS=stdio for a quicker run
        names = tuple(n for n in names if n in chosen.split(","))
    stores_mark = metafunc.definition.get_closest_marker("stores")
    stores = stores_mark.args if stores_mark is not None else ("sqlite",)
    chosen_stores = os.environ.get("MEMTRIO_TEST_STORES")
    if chosen_stores:  # e.g. MEMTRIO_TEST_STORES=sqlite
        stores = tuple(s for s in stores if s in chosen_stores.split(","))
    # The transports do not depend on the store: PostgreSQL runs over stdio only.
    pairs = [(n, "sqlite") for n in names if "sqlite" in stores]
    if "postgresql" in stores and "stdio" in names:
        pairs.append(("stdio", "postgresql"))
    metafunc.parametrize(
        ("transport", "store"),
        pairs,
        indirect=True,
        scope="module",
        ids=[t if s == "sqlite" else f"{t}-{s}" for t, s in pairs],
    )


@pytest.fixture(scope="module", autouse=True)
def transport(request: pytest.FixtureRequest) -> Iterator[str]:
    """The transport `open_client` uses in this test: ``stdio`` unless the module is marked."""
    with selected_transport(getattr(request, "param", "stdio")) as name:
        yield name


@pytest.fixture(scope="module", autouse=True)
def store(request: pytest.FixtureRequest) -> Iterator[str]:
    """The store backend of this test's servers: ``sqlite`` unless the module is marked
    `stores.both_stores` (then also ``postgresql``: each home's store is a database of
    the session's PostgreSQL server, `stores.store_url`)."""
    name = getattr(request, "param", "sqlite")
    if name != "postgresql":
        yield name
        return
    server: stores.PgServer = request.getfixturevalue("pg_server")
    with stores.serving(server):
        yield name
    server.drop_homes()


@pytest.fixture(scope="session", autouse=True)
def no_owner_outlives_the_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A safety net: any owner (``memtrio serve --owner``) of a home under this session's
    temporary directory still running at the end is killed, with its process group."""
    yield
    kill_owners(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="session")
def pg_server() -> Iterator[stores.PgServer]:
    """One private PostgreSQL server (pgserver) for the whole session."""
    server = stores.PgServer()
    yield server
    server.close()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite store at the latest schema, made once per test process (`stores.sqlite_template`)."""
    return stores.sqlite_template(tmp_path_factory.mktemp("sqlite-template"))


@pytest.fixture(params=stores.STORES)
def direct(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Direct]:
    """A fresh store opened without its actors (`direct.Direct`), once on SQLite and once on
    PostgreSQL (a database of its own on the session's server): the storage contract suite
    drives every storage interface through it, on both backends. The store is new and at the
    latest schema, a copy of one migrated once per test process (`stores.new_sqlite_store`,
    `stores.PgServer.migrated_database`): migration has tests of its own."""
    url = None
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    if request.param == "postgresql":
        if os.environ.get("MEMTRIO_TEST_STORES") == "sqlite":
            pytest.skip("MEMTRIO_TEST_STORES=sqlite")
        url = request.getfixturevalue("pg_server").migrated_database()
    else:
        stores.new_sqlite_store(home / "memtrio.sqlite", request.getfixturevalue("sqlite_template"))
    store = Direct(home / "memtrio.sqlite", url)
    yield store
    store.close()
    if url is not None:
        request.getfixturevalue("pg_server").drop(url)


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
