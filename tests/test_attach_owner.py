"""Issue 31, items 1-3: the owner model of attach.

1. With no ``memtrio serve`` running, the first ``memtrio mcp`` starts the owner (a
   detached ``memtrio serve --owner`` of the home) and attaches to it; every later child
   attaches; the owner exits on its own after ``[serve] idle_exit`` without sessions.
2. The owner dies: each child answers its calls in flight "not acknowledged, retry",
   starts or finds a new owner, replays the client's session to it and serves on.
3. ``memtrio mcp --ui`` / ``MEMTRIO_MCP_UI=1``: the owner binds the dashboard and the
   child prints its URL once on stderr; headless otherwise.

Real processes: three agents' ``memtrio mcp`` children of one home, driven line by line
(`RawServer`, `Pipeline`). Every owner a test's children started is killed by pid, with
its process group, when the test ends (`owners_ended`), whatever happened.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import httpx2
import pytest
import trio
import waits
from gitrepo import make_repo
from memtrio.actors.chaos.checks import check_store
from memtrio.actors.net import relay, runtime, spawn
from memtrio.actors.net.connections import Connections
from memtrio.actors.net.owner import watch_idle
from memtrio.actors.net.runtime import pid_alive as alive
from memtrio.actors.net.spawn import kill_owners, owner_pids
from memtrio.actors.store.sqlite.db import DB_NAME
from memtrio.supervisors import config
from memtrio.supervisors.config import ServeConfig
from raw_server import Pipeline, RawServer, initialize_request, open_pipeline
from test_attach import child, status, stderr_of

# The default: the first child starts the owner.
AUTO = {"MEMTRIO_SERVE_ATTACH": "auto"}
STARTED = "memtrio: started memtrio serve pid {pid}, the owner of"
# How soon every child must serve again after its owner is killed (the figure).
BACK_WITHIN = 5.0


@pytest.fixture
def owners_ended(home: Path) -> Iterator[None]:
    """Whatever happens, no owner of ``home`` outlives the test."""
    yield
    kill_owners(home)
    assert not owner_pids(home)


def checkouts(tmp_path: Path, count: int) -> list[Path]:
    return [make_repo(tmp_path / f"repo{k}", {"README.md": f"{k}\n"}) for k in range(count)]


@asynccontextmanager
async def children(
    home: Path,
    cwds: Sequence[Path],
    args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    name: str = "agent",
) -> AsyncIterator[list[RawServer]]:
    """One ``memtrio mcp`` per directory, all started at once (attach = auto), each
    initialized (concurrently); killed on exit."""
    async with AsyncExitStack() as stack:
        kids = [
            await stack.enter_async_context(
                child(
                    home,
                    cwd,
                    f"{name}{k}" if name == "agent" else name,
                    args,
                    {**AUTO, **(env or {})},
                )
            )
            for k, cwd in enumerate(cwds)
        ]
        async with trio.open_nursery() as nursery:
            for kid in kids:
                nursery.start_soon(kid.initialize)
        yield kids


def the_owner(home: Path) -> int:
    pids = owner_pids(home)
    assert len(pids) == 1, f"owners of {home}: {pids}"
    return pids[0]


async def test_three_children_start_one_owner_and_share_it(
    home: Path, tmp_path: Path, owners_ended: None
) -> None:
    async with children(home, checkouts(tmp_path, 3)) as kids:
        reports = [await status(kid) for kid in kids]
        owner = the_owner(home)
        # One process serves the three sessions; none of them is a child.
        assert {r["pid"] for r in reports} == {owner}
        assert owner not in {kid.process.pid for kid in kids}
        assert reports[-1]["sessions"] == 3
        found, _ = runtime.read(home)
        assert found is not None and found.pid == owner
        # The first child started it; the others found it.
        said = [stderr_of(home, f"agent{k}") for k in range(3)]
        assert sum(STARTED.format(pid=owner) in text for text in said) == 1
        assert all(f"attaching to memtrio serve pid {owner}" in text for text in said)
        # Detached: its own session and process group, no descriptor of the child's.
        assert os.getsid(owner) == owner and os.getpgid(owner) == owner
        assert os.readlink(f"/proc/{owner}/fd/0") == os.devnull
        for fd in (1, 2):
            assert os.readlink(f"/proc/{owner}/fd/{fd}") == str(spawn.log_path(home))
        # Headless, no public listener: the attach endpoint only.
        assert found.url == "" and found.ui == ""
        for kid in kids:
            assert await kid.close() == 0
        # The sessions ended, the owner stays (for [serve] idle_exit, ten minutes).
        assert alive(owner)


async def burst(
    pipeline: Pipeline, tag: str, count: int, acked: dict[int, str], retried: list[str]
) -> None:
    """``count`` writes, one at a time; each answer is an acknowledgement (its memory id
    kept in ``acked``) or the relay's "not acknowledged, retry" error."""
    for n in range(count):
        content = f"burst {tag} write {n}"
        reply = await pipeline.call_tool("remember", {"content": content}, timeout=30)
        if "error" in reply:
            error = reply["error"]
            assert error["code"] == relay.NOT_ACKNOWLEDGED, reply
            assert error["message"].startswith("not acknowledged, retry"), reply
            assert error["data"]["retry"] is True
            retried.append(content)
            continue
        result = reply["result"]
        assert result["isError"] is False, reply
        acked[result["structuredContent"]["id"]] = content


