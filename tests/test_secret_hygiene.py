"""Items 5 and 8 of issue 29: secrets on stderr, TLS files that cannot serve, loose secrets.

- ``serve --ui --auth-token-file F`` printed the MCP bearer token inside the
  dashboard URL (and the dashboard accepted it). The dashboard now has its own
  per-launch token; the MCP token is never printed and never opens it.
- A ``--tls-key`` that is not PEM exited 1 with a supervisor "gave up" line on
  http; now every transport and ``memtrio ui`` exit 2 with one line naming the
  file at fault.
- A token file or TLS key others can read, or a config.toml others can write,
  started silently: now one warning line (naming the file and ``chmod 600``),
  and exit 2 under ``--strict-permissions`` / ``[serve] strict_permissions``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest
import trio
import trustme
import waits
from cryptography.hazmat.primitives import serialization
from mcp_client import run_cli
from memtrio.supervisors import trust
from serve_helpers import initialize_line, serve_process, tcp_client

MCP_TOKEN = "the-mcp-bearer-token-" + "k" * 24
DASHBOARD = re.compile(r"dashboard at (https?://127\.0\.0\.1:\d+)/\?token=(\S+)")
UI_LINE = re.compile(r"memtrio ui: (http://127\.0\.0\.1:\d+)/\?token=(\S+)")
LIGHT = {"MEMTRIO_EMBEDDINGS": "off", "MEMTRIO_CODE": "off"}


def private_file(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def one_line(proc: subprocess.CompletedProcess[str], code: int, *needles: str) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == code and len(lines) == 1, (proc.returncode, proc.stderr)
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


# -- item 5: the dashboard's own token ------------------------------------------------------


async def test_serve_ui_never_prints_the_mcp_token_and_the_dashboard_refuses_it(
    home: Path, tmp_path: Path
) -> None:
    token_file = private_file(tmp_path / "token", MCP_TOKEN + "\n")
    args = ["--ui", "--transport", "http", "--bind", "127.0.0.1:0"]
    async with serve_process(home, [*args, "--auth-token-file", str(token_file)], LIGHT) as served:
        await waits.until(lambda: DASHBOARD.search(served.stderr_text()), 30)
        found = DASHBOARD.search(served.stderr_text())
        assert found is not None
        base, dash_token = found[1], found[2]
        async with httpx2.AsyncClient(base_url=base) as client:
            own = await client.get("/api/overview", headers={"x-memtrio-token": dash_token})
            assert own.status_code == 200
            for headers in (
                {"x-memtrio-token": MCP_TOKEN},
                {"authorization": f"Bearer {MCP_TOKEN}"},
            ):
                assert (await client.get("/api/overview", headers=headers)).status_code == 401
            # The dashboard's token opens the dashboard only, not /mcp.
            mcp = {"accept": "application/json, text/event-stream"}
            wrong = await client.post(
                "/mcp",
                json=initialize_line(),
                headers={**mcp, "authorization": f"Bearer {dash_token}"},
            )
            assert wrong.status_code == 401
            right = await client.post(
                "/mcp",
                json=initialize_line(),
                headers={**mcp, "authorization": f"Bearer {MCP_TOKEN}"},
            )
            assert right.status_code == 200
    assert MCP_TOKEN not in served.stderr_text()
    assert dash_token != MCP_TOKEN
    assert MCP_TOKEN not in "".join(p.read_text(errors="replace") for p in home.rglob("*.log"))


async def test_memtrio_ui_never_prints_a_configured_token(home: Path, tmp_path: Path) -> None:
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "memtrio.supervisors.cli", "ui", "--home", str(home)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, **LIGHT, "MEMTRIO_HOME": str(home), "MEMTRIO_AUTH_TOKEN": MCP_TOKEN},
        cwd=str(tmp_path),
    )
    try:
        assert process.stderr is not None
        line = b""
        with trio.fail_after(60):
            while b"\n" not in line:
                chunk = await process.stderr.receive_some(4096)
                assert chunk, line
                line += chunk
        found = UI_LINE.search(line.decode())
        assert found is not None, line
        assert MCP_TOKEN not in line.decode()
        async with httpx2.AsyncClient(base_url=found[1]) as client:
            refused = await client.get("/api/overview", headers={"x-memtrio-token": MCP_TOKEN})
            own = await client.get("/api/overview", headers={"x-memtrio-token": found[2]})
        assert refused.status_code == 401 and own.status_code == 200
    finally:
        process.terminate()
        with trio.fail_after(30):
            await process.wait()


# -- item 8: TLS files that cannot serve, secrets others can read ---------------------------


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A certificate and its key, another key, an encrypted key, a file that is not PEM."""
    where = tmp_path_factory.mktemp("tls")
    ca = trustme.CA()
    cert = ca.issue_cert("localhost", "127.0.0.1")
    other = ca.issue_cert("localhost")
    cert.cert_chain_pems[0].write_to_path(str(where / "cert.pem"))
    cert.private_key_pem.write_to_path(str(where / "key.pem"))
    other.private_key_pem.write_to_path(str(where / "other-key.pem"))
    key = serialization.load_pem_private_key(cert.private_key_pem.bytes(), password=None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"pass"),
    )
    (where / "encrypted-key.pem").write_bytes(encrypted)
    (where / "der.bin").write_bytes(b"\x30\x82\x01\x0a" + os.urandom(64))
    for path in where.iterdir():
        path.chmod(0o600)
    return {p.stem: p for p in where.iterdir()}


