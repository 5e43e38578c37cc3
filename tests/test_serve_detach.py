"""``memtrio serve --detach`` returns once the server is ready, so the ``memtrio mcp`` run
right after it attaches (issue 32, item 9: the README tour pasted as one block ran
``memtrio serve &`` then at once ``memtrio mcp``, which found no server 1 time in 3);
``memtrio serve --stop`` ends it by the pid of its runtime file.

Every server these tests start is ended by its pid in a ``finally`` (``kill_owners``
finds detached servers by their ``--detached`` mark), so none outlives a test.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import zygote
from launch import server_env
from memtrio.actors.net import runtime, spawn

PING = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'
DETACHED = re.compile(
    r"memtrio serve: listening on http://127\.0\.0\.1:(\d+)/mcp \(pid (\d+)\), detached"
)


def memtrio(
    home: Path, *args: str, stdin: bytes = b"", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        zygote.command(args),
        input=stdin,
        env=server_env(home, {"MEMTRIO_CODE": "off", **(env or {})}),
        cwd=home,
        capture_output=True,
        timeout=90,
    )


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    home = tmp_path / "home"
    home.mkdir()
    try:
        yield home
    finally:
        spawn.kill_owners(home)
        assert spawn.owner_pids(home) == []


def test_mcp_run_right_after_serve_detach_attaches(home: Path) -> None:
    started = memtrio(home, "serve", "--detach", "--bind", "127.0.0.1:0")
    err = started.stderr.decode()
    assert started.returncode == 0, err
    assert started.stdout == b""  # nothing of the server's reaches the terminal's stdout
    match = DETACHED.search(err)
    assert match is not None, err
    pid = int(match.group(2))
    assert runtime.pid_alive(pid) and spawn.owner_pids(home) == [pid]
    assert f"{home}/logs/serve.log" in err and "memtrio serve --stop" in err

    # At once, as a pasted block runs it: the child finds the server, no retry.
    ping = memtrio(home, "mcp", stdin=PING, env={"MEMTRIO_SERVE_ATTACH": "existing"})
    assert json.loads(ping.stdout) == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert f"memtrio: attaching to memtrio serve pid {pid}" in ping.stderr.decode()

    stopped = memtrio(home, "serve", "--stop")
    assert stopped.returncode == 0, stopped.stderr
    assert f"stopped pid {pid}" in stopped.stderr.decode()
    assert not runtime.pid_alive(pid), "--stop returns once the server has exited"
    assert not runtime.runtime_path(home).exists(), "it withdrew its runtime file"
    assert "listening on" in spawn.log_path(home, spawn.DETACHED_LOG_FILE).read_text()


def test_serve_detach_exits_with_the_servers_error_when_it_cannot_start(home: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = memtrio(home, "serve", "--detach", "--bind", f"127.0.0.1:{port}")
    err = started.stderr.decode()
    assert started.returncode != 0
    assert err.startswith("memtrio: memtrio serve did not start: it exited with code")
    assert "already in use" in err and len(err.strip().splitlines()) == 1, err
    assert spawn.owner_pids(home) == []


def test_serve_detach_refuses_a_second_server_of_the_home(home: Path) -> None:
    first = memtrio(home, "serve", "--detach", "--bind", "127.0.0.1:0")
    assert first.returncode == 0, first.stderr
    match = DETACHED.search(first.stderr.decode())
    assert match is not None
    second = memtrio(home, "serve", "--detach", "--bind", "127.0.0.1:0")
    assert second.returncode == 1
    assert f"already runs (pid {match.group(2)}" in second.stderr.decode()
    assert spawn.owner_pids(home) == [int(match.group(2))]


def test_serve_stop_says_when_no_server_runs(home: Path) -> None:
    stopped = memtrio(home, "serve", "--stop")
    assert stopped.returncode == 1
    assert stopped.stderr.decode().startswith(f"memtrio: no memtrio serve of {home} runs")


def test_serve_stop_leaves_a_reused_pid_alone(home: Path) -> None:
    """A runtime file left by a killed server whose pid now belongs to another program:
    ``--stop`` signals nothing and removes the stale file."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        runtime.publish(home, runtime.Runtime(pid=other.pid, host="127.0.0.1", port=9))
        stopped = memtrio(home, "serve", "--stop")
        assert stopped.returncode == 1
        assert other.poll() is None, "another program was signalled"
        assert not runtime.runtime_path(home).exists()
    finally:
        other.kill()
        other.wait()


def test_doctor_says_which_server_of_the_home_runs_and_how_to_stop_it(home: Path) -> None:
    """``memtrio mcp`` leaves an owner running ten minutes after its last session: the
    README points at ``memtrio doctor`` to see it, and ``memtrio serve --stop`` to end it."""

    def server_line() -> str:
        done = memtrio(home, "doctor", "--json", env={"MEMTRIO_EMBEDDINGS": "off"})
        return str(json.loads(done.stdout)["server"])

    assert server_line().startswith("none running")
    attach = {"MEMTRIO_EMBEDDINGS": "off", "MEMTRIO_SERVE_ATTACH": "auto"}
    answered = memtrio(home, "mcp", stdin=PING, env=attach)
    assert b'"result":{}' in answered.stdout, answered.stderr.decode()
    (pid,) = spawn.owner_pids(home)
    line = server_line()
    assert f"pid {pid}, the owner memtrio mcp attaches to" in line
    assert "10 min after its last session" in line and "memtrio serve --stop" in line
    stopped = memtrio(home, "serve", "--stop")
    assert stopped.returncode == 0, stopped.stderr.decode()
    assert server_line().startswith("none running")


def test_serve_ui_detach_prints_the_dashboard_and_records_it_in_the_runtime_file(
    home: Path,
) -> None:
    # Issue 37, item 5: the detached server's dashboard address was only in logs/serve.log,
    # and run/serve.json said "ui": "", unlike the foreground and memtrio mcp --ui.
    started = memtrio(home, "serve", "--ui", "--detach", "--bind", "127.0.0.1:0")
    err = started.stderr.decode()
    assert started.returncode == 0, err
    shown = re.search(r"memtrio serve: dashboard at (http://127\.0\.0\.1:\d+/\S+)", err)
    assert shown is not None, err
    found, _ = runtime.read(home)
    assert found is not None and found.ui == shown.group(1), (found, err)
    with urllib.request.urlopen(found.ui, timeout=10) as page:  # the token opens it
        assert page.status == 200
    # A memtrio mcp --ui attached to it names the same dashboard.
    attached = memtrio(home, "mcp", "--ui", stdin=PING, env={"MEMTRIO_SERVE_ATTACH": "existing"})
    assert f"memtrio: dashboard at {found.ui}" in attached.stderr.decode()