async def test_the_owner_killed_mid_burst_every_child_serves_on_and_nothing_acked_is_lost(
    home: Path, tmp_path: Path, owners_ended: None
) -> None:
    acked: dict[int, str] = {}
    retried: list[str] = []
    # Each call spends 20 ms in the owner, so calls are in flight there at the kill even
    # when the children are slow to forward (two busy cores).
    slow = {"MEMTRIO_FAULTS": "session.dispatch=delay:0.02"}
    async with children(home, checkouts(tmp_path, 3), env=slow) as kids:
        owner = the_owner(home)
        async with AsyncExitStack() as stack:
            pipes = [await stack.enter_async_context(open_pipeline(kid)) for kid in kids]
            back: list[float] = []

            async def writer(pipe: Pipeline, tag: str) -> None:
                await burst(pipe, tag, 40, acked, retried)

            async def serving_again(pipe: Pipeline, killed_at: float) -> None:
                """Until a call succeeds (one sent before the child noticed gets "retry")."""
                while True:
                    reply = await pipe.call_tool("server_status", timeout=BACK_WITHIN * 3)
                    if "error" not in reply:
                        break
                    assert reply["error"]["code"] == relay.NOT_ACKNOWLEDGED, reply
                back.append(trio.current_time() - killed_at)
                assert reply["result"]["structuredContent"]["pid"] != owner, reply

            async with trio.open_nursery() as nursery:
                for k, pipe in enumerate(pipes):
                    nursery.start_soon(writer, pipe, f"{k}a")
                    nursery.start_soon(writer, pipe, f"{k}b")
                await waits.until(lambda: len(acked) >= 15, 30)
                os.kill(owner, signal.SIGKILL)
                killed_at = trio.current_time()
                for pipe in pipes:
                    nursery.start_soon(serving_again, pipe, killed_at)
            for pipe in pipes:
                assert (
                    pipe.violations == pipe.stats.orphans == []
                )  # each answered once, nothing else
        assert len(back) == 3 and max(back) < BACK_WITHIN, back
        new_owner = the_owner(home)
        assert new_owner != owner
        assert {(await status(kid))["pid"] for kid in kids} == {new_owner}
        for kid in kids:
            assert await kid.close() == 0
    # The calls in flight at the kill were answered "retry"; the others acknowledged.
    assert retried, "no call was in flight at the kill: the test proved nothing"
    assert len(acked) + len(retried) == 3 * 2 * 40
    kill_owners(home)
    check = check_store(home / DB_NAME, acked)
    assert check.violations == [] and check.lost == 0
    assert check.acked == len(acked)


async def test_the_session_is_replayed_to_the_new_owner(
    home: Path, tmp_path: Path, owners_ended: None
) -> None:
    """The client initialized once (an older protocol version, a Claude client's name:
    markdown content); after its owner is killed, its calls are still served in that
    version and that content shape, and it never sees the relay's own requests."""
    (repo,) = checkouts(tmp_path, 1)
    async with child(home, repo, "agent", env=AUTO) as kid:
        await kid.send(initialize_request("2025-03-26", client="claude-code"))
        reply = await kid.read()
        assert reply["result"]["protocolVersion"] == "2025-03-26"
        await kid.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        owner = the_owner(home)
        before = (await kid.call_tool("server_status"))["result"]
        os.kill(owner, signal.SIGKILL)
        async with open_pipeline(kid) as pipe:
            while "error" in (reply := await pipe.call_tool("server_status", timeout=15)):
                assert reply["error"]["code"] == relay.NOT_ACKNOWLEDGED, reply
            after = reply["result"]
            assert pipe.violations == pipe.stats.orphans == []
        assert the_owner(home) != owner
        assert "re-attached to memtrio serve pid" in stderr_of(home, "agent")
        # The relay holds back the answers to its own requests only, whatever the ids.
        await kid.send_request("memtrio-relay/initialize-1", "ping")
        assert (await kid.read())["id"] == "memtrio-relay/initialize-1"
        for result in (before, after):
            # 2025-03-26 has no structuredContent; a Claude client gets markdown + JSON.
            assert "structuredContent" not in result
            assert len(result["content"]) == 2
        assert await kid.close() == 0


