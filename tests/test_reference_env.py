"""Issue 31 item 10: a set-up copied from the reference (mcp-memory) does what it says.

mcp-memory's environment names of a setting memtrio has are read as fallbacks of
memtrio's own (``config.REFERENCE_ENV``): ``MCP_MEMORY_AUTH_TOKEN``,
``MCP_TLS_CERT``/``MCP_TLS_KEY``, ``MCP_MEMORY_DURABILITY``. Before, the first three
were ignored: such a set-up served without auth and without TLS and said nothing.
memtrio's name wins when both are set; a configuration error names the variable
actually read; a token given by value never reaches stderr or the trace log.
"""

from __future__ import annotations

import json
import ssl
from pathlib import Path

import httpx2
import pytest
import trustme
from httpserve import BOTH, INIT, initialize
from mcp_client import run_cli
from serve_helpers import serve_process

THEIRS = "the-reference-bearer-token-" + "r" * 24
OURS = "memtrio-s-own-bearer-token-" + "m" * 24
LIGHT = {"MEMTRIO_EMBEDDINGS": "off", "MEMTRIO_CODE": "off", "MEMTRIO_LOG_LEVEL": "debug"}
HTTP = ["--transport", "http", "--bind", "127.0.0.1:0"]


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, ssl.SSLContext]:
    """A certificate for 127.0.0.1, its key (private), and a client context trusting it."""
    where = tmp_path_factory.mktemp("tls")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert.cert_chain_pems[0].write_to_path(str(where / "cert.pem"))
    cert.private_key_pem.write_to_path(str(where / "key.pem"))
    (where / "key.pem").chmod(0o600)
    trust = ssl.create_default_context()
    ca.configure_trust(trust)
    return where / "cert.pem", where / "key.pem", trust


def logged(home: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in (home / "logs").glob("*"))


async def refused(url: str, token: str | None, **client: object) -> bool:
    headers = {"accept": BOTH} | ({"authorization": f"Bearer {token}"} if token else {})
    async with httpx2.AsyncClient(**client) as http:  # type: ignore[arg-type]
        return (await http.post(url, json=INIT, headers=headers)).status_code == 401


async def test_mcp_memory_auth_token_is_required_and_never_printed(home: Path) -> None:
    async with serve_process(home, HTTP, {**LIGHT, "MCP_MEMORY_AUTH_TOKEN": THEIRS}) as served:
        assert await refused(served.url, None)
        assert await refused(served.url, "not-the-token")
        async with httpx2.AsyncClient() as http:
            await initialize(http, served.url, {"authorization": f"Bearer {THEIRS}"})
    assert THEIRS not in served.stderr_text()
    assert THEIRS not in logged(home)


async def test_memtrio_s_auth_token_wins_over_the_reference_s(home: Path) -> None:
    both = {**LIGHT, "MEMTRIO_AUTH_TOKEN": OURS, "MCP_MEMORY_AUTH_TOKEN": THEIRS}
    async with serve_process(home, HTTP, both) as served:
        assert await refused(served.url, THEIRS)
        assert not await refused(served.url, OURS)
    text = served.stderr_text() + logged(home)
    assert OURS not in text and THEIRS not in text


async def test_mcp_tls_cert_and_key_serve_https(
    home: Path, tls: tuple[Path, Path, ssl.SSLContext]
) -> None:
    cert, key, trust = tls
    env = {**LIGHT, "MCP_TLS_CERT": str(cert), "MCP_TLS_KEY": str(key)}
    async with serve_process(home, HTTP, env) as served:
        assert served.url.startswith("https://127.0.0.1:")
        async with httpx2.AsyncClient(verify=trust) as http:
            await initialize(http, served.url)


async def test_memtrio_s_tls_files_win_over_the_reference_s(
    home: Path, tls: tuple[Path, Path, ssl.SSLContext], tmp_path: Path
) -> None:
    cert, key, trust = tls
    env = {
        **LIGHT,
        "MEMTRIO_SERVE_TLS_CERT": str(cert),
        "MEMTRIO_SERVE_TLS_KEY": str(key),
        "MCP_TLS_CERT": str(tmp_path / "no-such-cert.pem"),
        "MCP_TLS_KEY": str(tmp_path / "no-such-key.pem"),
    }
    async with serve_process(home, HTTP, env) as served:
        assert served.url.startswith("https://")
        assert not await refused(served.url, None, verify=trust)


def one_line(proc: object, *needles: str) -> str:
    lines = proc.stderr.strip().splitlines()  # type: ignore[attr-defined]
    assert proc.returncode == 2 and len(lines) == 1, (proc.returncode, lines)  # type: ignore[attr-defined]
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def test_a_bad_reference_tls_setting_exits_2_naming_the_variable_read(
    home: Path, tls: tuple[Path, Path, ssl.SSLContext], tmp_path: Path
) -> None:
    cert, key, _ = tls
    missing = tmp_path / "missing.pem"
    cases = [
        ({"MCP_TLS_CERT": str(missing), "MCP_TLS_KEY": str(key)}, ["MCP_TLS_CERT", "no such file"]),
        ({"MCP_TLS_CERT": str(cert)}, ["MCP_TLS_CERT was given without MCP_TLS_KEY"]),
        ({"MCP_TLS_CERT": str(key), "MCP_TLS_KEY": str(key)}, ["MCP_TLS_CERT", "not a PEM"]),
        ({"MCP_MEMORY_DURABILITY": "fast"}, ["MCP_MEMORY_DURABILITY=fast (environment)"]),
    ]
    for env, needles in cases:
        one_line(run_cli("serve", *HTTP, home=home, env={**LIGHT, **env}), *needles)


def test_a_blank_token_variable_is_refused_not_served_without_auth(home: Path) -> None:
    for name in ("MCP_MEMORY_AUTH_TOKEN", "MEMTRIO_AUTH_TOKEN"):
        proc = run_cli("serve", *HTTP, home=home, env={**LIGHT, name: "  "})
        one_line(proc, f"{name} is blank")


def test_a_token_under_a_wrong_name_is_refused_without_printing_it(home: Path) -> None:
    proc = run_cli("serve", *HTTP, home=home, env={**LIGHT, "MEMTRIO_SERVE_AUTH_TOKEN": THEIRS})
    one_line(proc, "MEMTRIO_SERVE_AUTH_TOKEN=<hidden>", "unknown key serve.auth_token")
    assert THEIRS not in proc.stderr and THEIRS not in logged(home)


def test_memtrio_s_durability_wins_over_the_reference_s_under_either_name(home: Path) -> None:
    def durability(env: dict[str, str]) -> str:
        proc = run_cli("doctor", "--json", home=home, env={**LIGHT, **env})
        return str(json.loads(proc.stdout)["durability"])

    assert durability({"MCP_MEMORY_DURABILITY": "sync"}) == "sync"
    for ours in ("MEMTRIO_DURABILITY", "MEMTRIO_STORE_DURABILITY"):
        assert durability({"MCP_MEMORY_DURABILITY": "sync", ours: "async"}) == "async"
