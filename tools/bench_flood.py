"""An authorised client's ``ping`` latency on ``memtrio serve`` while one client floods it with
connections that never authenticate (docs/transports.md, "Limits").

For each transport (tcp, http, ws) it starts ``memtrio serve`` on a free loopback port
with a token and a low descriptor limit (``--nofile``, 400), measures pings on a kept
session and on fresh connections (connect, token, ping) without a flood, then while a
flood process holds ``--connections`` (1,000) unauthenticated connections, and prints
p50/p99 per transport as one JSON line each, then a table. Every process it starts
(server, flood) is ended by its pid; everything stays on 127.0.0.1.

    python tools/bench_flood.py [--kinds tcp,http,ws] [--connections 1000] [--nofile 400]
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import tempfile
from pathlib import Path

import trio
from memtrio.actors.chaos.flood import KINDS, Figures, measure
from memtrio.actors.chaos.serve import ServeProcess, start_serve


async def one(kind: str, args: argparse.Namespace, root: Path) -> list[Figures]:
    token = secrets.token_urlsafe(24)
    home = root / kind
    owner: ServeProcess = await start_serve(
        home, kind, {"MEMTRIO_AUTH_TOKEN": token}, nofile=args.nofile
    )
    results = []
    try:
        await owner.wait_ready()
        port = int(owner.url.rsplit(":", 1)[1].split("/", 1)[0])
        for flood in (False, True):
            figures = await measure(
                kind,
                "127.0.0.1",
                port,
                token,
                connections=args.connections,
                samples=args.samples,
                fresh_samples=args.fresh,
                flood=flood,
            )
            summary = {"flood": flood, **figures.summary()}
            if flood:
                summary["flood_stats"] = figures.flood
                summary["server"] = figures.transports.get("sockets", {})
            print(json.dumps(summary), flush=True)
            results.append(figures)
    finally:
        code = await owner.terminate()
        if code != 0:
            print(f"memtrio serve ({kind}) exited {code}", file=sys.stderr)
    return results


async def run(args: argparse.Namespace) -> int:
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-flood-") as root:
        for kind in args.kinds:
            for figures, flood in zip(
                await one(kind, args, Path(root)), (False, True), strict=True
            ):
                rows.append((flood, figures.summary()))
    print()
    print("| transport | flood | kept session p50 / p99 (ms) | fresh connection p50 / p99 (ms) |")
    print("| --- | --- | --- | --- |")
    for flood, s in rows:
        print(
            f"| {s['kind']} | {'1,000 unauthenticated' if flood else 'none'} | "
            f"{s['established_p50_ms']} / {s['established_p99_ms']} | "
            f"{s['fresh_p50_ms']} / {s['fresh_p99_ms']} |"
        )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--kinds", default=",".join(KINDS), type=lambda s: [k for k in s.split(",") if k]
    )
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--nofile", type=int, default=400)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--fresh", type=int, default=50)
    args = parser.parse_args()
    return trio.run(run, args)


if __name__ == "__main__":
    sys.exit(main())
