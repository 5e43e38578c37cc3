"""Network transports: a real ``memtrio serve`` whose clients misbehave or whose process dies.

- `net_drop_resume`: HTTP sessions' POST streams cut after the priming event, resumed
  with ``Last-Event-ID``: every reply exactly once, every acknowledged write stored;
- `net_clients_vanish`: TCP and HTTP clients that drop their connection in the middle
  of a call, round after round, while other sessions keep writing;
- `net_handler_crash`: one TCP and one HTTP connection's Session crash
  (``session.dispatch:<connection id>``) while 10+ other sessions write;
- `net_owner_killed`: ``kill -9`` of a ``memtrio serve`` started by hand, with ``memtrio
  mcp`` children attached to it (``attach = "existing"``) writing through it, then a restart;
- `owner_killed_reattach`: ``kill -9`` of the owner that the first of three ``memtrio mcp``
  children started (``attach = "auto"``) in the middle of their writes: the children
  re-attach to a new owner within seconds and carry on.

TCP sessions use the server's attach endpoint (the TCP transport, admitted by the
proof of the secret in ``run/serve.json``), so one ``memtrio serve --transport http`` serves both kinds.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio

from ....protocol.plural import plural
from ...net import runtime, spawn
from ...net.relay import GONE, NOT_ACKNOWLEDGED
from ..client import Caller, NoReply, ServerGone, ServerProcess
from ..harness import Ledger, Run, content_for, remember, reply_error_text
from ..netclient import HttpSession, TcpSession
from ..serve import ServeProcess
from .crashes import crash_points

Session = TcpSession | HttpSession
# Seconds an abandoned HTTP session may stay idle before the server ends it (net-clients-vanish).
IDLE_TIMEOUT = 2.0
# How long killed-owner children may take to notice and exit (attach = "existing": each
# looks for another memtrio serve for attach.EXISTING_REATTACH_TIMEOUT seconds first).
GONE_WITHIN = 10.0


async def status(client: Caller) -> dict[str, Any]:
    """``server_status`` through ``client``: its structured content."""
    reply = await client.call_tool("server_status", {}, timeout=30)
    error = reply_error_text(reply)
    if error is not None:
        raise RuntimeError(f"server_status failed: {error[:200]}")
    return dict(reply["result"]["structuredContent"])


def connection_id(report: dict[str, Any]) -> str:
    """The id of the connection that asked for ``report`` (its session is ``<id>.session``)."""
    return str(report["session"]["name"]).removesuffix(".session")


async def stop_owner(run: Run, owner: ServeProcess) -> None:
    """SIGTERM ``owner``: it must exit 0 (a graceful stop) and withdraw its runtime file."""
    code = await owner.terminate()
    if code != 0:
        tail = owner.stderr_text()[-400:].strip().replace("\n", " | ")
        run.out.violations.append(f"memtrio serve exited {code} on SIGTERM (expected 0): {tail}")
    found, _ = runtime.read(owner.home)
    if found is not None and found.pid == owner.pid:
        run.out.violations.append("memtrio serve left its runtime file behind after a clean stop")


async def end_sessions(run: Run, sessions: Sequence[Session]) -> None:
    """End sessions politely: EOF on TCP, DELETE on HTTP (204)."""
    for session in sessions:
        if isinstance(session, TcpSession):
            await session.close()
        elif not session.gone and (code := await session.delete()) != 204:
            run.out.violations.append(f"{session.label}: DELETE answered {code}")


async def writes(run: Run, client: Caller, ledger: Ledger, tag: str, count: int) -> None:
    """``count`` writes that must all be acknowledged (the client sees no fault of its own)."""
    for i in range(count):
        outcome = await remember(client, ledger, content_for(tag, i, run.rng), timeout=60)
        if outcome != "acked":
            run.out.violations.append(f"{tag}: write {i} was {outcome}, not acknowledged")


async def net_drop_resume(run: Run) -> None:
    """HTTP sessions whose POST streams are cut right after the priming event and resumed
    with ``GET`` + ``Last-Event-ID``: every reply arrives exactly once (the client flags a
    second one), every write is acknowledged and stored."""
    out = run.out
    home = run.home()
    ledger = Ledger()
    # Half the calls wait 0.2 s first, so many cuts land before the reply exists
    # (the resumed stream waits for it) and the others after it (it is replayed).
    owner = await run.serve(home, "http", {"MEMTRIO_FAULTS": "tool.call=delay:0.2%0.5"})
    count = 4 if run.quick else 8
    sessions = [
        await run.http_session(
            owner,
            f"http-{k}",
            drop=lambda: run.rng.random() < 0.75,
            redrop=lambda: run.rng.random() < 0.25,
        )
        for k in range(count)
    ]
    calls = 10 if run.quick else 40
    async with trio.open_nursery() as nursery:
        for session in sessions:
            nursery.start_soon(writes, run, session, ledger, f"{run.name}-{session.label}", calls)
    dropped = sum(s.resume.dropped for s in sessions)
    redropped = sum(s.resume.redropped for s in sessions)
    out.faults += dropped + redropped
    out.notes.append(
        f"{dropped} POST streams cut after the priming event, {redropped} resumed streams cut "
        f"again, {sum(s.resume.resumed for s in sessions)} resumptions"
    )
    if not dropped:
        out.violations.append("no stream was cut: the scenario proved nothing")
    await end_sessions(run, sessions)
    await stop_owner(run, owner)
    out.errors_seen, out.errors_expected, out.errors_exact = ledger.errors, 0, True
    run.verify(home, ledger)


async def steady(
    run: Run,
    client: Caller,
    ledger: Ledger,
    tag: str,
    stop: trio.Event,
    *,
    pause: float = 0.0,
    role: str = "a surviving session",
) -> None:
    """Writes one after another (``pause`` seconds apart) until ``stop``: each must be
    acknowledged; the first that is not is a violation naming the writer's ``role``."""
    n = 0
    while not stop.is_set():
        outcome = await remember(client, ledger, content_for(tag, n, run.rng), timeout=60)
        if outcome != "acked":
            run.out.violations.append(f"{tag} ({role}): write {n} was {outcome}")
            return
        n += 1
        if pause:
            await trio.sleep(pause)


