"""A listener that cannot bind, or a bind that needs a flag the command lacks: one line that
names the address and what to do, exit 2, on every transport and on ``memtrio ui``
(issue 29, item 11)."""

from __future__ import annotations

import errno
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_client import run_cli
from memtrio.actors.net.bind import bind_message

# An address of the documentation range (RFC 5737): never an address of this machine.
FOREIGN = "192.0.2.1"


def one_line(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    """The one stderr line of a command that exited 2 (no supervisor 'gave up' line)."""
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert len(lines) == 1, proc.stderr
    assert "gave up" not in lines[0] and "supervisor" not in lines[0], lines[0]
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


@pytest.mark.parametrize("transport", ["http", "tcp", "ws"])
def test_serve_on_a_port_in_use_is_one_line_exit_2(
    home: Path, taken_port: int, transport: str
) -> None:
    proc = run_cli(
        "serve", "--transport", transport, "--bind", f"127.0.0.1:{taken_port}", home=home
    )
    one_line(proc, f"127.0.0.1:{taken_port}", "already in use", "--bind")


def test_ui_on_a_port_in_use_is_one_line_exit_2(home: Path, taken_port: int) -> None:
    proc = run_cli("ui", "--bind", f"127.0.0.1:{taken_port}", home=home)
    one_line(proc, f"127.0.0.1:{taken_port}", "already in use", "--bind")


@pytest.mark.parametrize("command", ["serve", "ui"])
def test_an_address_not_of_this_machine_is_one_line_exit_2(home: Path, command: str) -> None:
    args = ["--bind", f"{FOREIGN}:7700", "--auth-token-file", str(home / "token")]
    home.mkdir(parents=True, exist_ok=True)
    (home / "token").write_text("a-token\n")
    (home / "token").chmod(0o600)
    extra = ["--transport", "http"] if command == "serve" else []
    proc = run_cli(command, *extra, *args, home=home)
    one_line(proc, f"{FOREIGN}:7700", "not an address of this machine", "--bind")


def test_ui_on_a_public_address_suggests_only_what_ui_accepts(home: Path) -> None:
    proc = run_cli("ui", "--bind", "0.0.0.0:8800", home=home)
    line = one_line(proc, "0.0.0.0", "--auth-token-file")
    assert "--insecure-no-auth" not in line  # ui has no such flag


def test_mcp_serving_a_network_transport_suggests_no_flag_it_lacks(home: Path) -> None:
    env = {"MEMTRIO_TRANSPORT": "tcp", "MEMTRIO_SERVE_BIND": "0.0.0.0:0"}
    proc = run_cli("mcp", home=home, env=env)
    line = one_line(proc, "0.0.0.0", "MEMTRIO_AUTH_TOKEN")
    assert "--" not in line  # memtrio mcp takes none of serve's listener flags


@pytest.mark.parametrize(
    ("exc", "needles"),
    [
        (OSError(errno.EACCES, "Permission denied"), ("privileged", "from 1024 up", "--bind")),
        (OSError(errno.EADDRNOTAVAIL, "Cannot assign"), ("not an address of this machine",)),
        (socket.gaierror(socket.EAI_NONAME, "Name or service not known"), ("not known",)),
        (OSError(errno.EADDRINUSE, "Address already in use"), ("already in use", "port 0")),
    ],
)
def test_bind_messages_say_what_to_do(exc: OSError, needles: tuple[str, ...]) -> None:
    message = bind_message("example.test", 80, exc)
    assert message.startswith("cannot listen on example.test:80: ")
    for needle in needles:
        assert needle in message, message


def test_the_attach_endpoint_message_names_no_flag() -> None:
    message = bind_message("127.0.0.1", 0, OSError(errno.EMFILE, "Too many open files"), "")
    assert "attach endpoint" in message and "ulimit -n" in message and "--bind" not in message
