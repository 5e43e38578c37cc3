"""An owner that cannot start (issue 37, items 1 and 2): the client gets its reason as an
answer within seconds, no child starts owners in a loop, and the reason is one line.

Each case is a real ``memtrio mcp`` (attaching by default: ``[serve] attach = "auto"``)
driven by the official MCP SDK client over stdio, on a home that no owner can serve from:
a store of a newer memtrio, a damaged store (``memtrio.sqlite`` a directory, a garbage
file), a full disk (a file-size limit, as the disk-full tests set it), an unwritable
home, and each hostile shape of ``run/`` and ``logs/`` (``run/owner.lock`` a symbolic
link or a directory, ``logs/`` a file, an older runtime file whose pid is dead).

Before the fix: a tool call was never answered while the child started an owner every
0.6 s (newer or damaged store, full disk); ``initialize`` was not answered at all (the
lock or the log in the way: the child's stdin, made blocking again when a copy of it was
collected, froze the embedded server's event loop); the older runtime file kept every
child embedded for good; and the child's stderr held an exception's class name before
the line that says what to do.

Each case starts a real child (and often an owner), a few seconds each. The default run
keeps one case of each family: a damaged store (a garbage file), a home under a file, and
``run/owner.lock`` a symbolic link, with every single case (full disk, unwritable home,
older runtime file, owners exiting without a reason, an owner going away); the other
shapes of the same families (a newer schema, the store a directory, the home a file, the
lock a directory, ``logs/`` a file) go through the same refusal and fallback paths
with their own message each, and run with ``-m slow``.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio
from launch import server_command, server_env
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from memtrio.actors.net import attach, relay, runtime, spawn
from memtrio.actors.net.spawn import kill_owners, owner_pids

AUTO = {"MEMTRIO_SERVE_ATTACH": "auto", "MEMTRIO_CODE": "off"}
# The client's patience for each answer (the bound).
ANSWER_WITHIN = 10.0
OWNER_STARTED = "memtrio serve: the owner of "


@pytest.fixture
def owners_ended(tmp_path: Path) -> Iterator[None]:
    yield
    kill_owners(tmp_path)
    assert owner_pids(tmp_path) == []


@dataclass
class Outcome:
    """What the client got: ``initialize``'s error (None: it succeeded), the tool call's
    result text or error message, and the child's stderr."""

    initialize_error: str | None
    call: str
    call_failed: bool
    stderr: str


async def ask(
    home: Path, cwd: Path, wrap: list[str] | None = None, env: dict[str, str] | None = None
) -> Outcome:
    """Initialize and call ``stats`` through ``memtrio mcp``, each within `ANSWER_WITHIN`."""
    command = [*(wrap or []), *server_command()]
    params = StdioServerParameters(
        command=command[0],
        args=command[1:],
        env=server_env(home, {**AUTO, **(env or {})}),
        cwd=str(cwd),
    )
    errpath = cwd / "child-stderr.txt"
    init_error: str | None = None
    call, failed = "", False
    with errpath.open("w") as errlog:
        started = trio.current_time()
        try:
            # The SDK times each request out after read_timeout_seconds.
            async with Client(
                stdio_client(params, errlog=errlog),
                read_timeout_seconds=ANSWER_WITHIN,
                mode="auto",
            ) as client:
                assert trio.current_time() - started < ANSWER_WITHIN
                with trio.fail_after(ANSWER_WITHIN):
                    try:
                        result = await client.call_tool("stats", {})
                        call = str(result.content[0].text)  # type: ignore[union-attr]
                    except MCPError as exc:
                        call, failed = exc.error.message, True
        except (MCPError, BaseExceptionGroup) as exc:
            init_error = mcp_error(exc)
        assert trio.current_time() - started < 2 * ANSWER_WITHIN + 5
    return Outcome(init_error, call, failed, errpath.read_text())


def mcp_error(exc: BaseException) -> str:
    """The message of the JSON-RPC error the client got (raised as itself or in a group)."""
    if isinstance(exc, MCPError):
        return exc.error.message
    if isinstance(exc, BaseExceptionGroup):
        matched, _ = exc.split(MCPError)
        while isinstance(matched, BaseExceptionGroup):
            first = matched.exceptions[0]
            if isinstance(first, MCPError):
                return first.error.message
            matched = first  # type: ignore[assignment]
    raise exc


def owners_started(home: Path) -> int:
    log = home / spawn.LOG_DIR / spawn.LOG_FILE
    if not log.is_file():
        return 0
    return sum(line.startswith(OWNER_STARTED) for line in log.read_text().splitlines())


def memtrio_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("memtrio")]


def assert_refused_in_one_line(outcome: Outcome, *says: str) -> None:
    """The session was answered with the reason (which says what to do), and stderr holds
    that one line, without an exception's class name."""
    message = outcome.initialize_error if outcome.initialize_error is not None else outcome.call
    assert outcome.initialize_error is not None or outcome.call_failed, outcome
    for words in says:
        assert words in message, message
    lines = memtrio_lines(outcome.stderr)
    assert lines == [f"memtrio: {message}"], outcome.stderr
    assert "Error:" not in outcome.stderr and "Errno" not in outcome.stderr, outcome.stderr


