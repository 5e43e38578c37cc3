"""Malformed traffic: every line must get a well-formed answer (or, for a
notification, none), and the session must keep serving.

Raw lines are followed by a ``ping`` sentinel: the session answers lines in
order, so the replies read before the sentinel's are the replies to the line.
Tool calls with wrong arguments are generated from each tool's ``inputSchema``
(from ``tools/list``) and must come back as ``isError`` results naming the field.
"""

from __future__ import annotations

import json
from typing import Any

import trio

from .client import ServerProcess
from .harness import Run, make_checkout, reply_error_text

SAMPLES: dict[str, Any] = {
    "null": None,
    "boolean": True,
    "integer": 7,
    "number": 1.5,
    "string": "x",
    "array": [1],
    "object": {"k": 1},
}
REQUEST_LIMIT = 256 * 1024  # bytes, for the huge-line cases (the server is started with it)

INIT_PARAMS = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "chaos", "version": "1"},
}


def allowed_types(schema: dict[str, Any], defs: dict[str, Any]) -> set[str] | None:
    """JSON types a schema admits (None: any)."""
    if "$ref" in schema:
        return allowed_types(defs.get(schema["$ref"].rsplit("/", 1)[-1], {}), defs)
    if "anyOf" in schema:
        out: set[str] = set()
        for sub in schema["anyOf"]:
            types = allowed_types(sub, defs)
            if types is None:
                return None
            out |= types
        return out
    if "enum" in schema or "const" in schema:
        values = schema.get("enum", [schema.get("const")])
        return {_json_type(v) for v in values}
    t = schema.get("type")
    if t is None:
        return None
    types = set(t) if isinstance(t, list) else {t}
    if "number" in types:
        types.add("integer")
    return types


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def valid_value(schema: dict[str, Any], defs: dict[str, Any]) -> Any:
    if "$ref" in schema:
        return valid_value(defs.get(schema["$ref"].rsplit("/", 1)[-1], {}), defs)
    if "anyOf" in schema:
        return valid_value(schema["anyOf"][0], defs)
    if "enum" in schema:
        return schema["enum"][0]
    t = schema.get("type")
    if t == "string":
        return "a" * max(1, int(schema.get("minLength", 1)))
    if t == "integer":
        return int(schema.get("minimum", 1))
    if t == "number":
        return float(schema.get("minimum", 0.5))
    if t == "boolean":
        return True
    if t == "array":
        return [valid_value(schema.get("items", {}), defs)] * int(schema.get("minItems", 0))
    if t == "object":
        return {}
    return None


def bad_values(schema: dict[str, Any], defs: dict[str, Any]) -> list[tuple[str, Any]]:
    """(label, value) pairs the schema must reject."""
    out: list[tuple[str, Any]] = []
    types = allowed_types(schema, defs)
    if types is not None:
        out += [(f"type {name}", value) for name, value in SAMPLES.items() if name not in types]
    plain = schema
    if "anyOf" in schema:
        non_null = [s for s in schema["anyOf"] if s.get("type") != "null"]
        plain = non_null[0] if len(non_null) == 1 else {}
    if "enum" in plain and all(isinstance(v, str) for v in plain["enum"]):
        out.append(("not in enum", "definitely-not-a-member"))
    if plain.get("type") in ("integer", "number"):
        if "minimum" in plain:
            out.append(("below minimum", plain["minimum"] - 1))
        if "maximum" in plain:
            out.append(("above maximum", plain["maximum"] + 1))
    if plain.get("type") == "string":
        if plain.get("minLength", 0) >= 1:
            out.append(("too short", ""))
        if 0 < plain.get("maxLength", 0) <= 20_000:
            out.append(("too long", "y" * (plain["maxLength"] + 1)))
    if plain.get("type") == "array" and 0 < plain.get("maxItems", 0) <= 200:
        item = valid_value(plain.get("items", {}), defs)
        out.append(("too many items", [item] * (plain["maxItems"] + 1)))
    return out


def tool_cases(tool: dict[str, Any]) -> list[tuple[str, Any, str | None]]:
    """(label, arguments, field the error must name) for one tool."""
    schema = tool.get("inputSchema", {})
    defs = schema.get("$defs", {})
    props: dict[str, Any] = schema.get("properties", {})
    required = schema.get("required", [])
    base = {name: valid_value(props[name], defs) for name in required}
    cases: list[tuple[str, Any, str | None]] = []
    for name, prop in props.items():
        for label, value in bad_values(prop, defs):
            cases.append((f"{name}: {label}", {**base, name: value}, name))
    for name in required:
        cases.append((f"missing {name}", {k: v for k, v in base.items() if k != name}, name))
    cases.append(("unknown field", {**base, "no_such_field_xyz": 1}, "no_such_field_xyz"))
    for label, value in (
        ("arguments array", [1, 2]),
        ("arguments string", "text"),
        ("arguments number", 3),
    ):
        cases.append((label, value, None))
    return cases