async def vanish(run: Run, session: Session, ledger: Ledger, tag: str) -> None:
    """A few acknowledged writes, then one more whose connection is dropped mid-call."""
    for i in range(run.rng.randint(0, 2)):
        await remember(session, ledger, content_for(tag, i, run.rng))
    content = content_for(tag, 99, run.rng)
    ledger.unknown.append(content)  # never answered: it may or may not be stored
    message = {
        "jsonrpc": "2.0",
        "id": 99,
        "method": "tools/call",
        "params": {"name": "remember", "arguments": {"content": content}},
    }
    reset = run.rng.random() < 0.5
    if isinstance(session, TcpSession):
        await session.send(message)
        await trio.sleep(run.rng.uniform(0, 0.05))
        await session.vanish(reset=reset)
    else:
        await session.vanish_mid_call(message, read_headers=run.rng.random() < 0.5, reset=reset)


async def wait_for_connections(
    run: Run, client: Caller, expected: set[str], timeout: float
) -> dict[str, Any]:
    """Poll ``server_status`` until exactly the connections ``expected`` are live."""
    report: dict[str, Any] = {}
    with trio.move_on_after(timeout):
        while True:
            report = (await status(client))["transports"]
            if {c["id"] for c in report["live"]} == expected:
                return report
            await trio.sleep(0.1)
    live = sorted(c["id"] for c in report.get("live", []))
    run.out.violations.append(
        f"after {timeout:g} s the live connections are {live}, expected {sorted(expected)}"
    )
    return report


