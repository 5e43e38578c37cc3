"""The Streamable HTTP transport (MCP 2025-11-25) as clients see it: the official SDK's
client, and raw HTTP for the error answers, headers, Origin, auth, limits and TLS."""

from __future__ import annotations

import json
import ssl
from pathlib import Path

import httpx2
import trustme
from httpserve import BOTH, INIT, call, initialize, serving
from mcp import Client
from memtrio.protocol.mcp import SUPPORTED_VERSIONS


def text_of(result: object) -> dict[str, object]:
    content = result.content  # type: ignore[attr-defined]
    return json.loads(content[0].text)


async def test_the_official_sdk_client_uses_memory_and_graph_tools(tmp_path: Path) -> None:
    async with serving(tmp_path) as served, Client(served.url) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"remember", "recall", "create_entities", "search_nodes"} <= names
        stored = await client.call_tool("remember", {"content": "the kettle descales on Fridays"})
        assert not stored.is_error
        found = await client.call_tool("recall", {"query": "kettle"})
        assert "descales on Fridays" in json.dumps(text_of(found))
        created = await client.call_tool(
            "create_entities",
            {"entities": [{"name": "kettle", "entityType": "appliance", "observations": ["hot"]}]},
        )
        assert not created.is_error
        nodes = await client.call_tool("search_nodes", {"query": "kettle"})
        assert "appliance" in json.dumps(text_of(nodes))
        status = text_of(await client.call_tool("server_status", {}))
        transports = status["transports"]
        assert isinstance(transports, dict)
        assert transports["listeners"] == [{"transport": "http", "url": served.url}]
        assert transports["connections"] == 1


async def test_malformed_body_is_400_parse_error_and_the_session_goes_on(tmp_path: Path) -> None:
    async with serving(tmp_path) as served, httpx2.AsyncClient() as http:
        sid = await initialize(http, served.url)
        headers = {"accept": BOTH, "mcp-session-id": sid, "content-type": "application/json"}
        bad = await http.post(served.url, content=b'{"jsonrpc": "2.0", "id": 1,', headers=headers)
        assert bad.status_code == 400
        assert bad.json()["error"]["code"] == -32700
        envelope = await http.post(
            served.url, json={"jsonrpc": "1.0", "id": 7, "method": "ping"}, headers=headers
        )
        assert envelope.status_code == 400
        assert envelope.json()["id"] == 7 and envelope.json()["error"]["code"] == -32600
        good = await http.post(
            served.url, json={"jsonrpc": "2.0", "id": 2, "method": "ping"}, headers=headers
        )
        assert good.status_code == 200 and good.json() == {"jsonrpc": "2.0", "id": 2, "result": {}}


async def test_session_id_missing_unknown_and_deleted(tmp_path: Path) -> None:
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    async with serving(tmp_path) as served, httpx2.AsyncClient() as http:
        missing = await http.post(served.url, json=ping, headers={"accept": BOTH})
        assert missing.status_code == 400 and "Mcp-Session-Id" in missing.json()["error"]["message"]
        unknown = await http.post(
            served.url, json=ping, headers={"accept": BOTH, "mcp-session-id": "nope"}
        )
        assert unknown.status_code == 404
        sid = await initialize(http, served.url)
        assert sid.isascii() and sid.isprintable() and len(sid) >= 32
        assert sid != await initialize(http, served.url)
        gone = await http.delete(served.url, headers={"mcp-session-id": sid})
        assert gone.status_code == 204
        after = await http.post(
            served.url, json=ping, headers={"accept": BOTH, "mcp-session-id": sid}
        )
        assert after.status_code == 404
        again = await http.delete(served.url, headers={"mcp-session-id": sid})
        assert again.status_code == 404


async def test_protocol_version_header(tmp_path: Path) -> None:
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    async with serving(tmp_path) as served, httpx2.AsyncClient() as http:
        sid = await initialize(http, served.url)
        base = {"accept": BOTH, "mcp-session-id": sid}
        wrong = await http.post(
            served.url, json=ping, headers={**base, "mcp-protocol-version": "1999-01-01"}
        )
        assert wrong.status_code == 400
        message = wrong.json()["error"]["message"]
        assert all(version in message for version in SUPPORTED_VERSIONS)
        for headers in (base, {**base, "mcp-protocol-version": "2025-11-25"}):
            ok = await http.post(served.url, json=ping, headers=headers)
            assert ok.status_code == 200 and ok.json()["result"] == {}