async def test_the_owner_exits_on_its_own_after_idle_exit_without_sessions(
    home: Path, tmp_path: Path, owners_ended: None
) -> None:
    (repo,) = checkouts(tmp_path, 1)
    idle = {"MEMTRIO_SERVE_IDLE_EXIT": "2"}
    async with child(home, repo, "agent", env={**AUTO, **idle}) as kid:
        await kid.initialize()
        owner = the_owner(home)
        await trio.sleep(4)  # longer than idle_exit, with a session: it stays
        assert alive(owner)
        assert (await status(kid))["pid"] == owner
        assert await kid.close() == 0
        closed = trio.current_time()
    await waits.until(lambda: not alive(owner), 20)
    assert trio.current_time() - closed >= 1.5
    assert not runtime.runtime_path(home).exists()


async def test_the_idle_timer_stops_the_owner_ten_minutes_after_the_last_session(
    autojump_clock: trio.abc.Clock,
) -> None:
    seconds = ServeConfig().idle_exit
    assert seconds == 600
    connections = Connections(8)
    fired: list[float] = []
    session = connections.open("attach", "127.0.0.1:1")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            watch_idle, connections, seconds, lambda: fired.append(trio.current_time())
        )
        await trio.sleep(3 * 3600)  # hours with a session: it stays
        assert not fired
        connections.close(session)
        closed = trio.current_time()
        await trio.sleep(seconds - 2)
        assert not fired
        await trio.sleep(4)
    assert len(fired) == 1 and seconds <= fired[0] - closed <= seconds + 1


async def test_two_children_racing_at_an_empty_home_start_one_owner(
    home: Path, tmp_path: Path, owners_ended: None
) -> None:
    """The owner lock: children started at the same moment never start two owners."""
    repos = checkouts(tmp_path, 2)
    for _ in range(2):
        async with children(home, repos) as kids:
            owner = the_owner(home)
            assert {(await status(kid))["pid"] for kid in kids} == {owner}
            for kid in kids:
                assert await kid.close() == 0
        kill_owners(home)
        runtime.runtime_path(home).unlink(missing_ok=True)


# -- 3. the dashboard ------------------------------------------------------------------------

DASHBOARD = "memtrio: dashboard at "


def dashboard_lines(home: Path, name: str) -> list[str]:
    return [line for line in stderr_of(home, name).splitlines() if line.startswith(DASHBOARD)]


@pytest.mark.parametrize("how", ["--ui", "MEMTRIO_MCP_UI=1"])
async def test_mcp_ui_binds_the_dashboard_on_the_owner_and_prints_its_url_once(
    home: Path, tmp_path: Path, owners_ended: None, how: str
) -> None:
    args, env = (["--ui"], {}) if how == "--ui" else ([], {"MEMTRIO_MCP_UI": "1"})
    a, b = checkouts(tmp_path, 2)
    async with (
        children(home, [a], args, env) as (first,),
        children(home, [b], args, env, name="agent1") as (second,),
    ):
        # A first child answers initialize itself while its owner starts: a tool call is
        # the owner's, so the owner (and each child's dashboard line) is there after it.
        await status(first)
        await status(second)
        owner = the_owner(home)
        found, _ = runtime.read(home)
        assert found is not None and found.pid == owner and found.ui.startswith("http://127.0.0.1:")
        for name in ("agent0", "agent1"):  # the one that started it, and the one that found it
            assert dashboard_lines(home, name) == [DASHBOARD + found.ui]
        token = found.ui.split("token=", 1)[1]
        api = found.ui.split("?")[0] + "api/overview"
        async with httpx2.AsyncClient() as http:
            assert (await http.get(found.ui)).status_code == 200
            opened = await http.get(api, headers={"X-Memtrio-Token": token})
            assert opened.status_code == 200, opened.text
            assert (await http.get(api)).status_code in (401, 403)  # no token, no dashboard


async def test_an_owner_without_a_dashboard_is_named_in_one_line(
    home: Path, tmp_path: Path, owners_ended: None
) -> None:
    a, b = checkouts(tmp_path, 2)
    async with children(home, [a]) as (headless,):
        assert dashboard_lines(home, "agent0") == []
        await status(headless)  # its owner is up (a headless one)
        async with child(home, b, "ui", ["--ui"], AUTO) as wanting:
            await wanting.initialize()
            lines = [s for s in stderr_of(home, "ui").splitlines() if "without a dashboard" in s]
            assert len(lines) == 1 and "memtrio ui" in lines[0], stderr_of(home, "ui")
            assert await wanting.close() == 0
        assert await headless.close() == 0


