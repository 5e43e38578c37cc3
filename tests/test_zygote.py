"""The tests' fork server (`zygote`) stands in for ``python -m memtrio.supervisors.cli``:
a test that starts a command through it sees the same output, exit status and signals,
and nothing it started outlives it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest
import zygote
from launch import server_env
from raw_server import initialize_request
from waits import until_sync

REAL = [sys.executable, "-m", "memtrio.supervisors.cli"]


def forked(args: list[str]) -> list[str]:
    command = zygote.command(args)
    if not zygote.forks(command):
        pytest.skip("the zygote is off (MEMTRIO_TEST_ZYGOTE=off) or could not start")
    return command


def children() -> set[int]:
    forked([])  # the zygote started (a test's first look may come before any command)
    assert zygote._zygote is not None
    return {p.pid for p in psutil.Process(zygote._zygote.pid).children()}


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def new_child(before: set[int]) -> int:
    """The zygote's one child that was not among ``before``."""
    assert until_sync(lambda: children() - before, timeout=30), "no child was forked"
    (child,) = children() - before
    return child


@pytest.mark.parametrize(
    "args",
    [["--version"], ["nosuchcommand"], ["remember", "the zygote stands in"], ["show", "99"]],
)
def test_a_command_prints_and_ends_as_the_real_one(tmp_path: Path, args: list[str]) -> None:
    outcomes = []
    for name, command in (("fork", forked(args)), ("real", [*REAL, *args])):
        home = tmp_path / name
        home.mkdir()
        done = subprocess.run(
            command, env=server_env(home), cwd=home, capture_output=True, text=True, timeout=60
        )
        outcomes.append((done.returncode, done.stdout, done.stderr.replace(str(home), "HOME")))
    assert outcomes[0] == outcomes[1]


def test_standard_input_and_a_session_reach_the_child(tmp_path: Path) -> None:
    init = initialize_request(client="zygote-test")
    done = subprocess.run(
        forked(["mcp"]),
        env=server_env(tmp_path),
        cwd=tmp_path,
        input=json.dumps(init) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[0])["result"]["serverInfo"]["name"] == "memtrio"
    assert zygote.pid_of(os.getpid()) == os.getpid()  # not a stand-in: itself


@contextmanager
def forked_mcp(home: Path, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """A ``memtrio mcp`` started through the zygote (stdin and stdout piped); killed and
    waited for when the block ends."""
    process = subprocess.Popen(
        forked(["mcp"]),
        env={**server_env(home), **(env or {})},
        cwd=home,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield process
    finally:
        process.kill()
        process.wait()


def test_a_signal_reaches_the_child_and_its_end_is_the_stand_ins(tmp_path: Path) -> None:
    before = children()
    with forked_mcp(tmp_path) as process:
        child = new_child(before)
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write((json.dumps(initialize_request()) + "\n").encode())
        process.stdin.flush()
        assert b'"serverInfo"' in process.stdout.readline()  # serving: its handlers are set
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0  # memtrio's answer to SIGTERM: a clean stop
        assert until_sync(lambda: gone(child), timeout=10)


def test_a_stand_in_killed_outright_takes_its_child_with_it(tmp_path: Path) -> None:
    before = children()
    with forked_mcp(tmp_path) as process:
        child = new_child(before)
        process.kill()
        assert process.wait(timeout=30) == -signal.SIGKILL
        assert until_sync(lambda: gone(child), timeout=10)


def test_an_environment_the_zygote_cannot_give_runs_the_real_command(tmp_path: Path) -> None:
    # A PYTHON* variable (here the fault handler's) takes effect at an interpreter's start:
    # the stand-in becomes the real command instead (exec: the same pid), not a child.
    before = children()
    with forked_mcp(tmp_path, {"PYTHONFAULTHANDLER": "1"}) as process:
        assert until_sync(
            lambda: "memtrio.supervisors.cli" in " ".join(psutil.Process(process.pid).cmdline()),
            timeout=30,
        )
        assert children() == before