async def net_clients_vanish(run: Run) -> None:
    """TCP and HTTP clients drop their connections mid-call (a reset or a FIN; HTTP sessions
    never deleted), round after round, while two TCP and two HTTP sessions keep writing:
    the server stays up, the survivors see no error, the live connections come back to
    the survivors (abandoned HTTP sessions expire after the idle timeout), nothing
    acknowledged is lost."""
    out = run.out
    home = run.home()
    ledger = Ledger()
    env = {
        "MEMTRIO_SERVE_IDLE_TIMEOUT": str(IDLE_TIMEOUT),
        "MEMTRIO_FAULTS": "tool.call=delay:0.1%0.3",  # some calls are still running when cut
    }
    owner = await run.serve(home, "http", env)
    survivors: list[Session] = [await run.tcp_session(owner, f"tcp-keep-{k}") for k in range(2)]
    survivors += [await run.http_session(owner, f"http-keep-{k}") for k in range(2)]
    kept = {connection_id(await status(s)) for s in survivors}
    rounds, per_kind = (3, 3) if run.quick else (8, 6)
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        for s in survivors:
            nursery.start_soon(steady, run, s, ledger, f"{run.name}-{s.label}", stop)
        for round_ in range(rounds):
            leaving: list[Session] = []
            for k in range(per_kind):
                leaving.append(await run.tcp_session(owner, f"tcp-gone-{round_}-{k}"))
                leaving.append(await run.http_session(owner, f"http-gone-{round_}-{k}"))
            async with trio.open_nursery() as gone:
                for s in leaving:
                    gone.start_soon(vanish, run, s, ledger, f"{run.name}-{s.label}")
            out.faults += len(leaving)
            if not owner.alive:
                out.violations.append(f"memtrio serve exited after round {round_}")
                break
        if owner.alive:
            report = await wait_for_connections(run, survivors[0], kept, IDLE_TIMEOUT + 20)
            out.notes.append(
                f"{report.get('accepted')} connections accepted, {len(kept)} live at the end, "
                f"{report.get('failed')} failed"
            )
        stop.set()
    await end_sessions(run, survivors)
    await stop_owner(run, owner)
    out.errors_seen = sum(s.stats.errors + s.stats.tool_errors for s in survivors)
    out.errors_expected, out.errors_exact = 0, True
    run.verify(home, ledger)


async def crashing_calls(
    run: Run, victim: Session, ledger: Ledger, calls: int
) -> tuple[int, str | None]:
    """Up to ``calls`` writes of a victim: (how many were answered -32603, why it stopped
    early: its connection was closed)."""
    internal = 0
    for i in range(calls):
        content = content_for(victim.label, i, run.rng)
        try:
            reply = await victim.call_tool("remember", {"content": content})
        except ServerGone as exc:
            return internal, str(exc)
        code = reply.get("error", {}).get("code")
        if code == -32603:
            internal += 1
        elif reply_error_text(reply) is None:
            ledger.acked[reply["result"]["structuredContent"]["id"]] = content
        else:
            run.out.violations.append(f"{victim.label}: unexpected answer {str(reply)[:200]}")
    return internal, None


async def net_handler_crash(run: Run) -> None:
    """One TCP and one HTTP connection's Session crash (``session.dispatch:<connection id>``)
    while 10+ other sessions over TCP and HTTP write: the TCP victim's crashed calls are
    answered -32603 and its session goes on; the HTTP victim crashes on every call until
    its connection is closed; the others see no error, the server never exits, nothing
    acknowledged is lost."""
    out = run.out
    home = run.home()
    ledger = Ledger()
    calls = 12 if run.quick else 40
    tcp_crashes = 3
    # Connections are numbered in the order they open, victims first: tcp-1, then http-2.
    # Their first dispatches are initialize, notifications/initialized and server_status.
    spec = ",".join(
        [
            crash_points(run, "session.dispatch:tcp-1", tcp_crashes, 5, 3 + calls),
            "session.dispatch:http-2=raise@5+",
        ]
    )
    owner = await run.serve(home, "http", {"MEMTRIO_FAULTS": spec})
    victims: list[Session] = [
        await run.tcp_session(owner, "tcp-victim"),
        await run.http_session(owner, "http-victim"),
    ]
    ids = [connection_id(await status(v)) for v in victims]
    if ids != ["tcp-1", "http-2"]:
        out.violations.append(f"the victims are connections {ids}, not tcp-1 and http-2")
    each = 5 if run.quick else 8
    others: list[Session] = [await run.tcp_session(owner, f"tcp-{k}") for k in range(each)]
    others += [await run.http_session(owner, f"http-{k}") for k in range(each)]
    results: dict[str, tuple[int, str | None]] = {}

    async def victim(session: Session) -> None:
        results[session.label] = await crashing_calls(run, session, ledger, calls)

    async with trio.open_nursery() as nursery:
        for session in victims:
            nursery.start_soon(victim, session)
        for session in others:
            nursery.start_soon(writes, run, session, ledger, f"{run.name}-{session.label}", calls)
    tcp_internal, tcp_closed = results["tcp-victim"]
    http_internal, http_closed = results["http-victim"]
    if tcp_internal != tcp_crashes or tcp_closed is not None:
        out.violations.append(
            f"tcp-victim: {plural(tcp_crashes, 'crash')}, {plural(tcp_internal, 'call')} answered -32603, "
            f"closed: {tcp_closed}"
        )
    if http_closed is None:
        out.violations.append("http-victim: its session crashed on every call but stayed open")
    out.notes.append(
        f"http-victim: {plural(http_internal, 'call')} answered -32603, then closed ({http_closed})"
    )
    if not owner.alive:
        out.violations.append("memtrio serve exited while connections crashed")
    else:
        report = (await status(others[0]))["transports"]
        if report["failed"] != 1 or {"tcp-1", "http-2"} & {c["id"] for c in report["live"]} != {
            "tcp-1"
        }:
            out.violations.append(
                f"expected http-2 closed as failed and tcp-1 live: failed {report['failed']}, "
                f"live {sorted(c['id'] for c in report['live'])}"
            )
    await end_sessions(run, [*others, victims[0]])
    await stop_owner(run, owner)
    out.errors_seen += tcp_internal + http_internal
    out.errors_seen += sum(s.stats.errors + s.stats.tool_errors for s in others)
    out.errors_expected = tcp_crashes + 1
    run.verify(home, ledger)