CASES = {
    "key not PEM": ("cert", "der", "--tls-key", "not a PEM private key"),
    "cert not PEM": ("der", "key", "--tls-cert", "not a PEM file"),
    "cert and key swapped": ("key", "cert", "--tls-cert", "not a PEM certificate"),
    "key of another certificate": ("cert", "other-key", "--tls-key", "not the key of"),
    "encrypted key": ("cert", "encrypted-key", "--tls-key", "encrypted"),
}


@pytest.mark.parametrize("transport", ["http", "ws"])
@pytest.mark.parametrize("case", list(CASES))
def test_tls_files_that_cannot_serve_exit_2_naming_the_file(
    home: Path, tls_files: dict[str, Path], transport: str, case: str
) -> None:
    cert, key, flag, why = CASES[case]
    proc = run_cli(
        "serve", "--transport", transport, "--bind", "127.0.0.1:0",
        "--tls-cert", str(tls_files[cert]), "--tls-key", str(tls_files[key]),
        home=home, timeout=60,
    )  # fmt: skip
    at_fault = tls_files[cert] if flag == "--tls-cert" else tls_files[key]
    one_line(proc, 2, f"{flag} {at_fault}", why)


def test_memtrio_ui_with_a_tls_key_that_is_not_pem_exits_2(
    home: Path, tmp_path: Path, tls_files: dict[str, Path]
) -> None:
    (home / "config.toml").write_text(
        f'[serve]\ntls_cert = "{tls_files["cert"]}"\ntls_key = "{tls_files["der"]}"\n'
    )
    proc = run_cli("ui", home=home, cwd=tmp_path, timeout=60)
    one_line(proc, 2, f"[serve] tls_key {tls_files['der']}", "not a PEM private key")


async def test_a_tls_key_others_can_read_is_a_warning_then_refused_when_strict(
    home: Path, tmp_path: Path, tls_files: dict[str, Path]
) -> None:
    key = tmp_path / "key.pem"
    key.write_bytes(tls_files["key"].read_bytes())
    key.chmod(0o644)
    args = ["--transport", "ws", "--bind", "127.0.0.1:0"]
    tls = ["--tls-cert", str(tls_files["cert"]), "--tls-key", str(key)]
    async with serve_process(home, [*args, *tls], LIGHT) as served:
        pass
    warnings = [s for s in served.stderr if "warning" in s]
    assert len(warnings) == 1 and f"chmod 600 {key}" in warnings[0], served.stderr
    strict = run_cli("serve", *args, *tls, "--strict-permissions", home=home, timeout=60)
    one_line(strict, 2, f"the TLS key {key}", "mode 0644", f"chmod 600 {key}", "strict_permissions")


async def test_a_token_file_others_can_read_is_a_warning_then_refused_when_strict(
    home: Path, tmp_path: Path
) -> None:
    token_file = private_file(tmp_path / "token", MCP_TOKEN + "\n", 0o644)
    args = ["--transport", "tcp", "--bind", "127.0.0.1:0", "--auth-token-file", str(token_file)]
    async with serve_process(home, args, LIGHT) as served:
        async with tcp_client(served.port, token=MCP_TOKEN) as client:
            assert "result" in await client.initialize()
    warnings = [s for s in served.stderr if "warning" in s]
    assert len(warnings) == 1 and f"chmod 600 {token_file}" in warnings[0], served.stderr
    assert MCP_TOKEN not in served.stderr_text()
    strict = run_cli("serve", *args, "--strict-permissions", home=home, timeout=60)
    one_line(strict, 2, f"the token file {token_file}", "mode 0644", "chmod 600")
    by_env = run_cli("serve", *args, home=home, env={"MEMTRIO_SERVE_STRICT_PERMISSIONS": "1"})
    one_line(by_env, 2, f"the token file {token_file}")
    assert MCP_TOKEN not in strict.stderr + by_env.stderr


def test_a_config_file_others_can_write_is_a_warning_then_refused_when_strict(
    home: Path, tmp_path: Path
) -> None:
    config = private_file(home / "config.toml", '[log]\nlevel = "info"\n', 0o666)
    loose = run_cli("scopes", home=home, cwd=tmp_path, timeout=60)
    assert loose.returncode == 0, loose.stderr
    warnings = [s for s in loose.stderr.splitlines() if "warning" in s]
    assert len(warnings) == 1 and f"chmod 600 {config}" in warnings[0], loose.stderr
    strict = run_cli(
        "scopes", home=home, cwd=tmp_path, env={"MEMTRIO_SERVE_STRICT_PERMISSIONS": "on"}
    )
    one_line(strict, 2, str(config), "writable by group or others")


def test_a_home_others_could_replace_is_a_warning_then_refused_when_strict(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # not sticky: anyone may rename the home away and put theirs there
    home = shared / "home"
    loose = run_cli("scopes", home=home, cwd=tmp_path, timeout=60)
    assert loose.returncode == 0, loose.stderr
    warnings = [s for s in loose.stderr.splitlines() if "warning" in s]
    assert len(warnings) == 1 and f"the home {home}: {shared} is writable" in warnings[0]
    strict = run_cli(
        "scopes", home=home, cwd=tmp_path, env={"MEMTRIO_SERVE_STRICT_PERMISSIONS": "1"}
    )
    one_line(strict, 2, f"the home {home}", "chmod go-w")


def test_trust_rules_for_directories(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    inside = shared / "home"
    inside.mkdir(mode=0o700)
    problem = trust.directory_problem(inside)
    assert problem is not None and str(shared) in problem  # anyone could rename it away
    shared.chmod(0o1777)  # sticky, like /tmp: nobody else can rename what is in it
    assert trust.directory_problem(inside) is None
    inside.chmod(0o777)
    assert trust.directory_problem(inside) is not None