# -- a store no owner can open: answered with the reason, one owner started -----------------


def newer_store(home: Path) -> None:
    home.mkdir(mode=0o700)
    with sqlite3.connect(home / "memtrio.sqlite") as db:
        db.execute("PRAGMA user_version = 99")


def store_a_directory(home: Path) -> None:
    (home / "memtrio.sqlite").mkdir(parents=True)


def store_garbage(home: Path) -> None:
    home.mkdir(mode=0o700)
    (home / "memtrio.sqlite").write_bytes(b"not a database at all\n" * 400)


@pytest.mark.parametrize(
    ("make", "says"),
    [
        pytest.param(
            newer_store,
            ("schema version 99, newer than this memtrio", "upgrade memtrio"),
            marks=pytest.mark.slow,
        ),
        pytest.param(
            store_a_directory,
            ("is a directory, not a database", "move it away"),
            marks=pytest.mark.slow,
        ),
        (store_garbage, ("is damaged", "run memtrio doctor")),
    ],
    ids=["newer-schema", "store-a-directory", "store-garbage"],
)
async def test_an_owner_that_cannot_open_the_store_answers_the_call_with_why(
    tmp_path: Path, owners_ended: None, make: object, says: tuple[str, ...]
) -> None:
    home = tmp_path / "home"
    make(home)  # type: ignore[operator]
    outcome = await ask(home, tmp_path)
    assert_refused_in_one_line(outcome, *says)
    assert owners_started(home) == 1  # it said why: never started again


async def test_a_full_disk_is_answered_with_why_and_no_owner_loop(
    tmp_path: Path, owners_ended: None
) -> None:
    # A file-size limit (as tests/test_chaos_regressions.py fills the disk) on the child and
    # so on every owner it starts: the store cannot even be created.
    home = tmp_path / "home"
    limit = 16 * 1024
    wrap = [
        sys.executable,
        "-c",
        "import os, resource, sys; "
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit})); "
        "os.execv(sys.argv[1], sys.argv[1:])",
    ]
    outcome = await ask(home, tmp_path, wrap=wrap)
    assert_refused_in_one_line(outcome, "memory store", "free some space")
    assert owners_started(home) == 1
    assert resource.getrlimit(resource.RLIMIT_FSIZE)[0] != limit  # only the child was limited