async def children_write(
    run: Run, children: Sequence[ServerProcess], ledger: Ledger, tag: str, stop: trio.Event
) -> None:
    """Every child writes, two calls at a time, until it is gone or ``stop`` is set."""

    async def loop(child: ServerProcess, k: int) -> None:
        n = 0
        while not child.gone and not stop.is_set():
            await remember(child, ledger, content_for(f"{tag}-{k}", n, run.rng), timeout=30)
            n += 1

    async with trio.open_nursery() as nursery:
        for k, child in enumerate(children):
            nursery.start_soon(loop, child, 2 * k)
            nursery.start_soon(loop, child, 2 * k + 1)


# The children of net-owner-killed attach only to a running memtrio serve.
EXISTING = {"MEMTRIO_SERVE_ATTACH": "existing"}


async def attached_children(
    run: Run, owner: ServeProcess, count: int, tag: str
) -> list[ServerProcess]:
    """``count`` ``memtrio mcp`` children of ``owner``'s home; each must attach to it."""
    children = []
    for k in range(count):
        child = await run.server(owner.home, EXISTING, label=f"{tag}-{k}")
        if f"attaching to memtrio serve pid {owner.pid}" not in child.stderr_text():
            run.out.violations.append(f"{tag}-{k} did not attach to memtrio serve {owner.pid}")
        children.append(child)
    return children


def count_retries(run: Run, children: Sequence[ServerProcess]) -> int:
    """The "not acknowledged, retry" answers the children gave; anything a child answered
    that no request waited for (a second answer, the replayed session's) is a violation."""
    retries = 0
    for child in children:
        for reply in child.take_unmatched():
            run.out.violations.append(f"an answer no request waited for: {str(reply)[:160]}")
        retries += child.stats.errors
    return retries


async def kill_owner_under_load(run: Run, owner: ServeProcess, ledger: Ledger, tag: str) -> None:
    """Attached children (``attach = "existing"``) write; ``kill -9`` of the owner: each
    child answers its calls in flight "not acknowledged, retry", finds no other memtrio
    serve, and exits 1 with the clear line within `GONE_WITHIN` seconds (none hangs)."""
    children = await attached_children(run, owner, 3 if run.quick else 5, tag)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(children_write, run, children, ledger, tag, trio.Event())
        await trio.sleep(run.rng.uniform(0.3, 0.8))
        owner.kill9()
        run.out.faults += 1
        await owner.process.wait()
        with trio.move_on_after(GONE_WITHIN):
            for child in children:
                await child.process.wait()
        nursery.cancel_scope.cancel()  # the writes of a child that hangs
    gone = GONE.split("{why}")[0].format(pid=owner.pid)
    for child in children:
        code = child.process.returncode
        if code is None:
            run.out.violations.append(f"a child still runs {GONE_WITHIN:g} s after the kill")
            child.kill9()
        elif code != 1 or gone not in child.stderr_text():
            tail = child.stderr_text()[-300:].strip().replace("\n", " | ")
            run.out.violations.append(f"a child exited {code} without the gone-away line: {tail}")
    count_retries(run, children)