async def test_origin_is_checked_against_loopback_and_the_allow_list(tmp_path: Path) -> None:
    allowed = ("https://app.example.com",)
    async with (
        serving(tmp_path, allowed_origins=allowed) as served,
        httpx2.AsyncClient() as http,
    ):
        for origin in ("http://evil.example", "http://localhost.evil.example", "null"):
            refused = await http.post(
                served.url, json=INIT, headers={"accept": BOTH, "origin": origin}
            )
            assert refused.status_code == 403, origin
        assert not served.connections.live
        for origin in ("http://localhost:3000", "https://127.0.0.1", "http://[::1]:8080", *allowed):
            ok = await http.post(served.url, json=INIT, headers={"accept": BOTH, "origin": origin})
            assert ok.status_code == 200, origin
            assert ok.headers["access-control-allow-origin"] == origin
            assert "mcp-session-id" in ok.headers["access-control-expose-headers"]


async def test_body_over_the_limit_is_413(tmp_path: Path) -> None:
    async with serving(tmp_path, body_limit=2000) as served, httpx2.AsyncClient() as http:
        sid = await initialize(http, served.url)
        headers = {"accept": BOTH, "mcp-session-id": sid}
        big = call(1, "remember", {"content": "x" * 5000})
        refused = await http.post(served.url, json=big, headers=headers)
        assert refused.status_code == 413
        assert refused.json()["error"]["code"] == -32600
        assert "2000 bytes" in refused.json()["error"]["message"]
        small = await http.post(served.url, json=call(2, "stats", {}), headers=headers)
        assert small.status_code == 200


async def test_bearer_token(tmp_path: Path) -> None:
    async with serving(tmp_path, token="s3cret") as served, httpx2.AsyncClient() as http:
        for auth in ({}, {"authorization": "Bearer wrong"}, {"authorization": "Basic s3cret"}):
            refused = await http.post(served.url, json=INIT, headers={"accept": BOTH, **auth})
            assert refused.status_code == 401
            assert refused.headers["www-authenticate"] == 'Bearer realm="memtrio"'
        sid = await initialize(http, served.url, {"authorization": "Bearer s3cret"})
        unauth = await http.delete(served.url, headers={"mcp-session-id": sid})
        assert unauth.status_code == 401


async def test_tls(tmp_path: Path) -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.cert_chain_pems[0].write_to_path(cert_path)
    cert.private_key_pem.write_to_path(key_path)
    trust = ssl.create_default_context()
    ca.configure_trust(trust)
    async with serving(tmp_path, tls_cert=cert_path, tls_key=key_path) as served:
        assert served.url.startswith("https://127.0.0.1:")
        async with httpx2.AsyncClient(verify=trust) as http:
            sid = await initialize(http, served.url)
            reply = await http.post(
                served.url,
                json=call(1, "stats", {}),
                headers={"accept": "application/json", "mcp-session-id": sid},
            )
            assert reply.status_code == 200 and "result" in reply.json()
        plain = served.url.replace("https://", "http://")
        async with httpx2.AsyncClient() as http:
            try:
                answer = await http.post(plain, json=INIT, headers={"accept": BOTH})
            except httpx2.HTTPError:
                return
            raise AssertionError(f"plain HTTP was served over TLS: {answer.status_code}")


async def test_other_paths_and_methods(tmp_path: Path) -> None:
    async with serving(tmp_path) as served, httpx2.AsyncClient() as http:
        elsewhere = served.url.replace("/mcp", "/other")
        assert (await http.post(elsewhere, json=INIT, headers={"accept": BOTH})).status_code == 404
        put = await http.put(served.url, json=INIT)
        assert put.status_code == 405 and "POST" in put.headers["allow"]
        sid = await initialize(http, served.url)
        no_accept = await http.get(served.url, headers={"mcp-session-id": sid})
        assert no_accept.status_code == 406


async def test_logging_set_level_is_accepted(tmp_path: Path) -> None:
    async with serving(tmp_path) as served, httpx2.AsyncClient() as http:
        init = await http.post(served.url, json=INIT, headers={"accept": BOTH})
        assert "logging" in init.json()["result"]["capabilities"]
        headers = {"accept": BOTH, "mcp-session-id": init.headers["mcp-session-id"]}
        for level, ok in (("warning", True), ("loud", False)):
            body = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "logging/setLevel",
                "params": {"level": level},
            }
            reply = (await http.post(served.url, json=body, headers=headers)).json()
            assert ("result" in reply) is ok
            if not ok:
                assert reply["error"]["code"] == -32602