def read_only_mount(path: Path) -> list[str] | None:
    """A private mount namespace where ``path`` is read-only (root with unshare), else None."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return None
    script = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" "$0" && exec "$@"'
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", script, str(path), "true"], capture_output=True, timeout=30
    )
    return ["unshare", "-m", "sh", "-c", script, str(path)] if probe.returncode == 0 else None


async def test_an_unwritable_home_is_answered_with_why_in_one_line(
    tmp_path: Path, owners_ended: None
) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    wrap = read_only_mount(home)
    if wrap is None:
        pytest.skip("needs root and a private mount namespace (unshare) for a read-only home")
    outcome = await ask(home, tmp_path, wrap=wrap)
    assert outcome.initialize_error is not None, outcome
    assert_refused_in_one_line(outcome, "is not writable", "choose another home")
    assert owners_started(home) == 0


@pytest.mark.parametrize("where", [pytest.param("a-file", marks=pytest.mark.slow), "under-a-file"])
async def test_a_home_that_cannot_be_a_directory_is_one_line_and_an_answer(
    tmp_path: Path, owners_ended: None, where: str
) -> None:
    # Item 2: `memtrio: serving embedded: NotADirectoryError: [Errno 20] ...` came first.
    plain = tmp_path / "plainfile"
    plain.write_text("not a home\n")
    home = plain if where == "a-file" else plain / "home"
    outcome = await ask(home, tmp_path)
    assert_refused_in_one_line(outcome, str(home), "choose another home")


# -- a hostile run/ or logs/: the session is served (embedded), at once ---------------------


def lock_a_symlink(home: Path) -> None:
    (home / "run").mkdir(mode=0o700, parents=True)
    (home / "run" / spawn.LOCK_FILE).symlink_to(home / "elsewhere")


def lock_a_directory(home: Path) -> None:
    (home / "run" / spawn.LOCK_FILE).mkdir(parents=True)
    (home / "run").chmod(0o700)


def logs_a_file(home: Path) -> None:
    home.mkdir(mode=0o700)
    (home / spawn.LOG_DIR).write_text("not a directory\n")


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lock_a_symlink, "owner.lock is a symbolic link"),
        pytest.param(
            lock_a_directory,
            "owner.lock is a directory, not the owner lock; remove it",
            marks=pytest.mark.slow,
        ),
        pytest.param(
            logs_a_file,
            "logs (or a directory above it) is not a directory; move it away",
            marks=pytest.mark.slow,
        ),
    ],
    ids=["lock-a-symlink", "lock-a-directory", "logs-a-file"],
)
async def test_a_hostile_run_or_logs_serves_the_session_embedded_at_once(
    tmp_path: Path, owners_ended: None, make: object, says: str
) -> None:
    home = tmp_path / "home"
    home.parent.mkdir(exist_ok=True)
    make(home)  # type: ignore[operator]
    outcome = await ask(home, tmp_path)
    assert outcome.initialize_error is None and not outcome.call_failed, outcome
    assert json.loads(outcome.call)["memories"] == 0
    assert says in outcome.stderr
    assert "Error:" not in outcome.stderr and "Errno" not in outcome.stderr, outcome.stderr
    assert owners_started(home) == 0


async def test_an_older_runtime_file_whose_pid_is_dead_is_replaced_by_an_owner(
    tmp_path: Path, owners_ended: None
) -> None:
    # The format of an older memtrio serve: a bearer token, no attach secret. Its process is
    # gone, so it is stale: before the fix it was declined first, and every child served
    # embedded until someone removed it by hand.
    home = tmp_path / "home"
    (home / "run").mkdir(mode=0o700, parents=True)
    home.chmod(0o700)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        text=True,
        capture_output=True,
        check=True,
    )
    path = runtime.runtime_path(home)
    old = {"pid": int(dead.stdout), "host": "127.0.0.1", "port": 40113, "token": "abc"}
    path.write_text(json.dumps(old))
    path.chmod(0o600)
    outcome = await ask(home, tmp_path)
    assert outcome.initialize_error is None and not outcome.call_failed, outcome
    assert "started memtrio serve pid" in outcome.stderr, outcome.stderr
    assert owners_started(home) == 1
    found, _ = runtime.read(home)
    assert found is not None and found.secret, "the new owner's runtime file replaced it"


# -- owners that keep exiting at start: at most MAX_OWNER_STARTS, with a backoff ------------


async def test_owners_that_exit_at_start_without_a_reason_are_started_three_times_at_most(
    tmp_path: Path, autojump_clock: trio.abc.Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    launched: list[float] = []

    class Exited:
        pid = 4242

        def poll(self) -> int:
            return -9  # killed at start: no line saying why

    def launch(how: spawn.Launch) -> tuple[Exited, int]:
        launched.append(trio.current_time())
        return Exited(), 0

    starts = attach.Starts()
    how = spawn.Launch(home, tmp_path)
    monkeypatch.setattr(spawn, "launch", launch)
    for _ in range(attach.MAX_OWNER_STARTS):
        with pytest.raises(spawn.OwnerFailed, match="exited with code -9"):
            await attach.start_owner(home, how, starts=starts)
    with pytest.raises(relay.GaveUp, match="gave up starting the owner .* after 3 attempts"):
        await attach.start_owner(home, how, starts=starts)
    assert len(launched) == attach.MAX_OWNER_STARTS
    pauses = [b - a for a, b in zip(launched, launched[1:], strict=False)]
    assert pauses == pytest.approx([attach.START_BACKOFF, 2 * attach.START_BACKOFF], abs=0.1)


async def test_a_session_whose_owner_goes_away_and_cannot_start_again_is_answered_with_why(
    tmp_path: Path, owners_ended: None
) -> None:
    # A home shared by two virtual environments: the other one upgraded the store while
    # this session's owner ran; the owner goes away and no new one of this memtrio can open
    # it. The relay used to start an owner every 0.6 s for 30 s, the call unanswered.
    home = tmp_path / "home"
    command = server_command()
    params = StdioServerParameters(
        command=command[0], args=command[1:], env=server_env(home, AUTO), cwd=str(tmp_path)
    )
    errpath = tmp_path / "child-stderr.txt"
    with errpath.open("w") as errlog:
        async with Client(
            stdio_client(params, errlog=errlog), read_timeout_seconds=60, mode="auto"
        ) as client:
            await client.call_tool("remember", {"content": "the owner serves this one"})
            with sqlite3.connect(home / "memtrio.sqlite") as db:
                db.execute("PRAGMA user_version = 99")
            assert len(kill_owners(home)) == 1
            with trio.fail_after(ANSWER_WITHIN):
                for _ in range(2):  # a call sent as the owner died: "not acknowledged, retry"
                    with pytest.raises(MCPError) as info:
                        await client.call_tool("stats", {})
                    if "not acknowledged, retry" not in info.value.error.message:
                        break
                assert "newer than this memtrio" in info.value.error.message
                assert "upgrade memtrio" in info.value.error.message
                with pytest.raises(MCPError, match="upgrade memtrio"):
                    await client.call_tool("recall", {"query": "owner"})
    assert owners_started(home) == 2  # the first, and the one that said why
    assert errpath.read_text().count("upgrade memtrio") == 1, errpath.read_text()