async def stale_file_is_handled(run: Run, owner: ServeProcess, ledger: Ledger, tag: str) -> None:
    """After the kill the runtime file names the dead owner: a new child removes it and
    serves embedded (and can write)."""
    found, _ = runtime.read(owner.home)
    if found is None or found.pid != owner.pid:
        run.out.notes.append("the killed owner left no runtime file")
    child = await run.server(owner.home, EXISTING, label=f"{tag}-embedded")
    if "attaching" in child.stderr_text():
        run.out.violations.append("a child attached to a killed memtrio serve")
    await writes(run, child, ledger, f"{tag}-embedded", 3)
    await run.stop(child)
    if runtime.read(owner.home)[0] is not None:
        run.out.violations.append("the stale runtime file was not removed")


async def net_owner_killed(run: Run) -> None:
    """``kill -9`` of a ``memtrio serve`` started by hand while ``memtrio mcp`` children
    attached to it with ``attach = "existing"`` write through it: every child exits 1 with
    the gone-away line within seconds (its calls in flight answered "retry"); the stale
    runtime file is removed by the next child (which serves embedded); a restarted serve
    gets new children attached; every acknowledged write is present and the store is
    intact. (With ``attach = "auto"`` the children carry on: owner-killed-reattach.)"""
    out = run.out
    home = run.home()
    ledger = Ledger()
    for round_ in range(1 if run.quick else 3):
        owner = await run.serve(home, "tcp")
        await kill_owner_under_load(run, owner, ledger, f"{run.name}-{round_}")
        await stale_file_is_handled(run, owner, ledger, f"{run.name}-{round_}")
        out.restarts += 1
    owner = await run.serve(home, "tcp")
    children = await attached_children(run, owner, 2, f"{run.name}-after")
    for k, child in enumerate(children):
        await writes(run, child, ledger, f"{run.name}-after-{k}", 5)
        await run.stop(child)
    await stop_owner(run, owner)
    out.errors_seen = ledger.errors
    out.notes.append(f"{len(ledger.acked)} acked, {len(ledger.unknown)} cut off by the kills")
    if not ledger.acked:
        out.violations.append("no write was acknowledged: the scenario proved nothing")
    run.verify(home, ledger)


# -- owner-killed-reattach ---------------------------------------------------------------

# The children of owner-killed-reattach: the default attach model, and an owner that
# exits soon after its last session (so the scenario also sees it go on its own).
AUTO = {"MEMTRIO_SERVE_ATTACH": "auto", "MEMTRIO_SERVE_IDLE_EXIT": "2"}
# How soon each child must serve again after its owner is killed (issue 31).
BACK_WITHIN = 5.0
# How soon the owner must be gone after its last session ended ([serve] idle_exit 2 s).
IDLE_GONE_WITHIN = 10.0


def current_owner(run: Run, home: Path, children: Sequence[ServerProcess]) -> int | None:
    """The one owner of ``home``, named by its runtime file; None (a violation) otherwise."""
    pids = spawn.owner_pids(home)
    found, _ = runtime.read(home)
    if len(pids) != 1 or found is None or found.pid != pids[0]:
        run.out.violations.append(
            f"expected one owner, named by the runtime file: running {pids}, "
            f"file {found.pid if found else None}"
        )
        return None
    if pids[0] in {child.process.pid for child in children}:
        run.out.violations.append("a child serves as the owner itself")
    return pids[0]


async def serving_again(run: Run, child: ServerProcess, gone: int, label: str) -> float | None:
    """Seconds until ``child`` answers ``server_status`` from another owner than ``gone``
    (a call sent before it noticed gets "retry" and is sent again); None on failure."""
    started = trio.current_time()
    with trio.move_on_after(BACK_WITHIN * 4):
        while True:
            try:
                reply = await child.call_tool("server_status", {}, timeout=BACK_WITHIN * 4)
            except (ServerGone, NoReply) as exc:
                run.out.violations.append(f"{label}: {type(exc).__name__}: {exc}")
                return None
            error = reply.get("error")
            if error is None:
                break
            if error.get("code") != NOT_ACKNOWLEDGED:
                run.out.violations.append(f"{label}: server_status failed: {str(error)[:160]}")
                return None
    if child.gone:
        return None
    pid = reply["result"]["structuredContent"]["pid"]
    if pid == gone:
        run.out.violations.append(f"{label}: still served by the killed owner {gone}")
    return trio.current_time() - started


