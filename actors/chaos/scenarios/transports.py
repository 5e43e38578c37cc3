"""Network transports: a real ``memtrio serve`` whose clients misbehave or whose process dies.

- `net_drop_resume`: HTTP sessions' POST streams cut after the priming event, resumed
  with ``Last-Event-ID``: every reply exactly once, every acknowledged write stored;
- `net_clients_vanish`: TCP and HTTP clients that drop their connection in the middle
  of a call, round after round, while other sessions keep writing;
- `net_handler_crash`: one TCP and one HTTP connection's Session crash
  (``session.dispatch:<connection id>``) while 10+ other sessions write;
- `net_owner_killed`: ``kill -9`` of a ``memtrio serve`` with attached ``memtrio mcp``
  children writing through it, then a restart;
- `net_connection_flood`: 1,000 connections that never authenticate against a serve
  with a token and a descriptor limit of 400, while an authorised client pings and
  attached sessions write.

TCP sessions use the server's attach endpoint (the TCP transport, admitted by the
proof of the secret in ``run/serve.json``), so one ``memtrio serve --transport http`` serves both kinds.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

import trio

from ....protocol.plural import plural
from ...net import runtime
from ...net.attach import GONE
from ..client import Caller, ServerGone, ServerProcess
from ..flood import Probe, measure, percentile
from ..harness import Ledger, Run, content_for, remember, reply_error_text
from ..netclient import HttpSession, TcpSession
from ..serve import ServeProcess
from .crashes import crash_points

Session = TcpSession | HttpSession
# Seconds an abandoned HTTP session may stay idle before the server ends it (net-clients-vanish).
IDLE_TIMEOUT = 2.0
# How long killed-owner children may take to notice and exit.
GONE_WITHIN = 5.0


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


async def steady(run: Run, client: Caller, ledger: Ledger, tag: str, stop: trio.Event) -> None:
    """Writes one after another until ``stop``: each must be acknowledged."""
    n = 0
    while not stop.is_set():
        outcome = await remember(client, ledger, content_for(tag, n, run.rng), timeout=60)
        if outcome != "acked":
            run.out.violations.append(f"{tag} (a surviving session): write {n} was {outcome}")
            return
        n += 1


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
    run: Run, children: Sequence[ServerProcess], ledger: Ledger, tag: str
) -> None:
    """Every child writes, two calls at a time, until it is gone."""

    async def loop(child: ServerProcess, k: int) -> None:
        n = 0
        while not child.gone:
            await remember(child, ledger, content_for(f"{tag}-{k}", n, run.rng), timeout=30)
            n += 1

    async with trio.open_nursery() as nursery:
        for k, child in enumerate(children):
            nursery.start_soon(loop, child, 2 * k)
            nursery.start_soon(loop, child, 2 * k + 1)


async def attached_children(
    run: Run, owner: ServeProcess, count: int, tag: str
) -> list[ServerProcess]:
    """``count`` ``memtrio mcp`` children of ``owner``'s home; each must attach to it."""
    children = []
    for k in range(count):
        child = await run.server(owner.home, label=f"{tag}-{k}")
        if f"attaching to memtrio serve pid {owner.pid}" not in child.stderr_text():
            run.out.violations.append(f"{tag}-{k} did not attach to memtrio serve {owner.pid}")
        children.append(child)
    return children


async def kill_owner_under_load(run: Run, owner: ServeProcess, ledger: Ledger, tag: str) -> None:
    """Attached children write; ``kill -9`` of the owner: each child must exit 1 with the
    clear line within `GONE_WITHIN` seconds (none hangs)."""
    children = await attached_children(run, owner, 3 if run.quick else 5, tag)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(children_write, run, children, ledger, tag)
        await trio.sleep(run.rng.uniform(0.3, 0.8))
        owner.kill9()
        run.out.faults += 1
        await owner.process.wait()
        with trio.move_on_after(GONE_WITHIN):
            for child in children:
                await child.process.wait()
        nursery.cancel_scope.cancel()  # the writes of a child that hangs
    for child in children:
        code = child.process.returncode
        if code is None:
            run.out.violations.append(f"a child still runs {GONE_WITHIN:g} s after the kill")
            child.kill9()
        elif code != 1 or GONE.format(pid=owner.pid) not in child.stderr_text():
            tail = child.stderr_text()[-300:].strip().replace("\n", " | ")
            run.out.violations.append(f"a child exited {code} without the gone-away line: {tail}")


async def stale_file_is_handled(run: Run, owner: ServeProcess, ledger: Ledger, tag: str) -> None:
    """After the kill the runtime file names the dead owner: a new child removes it and
    serves embedded (and can write)."""
    found, _ = runtime.read(owner.home)
    if found is None or found.pid != owner.pid:
        run.out.notes.append("the killed owner left no runtime file")
    child = await run.server(owner.home, label=f"{tag}-embedded")
    if "attaching" in child.stderr_text():
        run.out.violations.append("a child attached to a killed memtrio serve")
    await writes(run, child, ledger, f"{tag}-embedded", 3)
    await run.stop(child)
    if runtime.read(owner.home)[0] is not None:
        run.out.violations.append("the stale runtime file was not removed")


