"""``memtrio serve`` as a command: its refusals (one line, exit 2), the token file, the
environment selection of ``memtrio mcp``, signals."""

from __future__ import annotations

import importlib.util
import signal
import socket
import subprocess
import sys
from pathlib import Path

import trio
from mcp_client import run_cli, server_env
from memtrio.actors.net.listen import SSE_HINT
from serve_helpers import initialize_line, serve_process, tcp_client

HTTP_PRESENT = importlib.util.find_spec("memtrio.actors.net.http") is not None


def one_line(proc: subprocess.CompletedProcess[str], code: int, *needles: str) -> str:
    """The one line of a refused command (its exit ``code``), which says each of ``needles``."""
    stderr = proc.stderr
    assert proc.returncode == code, (proc.returncode, stderr)
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


async def test_token_file_is_read_and_enforced(home: Path, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("  from-a-file\n")
    args = ["--transport", "tcp", "--bind", "127.0.0.1:0", "--auth-token-file", str(token_file)]
    async with serve_process(home, args) as served:
        async with tcp_client(served.port, token="from-a-file") as client:
            assert "result" in await client.initialize()
        async with tcp_client(served.port, token="something-else") as wrong:
            await wrong.send(initialize_line())
            refusal = await wrong.read()
    assert refusal["error"]["code"] == -32000


def test_an_empty_token_file_is_refused_at_start(home: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty-token"
    empty.write_text(" \n")
    proc = run_cli(
        "serve", "--transport", "tcp", "--bind", "127.0.0.1:0", "--auth-token-file", str(empty),
        home=home,
    )  # fmt: skip
    one_line(proc, 2, "is empty", str(empty))


def test_a_non_loopback_bind_needs_a_token(home: Path) -> None:
    proc = run_cli("serve", "--transport", "tcp", "--bind", "0.0.0.0:0", home=home)
    one_line(proc, 2, "0.0.0.0", "without a token", "--insecure-no-auth")


async def test_insecure_no_auth_allows_a_non_loopback_bind(home: Path) -> None:
    args = ["--transport", "tcp", "--bind", "0.0.0.0:0", "--insecure-no-auth"]
    async with serve_process(home, args) as served:
        assert served.url.startswith("tcp://0.0.0.0:")
        async with tcp_client(served.port) as client:
            assert "result" in await client.initialize()


def test_a_certificate_without_its_key_and_the_reverse_are_refused(
    home: Path, tmp_path: Path
) -> None:
    pem = tmp_path / "x.pem"
    pem.write_text("not used")
    base = ("serve", "--transport", "ws", "--bind", "127.0.0.1:0")
    no_key = run_cli(*base, "--tls-cert", str(pem), home=home)
    one_line(no_key, 2, "--tls-cert was given without --tls-key")
    no_cert = run_cli(*base, "--tls-key", str(pem), home=home)
    one_line(no_cert, 2, "--tls-key was given without --tls-cert")
    bad = run_cli(*base, "--tls-cert", str(pem), "--tls-key", str(pem), home=home)
    one_line(bad, 2, "cannot load it", f"--tls-cert {pem}")


def test_an_address_in_use_is_one_line(home: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = run_cli("serve", "--transport", "tcp", "--bind", f"127.0.0.1:{port}", home=home)
    one_line(proc, 2, f"cannot listen on 127.0.0.1:{port}", "already in use", "--bind")


async def test_memtrio_mcp_serves_tcp_when_the_environment_says_so(home: Path) -> None:
    env = {"MEMTRIO_TRANSPORT": "tcp", "MEMTRIO_PORT": "0"}
    async with serve_process(home, [], env=env, command="mcp") as served:
        assert served.url.startswith("tcp://127.0.0.1:")
        async with tcp_client(served.port) as client:
            assert "result" in await client.initialize()
            assert (await client.request("ping"))["result"] == {}
        served.process.send_signal(signal.SIGINT)
        assert await served.wait() == 0


def test_an_unknown_transport_exits_2_listing_the_valid_ones(home: Path) -> None:
    proc = run_cli("mcp", home=home, env={"MEMTRIO_TRANSPORT": "carrier-pigeon"})
    one_line(proc, 2, "carrier-pigeon", "stdio, streamable-http, http, sse, tcp, ws")
    serve = run_cli("serve", home=home, env={"MEMTRIO_TRANSPORT": "carrier-pigeon"})
    one_line(serve, 2, "carrier-pigeon")


async def test_sse_prints_the_deprecation_hint_then_serves_http(home: Path) -> None:
    env = {"MEMTRIO_TRANSPORT": "sse", "MEMTRIO_PORT": "0"}
    if HTTP_PRESENT:
        async with serve_process(home, [], env=env, command="mcp") as served:
            assert served.stderr[0].strip() == SSE_HINT
            assert served.url.startswith("http://127.0.0.1:") and served.url.endswith("/mcp")
    else:  # a build without the http transport says so, after the hint
        proc = run_cli("mcp", home=home, env=env, timeout=60)
        lines = proc.stderr.strip().splitlines()
        assert lines[0] == SSE_HINT and len(lines) == 2, proc.stderr
        assert proc.returncode == 1 and "the http transport is not available" in lines[1]


def test_transport_http_listens_on_mcp_or_says_it_is_missing(home: Path) -> None:
    if HTTP_PRESENT:
        with subprocess.Popen(
            [sys.executable, "-m", "memtrio.supervisors.cli", "serve", "--transport", "http",
             "--bind", "127.0.0.1:0"],
            env=server_env(home), cwd=home, stderr=subprocess.PIPE, text=True,
        ) as proc:  # fmt: skip
            assert proc.stderr is not None
            line = proc.stderr.readline()
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0
        assert line.startswith("memtrio serve: listening on http://127.0.0.1:"), line
    else:
        proc = run_cli("serve", "--transport", "http", "--bind", "127.0.0.1:0", home=home)
        one_line(proc, 1, "the http transport is not available", "--transport tcp")


async def test_sigint_stops_an_idle_server_with_exit_0(home: Path) -> None:
    async with serve_process(home, ["--transport", "ws", "--bind", "127.0.0.1:0"]) as served:
        with trio.fail_after(10):
            served.process.send_signal(signal.SIGINT)
            assert await served.wait() == 0
    assert served.stderr_text().count("listening on") == 1
