"""A flood of connections that never authenticate, against a real ``memtrio serve``, and an
authorised client's ``ping`` latency meanwhile.

Used by the ``net-connection-flood`` chaos scenario, ``tools/bench_flood.py`` and
tests/test_connection_flood.py. The flood runs in a process of its own
(``python -m memtrio.actors.chaos.flood``), so its work does not stall the
measuring client's clock. It targets loopback only, keeps at most
``--connections`` sockets open (a socket the server shuts is opened again after
`RECONNECT` seconds), stops after ``--seconds`` (or on SIGTERM/SIGINT) and closes
every socket it opened.

What a flood connection does, by transport (it never sends the token):

- tcp: nothing, or a first line trickled one byte every `TRICKLE` seconds that never ends;
- http: nothing, request headers trickled that never end, or complete requests
  without the token (each answered 401) again and again on the same connection;
- ws: nothing, or an opening handshake trickled that never ends;
- tls (a TLS listener, http or ws): a TLS ClientHello, then nothing (the handshake is
  never finished; under TLS any first bytes count, so each one displaces a pending
  connection, whose handshake the server is in the middle of);
- attach (the attach endpoint of ``memtrio serve``): a ``hello`` line of the right
  shape with a random nonce (``actors.net.proof``), the server's answer read, then
  nothing: it never proves it holds the secret.
"""

from __future__ import annotations

import argparse
import functools
import gc
import ipaddress
import json
import math
import os
import random
import resource
import secrets
import signal
import ssl
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import trio

from .probe import ANSWER_TIMEOUT, PING, Probe

KINDS = ("tcp", "http", "ws")
# What the flood process can send besides: TLS ClientHellos, forged attach hellos.
FLOOD_KINDS = (*KINDS, "tls", "attach")
# Seconds between the bytes of a connection that trickles.
TRICKLE = 0.5
# Seconds before a flood connection the server shut is opened again.
RECONNECT = 0.05


# -- the flood (its own process) -------------------------------------------------


@dataclass
class FloodStats:
    connections: int = 0  # sockets to hold
    opened: int = 0  # connections opened, reopenings included
    open: int = 0  # open right now
    peak: int = 0
    shut: int = 0  # ended by the server
    connect_failed: int = 0
    answers: int = 0  # HTTP answers to the requests without a token (each should be 401)
    not_401: int = 0