async def kill_and_reattach(
    run: Run, home: Path, children: Sequence[ServerProcess], ledger: Ledger, tag: str
) -> None:
    """The children write; ``kill -9`` of their owner mid-burst; each must serve again
    (from a new owner) within `BACK_WITHIN` seconds while the burst goes on."""
    owner = current_owner(run, home, children)
    if owner is None:
        return
    stop = trio.Event()
    back: list[float | None] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(children_write, run, children, ledger, tag, stop)
        await trio.sleep(run.rng.uniform(0.3, 0.8))
        os.kill(owner, signal.SIGKILL)
        run.out.faults += 1
        run.out.restarts += 1

        async def check(k: int, child: ServerProcess) -> None:
            back.append(await serving_again(run, child, owner, f"{tag}-{k}"))

        async with trio.open_nursery() as checks:
            for k, child in enumerate(children):
                checks.start_soon(check, k, child)
        await trio.sleep(0.5)  # a little more burst on the new owner
        stop.set()
    slow = [b for b in back if b is None or b > BACK_WITHIN]
    if slow:
        run.out.violations.append(
            f"not every child served again within {BACK_WITHIN:g} s of the kill: {back}"
        )
    run.out.notes.append(
        f"{tag}: back in {max((b for b in back if b is not None), default=0):.2f} s"
    )
    for k, child in enumerate(children):
        if child.gone:
            run.out.violations.append(f"{tag}-{k} exited after its owner was killed")
    current_owner(run, home, children)


async def owner_killed_reattach(run: Run) -> None:  # noqa: C901
    """The attach model's owner (``attach = "auto"``): three agents' ``memtrio mcp``
    children of one home, the first of which starts the owner; ``kill -9`` of the owner in
    the middle of a burst of writes, round after round: every child serves again within
    `BACK_WITHIN` seconds from a new owner, its calls in flight answered once "not
    acknowledged, retry", none left unanswered, no answer to the replayed session
    leaked; after the children end, the owner exits on its own ([serve] idle_exit);
    every acknowledged write is present and the store is intact."""
    out = run.out
    home = run.home()
    ledger = Ledger()
    children: list[ServerProcess] = []
    try:
        for k in range(3):
            child = await run.server(home, AUTO, label=f"{run.name}-{k}")
            children.append(child)
        started = [c for c in children if "started memtrio serve pid" in c.stderr_text()]
        if len(started) != 1:
            out.violations.append(f"{len(started)} children started an owner (expected 1)")
        for round_ in range(3):
            await kill_and_reattach(run, home, children, ledger, f"{run.name}-{round_}")
            # --quick: one round, unless no call was in flight at its kill (a starved
            # child may have read its next calls only after it reattached): the
            # "retry" path must be exercised at least once.
            if run.quick and any(child.stats.errors for child in children):
                break
        owner = current_owner(run, home, children)
        out.errors_seen = count_retries(run, children)
        out.errors_expected = 1  # at least one call was in flight at a kill
        if ledger.no_reply:
            out.violations.append(f"{ledger.no_reply} call(s) in flight were never answered")
        for child in children:
            await run.stop(child)
        if owner is not None:
            with trio.move_on_after(IDLE_GONE_WITHIN):
                while runtime.pid_alive(owner):
                    await trio.sleep(0.05)
            if runtime.pid_alive(owner):
                out.violations.append(
                    f"the owner still runs {IDLE_GONE_WITHIN:g} s after its last session "
                    "(idle_exit 2 s)"
                )
    finally:
        spawn.kill_owners(home)
    out.notes.append(f"{len(ledger.acked)} acked, {len(ledger.unknown)} cut off by the kills")
    if not ledger.acked:
        out.violations.append("no write was acknowledged: the scenario proved nothing")
    run.verify(home, ledger)