def raw_cases(run: Run) -> list[tuple[str, bytes, str]]:
    """(label, line without newline, expected answer: ``error``, ``result`` or ``none``)."""
    rng = run.rng
    valid = [
        {"jsonrpc": "2.0", "id": 11, "method": "ping"},
        {"jsonrpc": "2.0", "id": 12, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 13, "method": "resources/list"},
    ]
    cases: list[tuple[str, bytes, str]] = []
    for i in range(20 if run.quick else 500):
        data = bytes(rng.randrange(256) for _ in range(rng.randint(1, 200))).replace(b"\n", b" ")
        if data.strip() and not data.strip().isdigit():
            cases.append((f"garbage {i}", data, "error"))
    for i in range(15 if run.quick else 300):
        line = json.dumps(rng.choice(valid)).encode()
        cut = rng.randint(1, len(line) - 1)
        if line[:cut].strip() and not line[:cut].strip().isdigit():
            cases.append((f"truncated {i}", line[:cut], "error"))
    nested = b"[" * 100_000 + b"]" * 100_000
    cases += [
        ("invalid utf-8 in method", b'{"jsonrpc":"2.0","id":21,"method":"\xff\xfe"}', "error"),
        # msgspec skips ignored params without checking their UTF-8: either answer is fine.
        (
            "invalid utf-8 in ignored params",
            b'{"jsonrpc":"2.0","id":22,"method":"ping","params":{"a":"\xc3\x28"}}',
            "any",
        ),
        ("invalid utf-8 bare", b"\xff\xfe\xfd", "error"),
        ("NUL in method", b'{"jsonrpc":"2.0","id":23,"method":"ping\\u0000"}', "error"),
        ("raw control char in string", b'{"jsonrpc":"2.0","id":24,"method":"pi\x01ng"}', "error"),
        ("control characters", b"\x01\x02\x03\x1b[31m", "error"),
        ("carriage return line end", b'{"jsonrpc":"2.0","id":25,"method":"ping"}\r', "result"),
        (
            "deeply nested params",
            b'{"jsonrpc":"2.0","id":26,"method":"ping","params":{"a":' + nested + b"}}",
            "error",
        ),
        ("deeply nested array", b"[" * 200_000, "error"),
        ("deeply nested objects", b'{"a":' * 50_000 + b"1" + b"}" * 50_000, "error"),
        ("batch", b'[{"jsonrpc":"2.0","id":28,"method":"ping"}]', "error"),
        ("empty object", b"{}", "error"),
        ("null", b"null", "error"),
        ("number", b"42", "error"),
        ("string", b'"ping"', "error"),
        ("wrong jsonrpc version", b'{"jsonrpc":"1.0","id":29,"method":"ping"}', "error"),
        ("missing jsonrpc", b'{"id":30,"method":"ping"}', "error"),
        ("id object", b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}', "error"),
        ("id bool", b'{"jsonrpc":"2.0","id":true,"method":"ping"}', "error"),
        ("id float", b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', "error"),
        ("id null", b'{"jsonrpc":"2.0","id":null,"method":"ping"}', "result"),
        ("method missing", b'{"jsonrpc":"2.0","id":31}', "error"),
        ("method number", b'{"jsonrpc":"2.0","id":32,"method":5}', "error"),
        ("params string", b'{"jsonrpc":"2.0","id":33,"method":"ping","params":"x"}', "error"),
        ("params number", b'{"jsonrpc":"2.0","id":34,"method":"tools/list","params":3}', "error"),
        (
            "tools/call params array",
            b'{"jsonrpc":"2.0","id":35,"method":"tools/call","params":[1]}',
            "error",
        ),
        (
            "tools/call name number",
            b'{"jsonrpc":"2.0","id":36,"method":"tools/call","params":{"name":5}}',
            "error",
        ),
        (
            "tools/call unknown tool",
            b'{"jsonrpc":"2.0","id":37,"method":"tools/call","params":{"name":"nope"}}',
            "error",
        ),
        (
            "tools/call no name",
            b'{"jsonrpc":"2.0","id":38,"method":"tools/call","params":{}}',
            "error",
        ),
        (
            "tools/list bad cursor",
            b'{"jsonrpc":"2.0","id":39,"method":"tools/list","params":{"cursor":"@@@"}}',
            "error",
        ),
        (
            "resources/read no uri",
            b'{"jsonrpc":"2.0","id":40,"method":"resources/read","params":{}}',
            "error",
        ),
        (
            "resources/read unknown",
            b'{"jsonrpc":"2.0","id":41,"method":"resources/read","params":{"uri":"x://y"}}',
            "error",
        ),
        (
            "initialize, bad params",
            b'{"jsonrpc":"2.0","id":42,"method":"initialize","params":{"capabilities":7}}',
            "error",
        ),
        ("unknown method", b'{"jsonrpc":"2.0","id":43,"method":"foo/bar"}', "error"),
        ("empty method", b'{"jsonrpc":"2.0","id":44,"method":""}', "error"),
        ("near-miss method", b'{"jsonrpc":"2.0","id":45,"method":"tools/cal"}', "error"),
        ("unknown notification", b'{"jsonrpc":"2.0","method":"notifications/whatever"}', "none"),
        (
            "cancel with bad params",
            b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":{}}}',
            "none",
        ),
        (
            "cancel unknown id",
            b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":987654}}',
            "none",
        ),
        ("cancel without params", b'{"jsonrpc":"2.0","method":"notifications/cancelled"}', "none"),
        ("stray response", b'{"jsonrpc":"2.0","id":46,"result":{}}', "none"),
        (
            "stray error response",
            b'{"jsonrpc":"2.0","id":47,"error":{"code":1,"message":"x"}}',
            "none",
        ),
        (
            "huge line",
            b'{"jsonrpc":"2.0","id":48,"method":"ping","params":{"pad":"'
            + b"p" * (REQUEST_LIMIT + 10)
            + b'"}}',
            "error",
        ),
        ("huge garbage line", b"g" * (REQUEST_LIMIT * 3), "error"),
        (
            "line just under the limit",
            b'{"jsonrpc":"2.0","id":49,"method":"ping","params":{"pad":"'
            + b"p" * (REQUEST_LIMIT - 200)
            + b'"}}',
            "result",
        ),
        ("whitespace only", b"   \t  ", "none"),
    ]
    return cases


async def _sentinel(server: ServerProcess, n: int) -> list[dict[str, Any]]:
    """Ping; the unmatched replies that came before it."""
    reply = await server.request("ping", rid=f"sentinel-{n}", timeout=30)
    if "result" not in reply:
        raise AssertionError(f"sentinel ping failed: {reply}")
    return server.take_unmatched()


async def run_malformed(run: Run) -> None:
    out = run.out
    home = run.home()
    # Every tool group on (code tools need a Git checkout to start in).
    repo = run.base / "repo"
    await trio.to_thread.run_sync(make_checkout, repo, 2)
    env = {
        "MEMTRIO_REQUEST_LIMIT": str(REQUEST_LIMIT),
        "MEMTRIO_CODE": "on",
        "MEMTRIO_CODE_INDEX_THREADS": "1",
    }
    server = await run.server(home, env, cwd=repo, initialize=False)
    n = 0

    # Before initialize: only ping and initialize are served.
    for method in ("tools/list", "tools/call", "resources/list", "prompts/list"):
        reply = await server.request(
            method, {"name": "stats", "arguments": {}} if method == "tools/call" else None
        )
        out.malformed += 1
        out.errors_expected += 1
        if reply.get("error", {}).get("code") != -32002:
            out.violations.append(
                f"{method} before initialize: expected -32002, got {str(reply)[:160]}"
            )
    reply = await server.initialize()
    if "result" not in reply:
        out.violations.append(f"initialize after pre-init requests failed: {reply}")

    # Raw lines.
    for label, line, expected in raw_cases(run):
        n += 1
        out.malformed += 1
        out.errors_expected += expected == "error"
        await server.send_bytes(line + b"\n")
        replies = await _sentinel(server, n)
        kinds = ["error" if "error" in r else "result" for r in replies]
        if expected == "any" and len(kinds) == 1:
            out.errors_expected += kinds == ["error"]
        elif kinds != ([] if expected == "none" else [expected]):
            out.violations.append(f"{label}: expected {expected}, got {str(replies)[:200]}")
        if label == "huge line" and replies and replies[0].get("id") != 48:
            out.violations.append(
                f"huge line: the error does not carry the request id 48: {str(replies[0])[:160]}"
            )

    # Bad text inside tool arguments (answered by the call's task, so waited for by id).
    bad_text = [
        ("invalid utf-8 in arguments", b'"content":"bad \xc3\x28 text"'),
        ("lone surrogate in arguments", b'"content":"bad \\ud800 text"'),
        ("NUL in arguments", b'"content":"\\u0000"'),
    ]
    for i, (label, fragment) in enumerate(bad_text):
        rid = f"text-{i}"
        receive = server.expect(rid)
        await server.send_bytes(
            b'{"jsonrpc":"2.0","id":"'
            + rid.encode()
            + b'","method":"tools/call","params":{"name":"remember","arguments":{'
            + fragment
            + b"}}}\n"
        )
        # A parse error is answered at once with id null; a decoded call, by its task.
        parse_errors = [
            r for r in await _sentinel(server, -2 - i) if "error" in r and r.get("id") is None
        ]
        if parse_errors:
            server._waiting.pop(rid, None)
            out.malformed += 1
            out.errors_expected += 1
            continue
        reply = await server.wait_reply(rid, receive, 30)
        out.malformed += 1
        if reply_error_text(reply) is None:
            if label.startswith("NUL"):
                continue  # a NUL character is valid JSON text; storing it is fine
            out.violations.append(f"{label}: accepted: {str(reply)[:160]}")
        else:
            out.errors_expected += 1
            if "result" in reply:
                server.stats.tool_errors += 1

    # Deep nesting inside tool arguments.
    reply = await server.call_tool("recall", {"query": "x", "scopes": [[[[[[[[[[[]]]]]]]]]]]})
    out.malformed += 1
    out.errors_expected += 1
    if reply_error_text(reply) is None:
        out.violations.append("nested arguments were accepted")

    # Duplicate ids: a second call with the id of a running call is refused.
    tools = await server.tools()
    slow = {
        "jsonrpc": "2.0",
        "id": "dup",
        "method": "tools/call",
        "params": {"name": "recall", "arguments": {"query": "dup"}},
    }
    receive = server.expect("dup")
    await server.send_bytes((json.dumps(slow) + "\n" + json.dumps(slow) + "\n").encode())
    out.malformed += 1
    got: list[dict[str, Any]] = [await server.wait_reply("dup", receive, 30)]
    receive = server.expect("dup")
    with trio.move_on_after(10):
        got.append(await server.wait_reply("dup", receive, 10))
    got += [r for r in server.take_unmatched() if r.get("id") == "dup"]
    if len(got) != 2:
        out.violations.append(f"duplicate id: {len(got)} replies to two requests with id 'dup'")
    # The second is refused while the first runs (or served if the first already
    # finished): both are well-formed; count what happened.
    out.errors_expected += sum("error" in r for r in got)

    # Cancellation of finished calls: no reply, the session goes on.
    reply = await server.call_tool("stats", {})
    finished = 2_000_000
    await server.send(
        {
            "jsonrpc": "2.0",
            "id": finished,
            "method": "tools/call",
            "params": {"name": "stats", "arguments": {}},
        }
    )
    await trio.sleep(0.2)
    for rid in (finished, reply["id"], finished):
        await server.notify("notifications/cancelled", {"requestId": rid, "reason": "chaos"})
        out.malformed += 1
    leftovers = await _sentinel(server, -1)
    stray = [r for r in leftovers if r.get("id") != finished]
    if stray:
        out.violations.append(f"cancelling finished calls produced replies: {str(stray)[:200]}")

    # Wrong arguments for every field of every tool.
    if not any(t["name"].startswith("code_") for t in tools):
        out.violations.append("the code tools are missing: their arguments were not tried")
    out.notes.append(f"{len(tools)} tools")
    for tool in tools:
        for label, arguments, field in tool_cases(tool):
            out.malformed += 1
            out.errors_expected += 1
            reply = await server.call_tool(tool["name"], arguments, timeout=30)
            error = reply_error_text(reply)
            if error is None:
                out.violations.append(
                    f"{tool['name']} {label}: accepted {json.dumps(arguments)[:120]}"
                )
            elif field is not None and field not in error:
                out.violations.append(
                    f"{tool['name']} {label}: the error does not name `{field}`: {error[:160]}"
                )

    # Still serving.
    reply = await server.call_tool("stats", {})
    if reply_error_text(reply) is not None:
        out.violations.append(
            f"stats after the malformed traffic failed: {reply_error_text(reply)[:200]}"
        )
    out.errors_seen = server.stats.errors + server.stats.tool_errors
    out.errors_exact = True
    await run.stop(server)
