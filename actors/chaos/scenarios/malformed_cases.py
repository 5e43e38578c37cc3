"""The malformed inputs the ``malformed`` scenario tries.

Raw lines (`raw_cases`): random garbage and truncated requests (seeded), then
tables of bad encodings, nesting, envelopes, params, methods, notifications and
sizes, each with the answer it must get. Wrong tool arguments (`tool_cases`)
come from each tool's ``inputSchema``: wrong types, values out of range,
missing and unknown fields.
"""

from __future__ import annotations

import json
import random
from typing import Any

from ....protocol.tools import json_type

# (label, line without its newline, expected answer: "error", "result", "none" or "any")
RawCase = tuple[str, bytes, str]
# (label, arguments, the field the error must name: None for none in particular)
ToolCase = tuple[str, object, str | None]

REQUEST_LIMIT = 256 * 1024  # bytes, for the huge-line cases (the server is started with it)

# One value of each JSON type, for the wrong-type cases.
SAMPLES: dict[str, object] = {
    "null": None,
    "boolean": True,
    "integer": 7,
    "number": 1.5,
    "string": "x",
    "array": [1],
    "object": {"k": 1},
}

# Valid requests, cut short for the truncated cases.
_VALID_REQUESTS = (
    {"jsonrpc": "2.0", "id": 11, "method": "ping"},
    {"jsonrpc": "2.0", "id": 12, "method": "tools/list"},
    {"jsonrpc": "2.0", "id": 13, "method": "resources/list"},
)

ENCODING_CASES: tuple[RawCase, ...] = (
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
)

ENVELOPE_CASES: tuple[RawCase, ...] = (
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
)

PARAMS_CASES: tuple[RawCase, ...] = (
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
)

METHOD_CASES: tuple[RawCase, ...] = (
    ("unknown method", b'{"jsonrpc":"2.0","id":43,"method":"foo/bar"}', "error"),
    ("empty method", b'{"jsonrpc":"2.0","id":44,"method":""}', "error"),
    ("near-miss method", b'{"jsonrpc":"2.0","id":45,"method":"tools/cal"}', "error"),
)

# Notifications and responses sent to the server: never answered.
UNANSWERED_CASES: tuple[RawCase, ...] = (
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
)


# Bad text inside the arguments of a ``remember`` call: (label, the arguments' members).
ARGUMENT_TEXT_CASES: tuple[tuple[str, bytes], ...] = (
    ("invalid utf-8 in arguments", b'"content":"bad \xc3\x28 text"'),
    ("lone surrogate in arguments", b'"content":"bad \\ud800 text"'),
    ("NUL in arguments", b'"content":"\\u0000"'),
)


def _garbage(rng: random.Random, count: int) -> list[RawCase]:
    """Up to ``count`` lines of random bytes (blank ones and bare numbers left out)."""
    cases: list[RawCase] = []
    for i in range(count):
        data = bytes(rng.randrange(256) for _ in range(rng.randint(1, 200))).replace(b"\n", b" ")
        if data.strip() and not data.strip().isdigit():
            cases.append((f"garbage {i}", data, "error"))
    return cases


def _truncated(rng: random.Random, count: int) -> list[RawCase]:
    """Up to ``count`` valid requests cut short (blank ones and bare numbers left out)."""
    cases: list[RawCase] = []
    for i in range(count):
        line = json.dumps(rng.choice(_VALID_REQUESTS)).encode()
        cut = rng.randint(1, len(line) - 1)
        if line[:cut].strip() and not line[:cut].strip().isdigit():
            cases.append((f"truncated {i}", line[:cut], "error"))
    return cases


def _nesting_cases() -> list[RawCase]:
    """Nesting far deeper than any parser's recursion limit."""
    nested = b"[" * 100_000 + b"]" * 100_000
    return [
        (
            "deeply nested params",
            b'{"jsonrpc":"2.0","id":26,"method":"ping","params":{"a":' + nested + b"}}",
            "error",
        ),
        ("deeply nested array", b"[" * 200_000, "error"),
        ("deeply nested objects", b'{"a":' * 50_000 + b"1" + b"}" * 50_000, "error"),
    ]


def _size_cases() -> list[RawCase]:
    """Lines over the request limit, just under it, and blank."""
    return [
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


def raw_cases(rng: random.Random, quick: bool) -> list[RawCase]:
    """Every raw line to try, in order: the random ones first, then the tables."""
    return [
        *_garbage(rng, 20 if quick else 500),
        *_truncated(rng, 15 if quick else 300),
        *ENCODING_CASES,
        *_nesting_cases(),
        *ENVELOPE_CASES,
        *PARAMS_CASES,
        *METHOD_CASES,
        *UNANSWERED_CASES,
        *_size_cases(),
    ]


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
        return {json_type(v) for v in values}
    t = schema.get("type")
    if t is None:
        return None
    types = set(t) if isinstance(t, list) else {t}
    if "number" in types:
        types.add("integer")
    return types


def valid_value(schema: dict[str, Any], defs: dict[str, Any]) -> object:
    """A value the schema admits (the first choice of each alternative)."""
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


def bad_values(schema: dict[str, Any], defs: dict[str, Any]) -> list[tuple[str, object]]:  # noqa: C901
    """(label, value) pairs the schema must reject."""
    out: list[tuple[str, object]] = []
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


def tool_cases(tool: dict[str, Any]) -> list[ToolCase]:
    """(label, arguments, field the error must name) for one tool."""
    schema = tool.get("inputSchema", {})
    defs = schema.get("$defs", {})
    props: dict[str, Any] = schema.get("properties", {})
    required = schema.get("required", [])
    base = {name: valid_value(props[name], defs) for name in required}
    cases: list[ToolCase] = []
    for name, prop in props.items():
        # An optional property without a default takes null as "not given" (`struct_schema`).
        null_ok = name not in required and "default" not in prop
        for label, value in bad_values(prop, defs):
            if not (null_ok and value is None):
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