@functools.cache
def client_hello(host: str) -> bytes:
    """The first flight of a TLS client (its ClientHello), made once without a connection:
    the server cannot tell one sent again from a fresh one before the handshake goes on."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_side=False, server_hostname=host)
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def forged_hello() -> bytes:
    """An attach ``hello`` line of the right shape whose nonce proves nothing."""
    return b"memtrio-attach/1 hello " + secrets.token_hex(32).encode() + b"\n"


def hesitation(kind: str, index: int) -> float:
    """Seconds flood connection ``index`` waits between connecting and its first bytes.

    TLS: every other connection waits up to `TRICKLE` / 10 seconds, as a real client's
    ClientHello may come after the server accepted the connection: the server then
    counts it silent, displaces it first, and may do so while its handshake is being
    served (the crash of issue 37, item 7). Otherwise none."""
    if kind == "tls" and index % 2:
        return random.uniform(0.0, TRICKLE / 10)
    return 0.0


def opening(kind: str, index: int, host: str) -> tuple[bytes, bytes, bool]:
    """(the first bytes flood connection ``index`` sends, what it sends every `TRICKLE`
    seconds after, whether those are whole requests that get answers)."""
    if kind == "tls":
        return client_hello(host), b"", False
    if kind == "attach":
        return forged_hello(), b"", False
    if kind == "tcp":
        return (b"", b"", False) if index % 2 == 0 else (b"Bearer not-the-", b"x", False)
    if kind == "ws":
        head = f"GET / HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nX-Slow: ".encode()
        return (b"", b"", False) if index % 2 == 0 else (head, b"x", False)
    body = PING
    request = (
        f"POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    variant = index % 3
    if variant == 0:
        return b"", b"", False
    if variant == 1:
        return f"POST /mcp HTTP/1.1\r\nHost: {host}\r\nX-Slow: ".encode(), b"x", False
    return request, request, True


async def _read_answers(stream: trio.SocketStream, stats: FloodStats, counts: bool) -> None:
    """Read until the server ends the connection (counting HTTP status lines)."""
    while True:
        try:
            data = await stream.receive_some(65536)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            return
        if not data:
            return
        if counts:
            for line in data.split(b"\r\n"):
                if line.startswith(b"HTTP/1.1 "):
                    stats.answers += 1
                    if not line.startswith(b"HTTP/1.1 401"):
                        stats.not_401 += 1


async def _occupy(
    stream: trio.SocketStream, first: bytes, then: bytes, answered: bool, stats: FloodStats
) -> None:
    """Send ``first``, then ``then`` every `TRICKLE` seconds, until the server ends it."""

    async def send(data: bytes) -> bool:
        try:
            await stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            return False
        return True

    async with trio.open_nursery() as nursery:

        async def reader() -> None:
            await _read_answers(stream, stats, answered)
            nursery.cancel_scope.cancel()

        nursery.start_soon(reader)
        if first and not await send(first):
            nursery.cancel_scope.cancel()
            return
        while True:
            await trio.sleep(TRICKLE)
            if then and not await send(then):
                nursery.cancel_scope.cancel()
                return


async def _hold_one(
    kind: str, index: int, host: str, port: int, deadline: float, stats: FloodStats
) -> None:
    """Keep one flood connection open until ``deadline``, opening it again when shut."""
    first, then, answered = opening(kind, index, host)
    while trio.current_time() < deadline:
        try:
            stream = await trio.open_tcp_stream(host, port)
        except OSError:
            stats.connect_failed += 1
            await trio.sleep(RECONNECT)
            continue
        stats.opened += 1
        stats.open += 1
        stats.peak = max(stats.peak, stats.open)
        try:
            with trio.move_on_at(deadline) as scope:
                await trio.sleep(hesitation(kind, index))
                await _occupy(stream, first, then, answered, stats)
        finally:
            stats.open -= 1
            await trio.aclose_forcefully(stream)
        if not scope.cancelled_caught:
            stats.shut += 1
        await trio.sleep(RECONNECT)


async def hold(kind: str, host: str, port: int, connections: int, seconds: float) -> FloodStats:
    """Hold ``connections`` flood connections for ``seconds`` (or until SIGTERM/SIGINT);
    prints ``{"holding": N}`` once each has been opened, then the stats as one JSON line."""
    stats = FloodStats(connections=connections)
    deadline = trio.current_time() + seconds
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:

            async def on_signal() -> None:
                async for _ in signals:
                    nursery.cancel_scope.cancel()
                    return

            async def announce() -> None:
                while stats.opened + stats.connect_failed < connections:
                    await trio.sleep(0.02)
                print(json.dumps({"holding": stats.open}), flush=True)

            nursery.start_soon(on_signal)
            nursery.start_soon(announce)
            async with trio.open_nursery() as holders:
                for index in range(connections):
                    holders.start_soon(_hold_one, kind, index, host, port, deadline, stats)
                    if index % 50 == 49:
                        await trio.sleep(0)
            nursery.cancel_scope.cancel()
    return stats


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memtrio.actors.chaos.flood")
    parser.add_argument("--kind", choices=FLOOD_KINDS, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args(argv)
    try:
        loopback = ipaddress.ip_address(args.host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        print("flood: --host must be a loopback address (127.0.0.1, ::1)", file=sys.stderr)
        return 2
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = args.connections + 64
    if soft != resource.RLIM_INFINITY and soft < wanted:
        top = wanted if hard == resource.RLIM_INFINITY else min(hard, wanted)
        resource.setrlimit(resource.RLIMIT_NOFILE, (top, hard))
    stats = trio.run(hold, args.kind, args.host, args.port, args.connections, args.seconds)
    print(json.dumps(asdict(stats)), flush=True)
    return 0


# -- the measuring client ----------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0-1) of ``values`` (nearest rank); nan when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


@dataclass
class Figures:
    """What one measurement found (seconds)."""

    kind: str
    established: list[float] = field(default_factory=list)
    fresh: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    flood: dict[str, Any] = field(default_factory=dict)
    transports: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        ms = lambda v: round(v * 1000, 1)  # noqa: E731
        return {
            "kind": self.kind,
            "established_p50_ms": ms(percentile(self.established, 0.5)),
            "established_p99_ms": ms(percentile(self.established, 0.99)),
            "fresh_p50_ms": ms(percentile(self.fresh, 0.5)),
            "fresh_p99_ms": ms(percentile(self.fresh, 0.99)),
            "samples": [len(self.established), len(self.fresh)],
            "failures": len(self.failures),
        }


async def start_flood(
    kind: str, host: str, port: int, connections: int, seconds: float, nice: int = 19
) -> tuple[trio.Process, trio.abc.ReceiveStream]:
    """Start the flood process (see the module's text); its process and its stdout.

    ``nice``: its CPU priority, the lowest by default: as from another host, a flood
    measured for latency must not take the CPU the server and the measuring client
    need (on one machine it shares their cores). 0 floods as hard as this machine can,
    as an attacker on the same machine would."""
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "memtrio.actors.chaos.flood", "--kind", kind, "--host", host,
         "--port", str(port), "--connections", str(connections), "--seconds", str(seconds)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        preexec_fn=lambda: os.nice(nice),
    )  # fmt: skip
    assert process.stdout is not None
    return process, process.stdout


async def _lines(stream: trio.abc.ReceiveStream, into: list[dict[str, Any]]) -> None:
    buffer = b""
    while True:
        data = await stream.receive_some(65536)
        if not data:
            return
        buffer += data
        while b"\n" in buffer:
            line, _, buffer = buffer.partition(b"\n")
            try:
                into.append(json.loads(line))
            except ValueError:
                pass


async def sample(
    probe: Probe,
    nursery: trio.Nursery,
    figures: Figures,
    samples: int,
    fresh_samples: int,
    interval: float,
    deadline: float = math.inf,
) -> None:
    """``samples`` pings on the kept session and ``fresh_samples`` on new connections,
    interleaved, one every ``interval`` seconds; a failure counts as `ANSWER_TIMEOUT`.
    No ping starts after ``deadline`` (trio time): the samples taken until then stand."""
    every = max(1, (samples + fresh_samples) // max(1, fresh_samples))
    for n in range(samples + fresh_samples):
        if trio.current_time() >= deadline:
            return
        fresh = n % every == 0 and len(figures.fresh) < fresh_samples
        into = figures.fresh if fresh else figures.established
        try:
            into.append(await (probe.fresh_ping(nursery) if fresh else probe.ping()))
        except (
            OSError,
            EOFError,
            RuntimeError,
            trio.TooSlowError,
            trio.BrokenResourceError,
        ) as exc:
            figures.failures.append(f"{type(exc).__name__}: {exc}"[:200])
            into.append(ANSWER_TIMEOUT)
        await trio.sleep(interval)


async def measure(
    kind: str,
    host: str,
    port: int,
    token: str,
    *,
    connections: int = 1000,
    samples: int = 150,
    fresh_samples: int = 40,
    interval: float = 0.02,
    flood: bool = True,
    ramp_timeout: float = 20.0,
    budget: float = math.inf,
) -> Figures:
    """An authorised client's ping latencies on ``kind`` while (``flood``) a flood process
    holds ``connections`` unauthenticated connections: ``samples`` pings on a kept
    session, ``fresh_samples`` on new connections, one every ``interval`` seconds, for
    at most ``budget`` seconds (then fewer samples: `Figures.summary` counts them).
    Ends the flood process (by its pid) before it returns."""
    figures = Figures(kind)
    seconds = ramp_timeout + (samples + fresh_samples) * (interval + 0.1) + 10
    process: trio.Process | None = None
    reports: list[dict[str, Any]] = []
    probe = Probe(kind, host, port, token)
    try:
        async with trio.open_nursery() as nursery:
            await probe.open(nursery)
            if flood:
                process, out = await start_flood(kind, host, port, connections, seconds)
                nursery.start_soon(_lines, out, reports)
                with trio.move_on_after(ramp_timeout):
                    while not any("holding" in r for r in reports):
                        if process.poll() is not None:
                            break
                        await trio.sleep(0.05)
                await trio.sleep(1.0)  # the flood at full strength: connections being shut
            # The measuring client's own collector pauses are not the server's latency.
            collecting = gc.isenabled()
            gc.collect()
            gc.disable()
            try:
                deadline = trio.current_time() + budget
                await sample(probe, nursery, figures, samples, fresh_samples, interval, deadline)
            finally:
                if collecting:
                    gc.enable()
            try:
                figures.transports = await probe.status()
            except (
                OSError,
                EOFError,
                KeyError,
                ValueError,
                trio.TooSlowError,
                trio.BrokenResourceError,
            ) as exc:
                figures.failures.append(f"server_status: {type(exc).__name__}: {exc}"[:200])
            if process is not None and process.returncode is None:
                process.send_signal(signal.SIGTERM)
                with trio.move_on_after(15):
                    await process.wait()
            await probe.aclose()
            nursery.cancel_scope.cancel()
    finally:
        if process is not None and process.returncode is None:
            process.kill()
            with trio.CancelScope(shield=True):
                await process.wait()
    finals = [r for r in reports if "opened" in r]
    figures.flood = finals[-1] if finals else {}
    return figures


if __name__ == "__main__":
    sys.exit(main())