# -- what the owner model does not change -----------------------------------------------------


async def test_a_stale_runtime_file_is_replaced_by_a_new_owner(
    home: Path, tmp_path: Path, owners_ended: None
) -> None:
    """The owner was killed while no child ran: its file names a dead pid. The next child
    removes it and starts a new owner (with attach = "existing" it would serve embedded)."""
    runtime.publish(
        home, runtime.Runtime(pid=dead_pid(), host="127.0.0.1", port=9, secret="ab" * 32)
    )
    async with children(home, checkouts(tmp_path, 1)) as (kid,):
        owner = the_owner(home)
        assert (await status(kid))["pid"] == owner
        found, _ = runtime.read(home)
        assert found is not None and found.pid == owner
        assert await kid.close() == 0


@pytest.mark.parametrize("loose", ["run/", "home"])
async def test_no_owner_is_started_in_a_home_others_can_write(
    home: Path, tmp_path: Path, owners_ended: None, loose: str
) -> None:
    """An owner would publish its secret where others could replace it: the child says why
    in one line, starts nothing and serves embedded."""
    target = home / runtime.RUN_DIR if loose == "run/" else home
    target.mkdir(mode=0o700, exist_ok=True)
    target.chmod(0o777)
    async with children(home, checkouts(tmp_path, 1)) as (kid,):
        assert (await status(kid))["pid"] == kid.process.pid  # embedded
        assert await kid.close() == 0
    assert owner_pids(home) == []
    said = stderr_of(home, "agent0")
    assert "serving embedded" in said and "writable by group or others" in said, said
    assert "started memtrio serve" not in said
    target.chmod(0o700)


def dead_pid() -> int:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(done.stdout)


@pytest.mark.parametrize(
    ("given", "mode"),
    [
        ("auto", "auto"),
        ("existing", "existing"),
        ("off", "off"),
        ("true", "auto"),
        ("false", "off"),
        ("on", "auto"),
    ],
)
def test_attach_takes_auto_existing_off_and_the_earlier_booleans(
    home: Path, given: str, mode: str
) -> None:
    assert config.load(home, env={"MEMTRIO_SERVE_ATTACH": given}).serve.attach == mode
    toml = given if given in ("true", "false") else f'"{given}"'
    (home / "config.toml").write_text(f"[serve]\nattach = {toml}\n")
    assert config.load(home, env={}).serve.attach == mode


def test_a_bad_attach_value_is_a_configuration_error(home: Path) -> None:
    with pytest.raises(
        config.ConfigError, match='serve.attach must be one of "auto", "existing", "off"'
    ):
        config.load(home, env={"MEMTRIO_SERVE_ATTACH": "sometimes"})


async def test_an_embedded_mcp_ui_binds_the_dashboard_itself(
    home: Path, tmp_path: Path, owners_ended: None
) -> None:
    (repo,) = checkouts(tmp_path, 1)
    async with child(home, repo, "solo", ["--no-attach", "--ui"], AUTO) as solo:
        await solo.initialize()
        assert (await status(solo))["pid"] == solo.process.pid
        # The dashboard starts after the stdio session.
        await waits.until(lambda: dashboard_lines(home, "solo"), 20)
        (line,) = dashboard_lines(home, "solo")
        async with httpx2.AsyncClient() as http:
            assert (await http.get(line.removeprefix(DASHBOARD))).status_code == 200
        assert await solo.close() == 0
    assert owner_pids(home) == []


async def test_a_batch_the_owner_refused_is_not_answered_again_when_it_dies(
    home: Path, tmp_path: Path, owners_ended: None
) -> None:
    """MCP 2025-11-25 has no batches: the owner answers one with a single refusal (id
    null). Its elements were answered then; the owner's death must not answer them again."""
    (repo,) = checkouts(tmp_path, 1)
    async with child(home, repo, "agent", env=AUTO) as kid:
        await kid.initialize()
        pings = [{"jsonrpc": "2.0", "id": n, "method": "ping"} for n in (7, 8)]
        await kid.send(pings)
        refusal = await kid.read()
        assert refusal["id"] is None and refusal["error"]["code"] == -32600, refusal
        os.kill(the_owner(home), signal.SIGKILL)
        async with open_pipeline(kid) as pipe:
            while "error" in (reply := await pipe.call_tool("server_status", timeout=15)):
                assert reply["error"]["code"] == relay.NOT_ACKNOWLEDGED, reply
            assert pipe.violations == pipe.stats.orphans == []  # nothing for 7 or 8
        assert await kid.close() == 0