async def net_owner_killed(run: Run) -> None:
    """``kill -9`` of ``memtrio serve`` while attached ``memtrio mcp`` children write through
    it: every child exits 1 with the gone-away line within seconds; the stale runtime file
    is removed by the next child (which serves embedded); a restarted serve gets new
    children attached; every acknowledged write is present and the store is intact."""
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


# net-connection-flood: the flood, the descriptor limit of the server, and what an authorised
# client may wait at worst meanwhile (the p99 target, 100 ms, is the load test's:
# tests/test_connection_flood.py; chaos runs beside other work, so it checks service).
FLOOD_CONNECTIONS = 1000
FLOOD_NOFILE = 400
FLOOD_WORST = 1.0


async def net_connection_flood(run: Run) -> None:
    """One client holds 1,000 connections that never send the token (silent, trickled
    token lines, headers or handshakes that never end, requests without the token)
    against a ``memtrio serve`` with a token and ``RLIMIT_NOFILE`` 400, on a transport
    chosen by the seed: an authorised client's pings (on its session and on new
    connections) all succeed within `FLOOD_WORST` seconds, attached sessions keep
    writing, the server never exits, and once the flood ends its pending connections
    are gone and its sockets are back to the authorised ones."""
    out = run.out
    home = run.home()
    ledger = Ledger()
    kind = run.rng.choice(["tcp", "http", "ws"])
    token = secrets.token_urlsafe(24)
    owner = await run.serve(home, kind, {"MEMTRIO_AUTH_TOKEN": token}, nofile=FLOOD_NOFILE)
    port = int(owner.url.rsplit(":", 1)[1].split("/", 1)[0])
    writer = await run.tcp_session(owner, "attached-writer")
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(paced, run, writer, ledger, f"{run.name}-attached", stop)
        figures = await measure(
            kind,
            "127.0.0.1",
            port,
            token,
            connections=FLOOD_CONNECTIONS,
            samples=40 if run.quick else 200,
            fresh_samples=15 if run.quick else 60,
            ramp_timeout=15.0,
        )
        stop.set()
    out.faults += int(figures.flood.get("opened", 0))
    summary = figures.summary()
    out.notes.append(
        f"{kind}: {figures.flood.get('opened', 0)} unauthenticated connections opened; "
        f"ping p50/p99 {summary['established_p50_ms']}/{summary['established_p99_ms']} ms "
        f"on a session, {summary['fresh_p50_ms']}/{summary['fresh_p99_ms']} ms on new "
        f"connections; server: {figures.transports.get('sockets', {}).get('listeners', {})}"
    )
    if figures.failures:
        out.violations.append(f"authorised pings failed: {figures.failures[:3]}")
    worst = max([*figures.established, *figures.fresh], default=0.0)
    if worst > FLOOD_WORST:
        out.violations.append(f"an authorised ping took {worst:.2f} s (limit {FLOOD_WORST} s)")
    if percentile(figures.fresh, 0.5) > FLOOD_WORST / 4:
        out.violations.append(f"half the pings on new connections took over {FLOOD_WORST / 4} s")
    if int(figures.flood.get("opened", 0)) < FLOOD_CONNECTIONS:
        out.violations.append(f"the flood opened only {figures.flood} connections")
    if not owner.alive:
        out.violations.append("memtrio serve exited under the flood")
    else:
        await flood_cleared(run, kind, port, token)
    await end_sessions(run, [writer])
    await stop_owner(run, owner)
    out.errors_seen, out.errors_expected, out.errors_exact = ledger.errors, 0, True
    run.verify(home, ledger)


async def paced(run: Run, client: Caller, ledger: Ledger, tag: str, stop: trio.Event) -> None:
    """Writes, one every 50 ms, until ``stop``: each must be acknowledged."""
    n = 0
    while not stop.is_set():
        outcome = await remember(client, ledger, content_for(tag, n, run.rng), timeout=60)
        if outcome != "acked":
            run.out.violations.append(f"{tag} (attached during the flood): write {n} was {outcome}")
            return
        n += 1
        await trio.sleep(0.05)


async def flood_cleared(run: Run, kind: str, port: int, token: str) -> None:
    """After the flood: within the auth timeout no connection is pending and the sockets
    open are the authorised ones (the probe, the attached writer)."""
    probe = Probe(kind, "127.0.0.1", port, token)
    sockets: dict[str, Any] = {}
    async with trio.open_nursery() as nursery:
        await probe.open(nursery)
        with trio.move_on_after(10):
            while True:
                sockets = (await probe.status())["sockets"]
                pending = sum(
                    int(listener["unauthenticated"]) + int(listener["on_probation"])
                    for listener in sockets["listeners"].values()
                )
                if pending == 0 and int(sockets["open"]) <= 4:
                    break
                await trio.sleep(0.25)
        await probe.aclose()
        nursery.cancel_scope.cancel()
    listeners = sockets.get("listeners", {})
    if any(int(v["unauthenticated"]) for v in listeners.values()) or int(sockets["open"]) > 4:
        run.out.violations.append(f"10 s after the flood the server still holds {sockets}")
