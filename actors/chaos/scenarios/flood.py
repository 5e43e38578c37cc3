"""``net-connection-flood``: 1,000 connections that never authenticate against a
``memtrio serve`` with a token and a descriptor limit of 400, while an authorised client
pings and an attached session writes (the flood itself: `actors.chaos.flood`)."""

from __future__ import annotations

import secrets
from functools import partial
from typing import Any

import trio

from ..flood import Probe, measure, percentile
from ..harness import Ledger, Run
from .transports import end_sessions, steady, stop_owner

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
        writes = partial(steady, pause=0.05, role="attached during the flood")
        nursery.start_soon(writes, run, writer, ledger, f"{run.name}-attached", stop)
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
