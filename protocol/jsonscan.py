"""JSON text walked with an explicit stack: validation and top-level extents, at any depth.

msgspec decodes recursively and gives up past Python's recursion limit (about
1000 levels of nesting), and it needs the whole document. `top_level` walks
JSON text iteratively instead, so it works at any depth and on a prefix of a
line (an oversized line is never held whole). It builds no values, only the
offsets of the top-level members (of an object) or elements (of an array);
a caller decodes the one value it needs (an ``id``) with msgspec.

Runs of ``[`` and of closing brackets are single tokens, so the cost of a
deeply nested value is in its scalars (and objects), not its depth.

Error handling: `Invalid` for text that is not JSON, `Truncated` when the text
ends before the value does (expected on a prefix).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

_WS = rb"[ \t\n\r]*"
_TOKEN = re.compile(
    _WS
    + rb"(?:"
    + rb'(?P<str>"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*")'
    + rb"|(?P<open>\[+|\{)"
    + rb"|(?P<close>[\]}]+)"
    + rb"|(?P<comma>,)"
    + rb"|(?P<colon>:)"
    + rb"|(?P<num>-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)"
    + rb"|(?P<lit>true|false|null)"
    + rb")"
)
# What may still become a token if more text follows (the end of a prefix).
_PARTIAL = re.compile(
    _WS
    + rb"(?:"
    + rb'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*(?:\\(?:u[0-9a-fA-F]{0,3})?)?'
    + rb"|-?(?:0|[1-9][0-9]*)?(?:\.[0-9]*)?(?:[eE][+-]?[0-9]*)?"
    + rb"|t(?:r(?:ue?)?)?|f(?:a(?:l(?:se?)?)?)?|n(?:u(?:ll?)?)?"
    + rb")"
)
_TRAILING_WS = re.compile(_WS)
# After a number at the end of a prefix, these may still extend it ("" is the end itself).
_NUMBER_GOES_ON = frozenset(b"" if c is None else bytes([c]) for c in (None, *b"0123456789.eE+-"))
_OPENER = bytes.maketrans(b"]}", b"[{")

# Grammar states.
_VALUE = 0  # a value must come (start, after ':' or after ',' in an array)
_VALUE_OR_CLOSE = 1  # just after '['
_KEY_OR_CLOSE = 2  # just after '{'
_KEY = 3  # after ',' in an object
_COLON = 4  # after a key
_AFTER = 5  # after a value: ',' or a closing bracket (or the end, at depth 0)


class Invalid(ValueError):
    """The text is not JSON."""


class Truncated(ValueError):
    """The text ends before its value does."""


def top_level(buf: bytes, final: bool = True) -> Iterator[tuple[bytes | None, int, int]]:  # noqa: C901
    """Yield ``(key, start, end)`` for each member of the top-level object of ``buf``,
    or ``(None, start, end)`` for each element of a top-level array, as soon as the
    member's value is complete. ``key`` is the raw key token, quotes included.

    The text is checked against the JSON grammar (string escapes, numbers, bracket
    pairs, commas, colons, trailing text) as far as it is read; a top-level scalar
    yields nothing. With ``final=False``, ``buf`` is a prefix: its end raises
    `Truncated` (a number that the end may still extend counts as unfinished).
    UTF-8 is not checked here: msgspec checks it in the values a caller decodes.

    Raises `Invalid` at the first byte that cannot continue any JSON text, and
    `Truncated` when the text ends before its value does.
    """
    stack = bytearray()  # the open brackets, outermost first
    state = _VALUE
    pos = 0
    key: bytes | None = None
    start = -1  # where the current top-level member's value starts
    match = _TOKEN.match
    while True:
        m = match(buf, pos)
        if m is None or (
            not final and m.lastgroup == "num" and buf[m.end() : m.end() + 1] in _NUMBER_GOES_ON
        ):
            if state == _AFTER and not stack:
                if _TRAILING_WS.fullmatch(buf, pos) is not None:
                    return
                raise Invalid(f"trailing characters at byte {pos}")
            if _PARTIAL.fullmatch(buf, pos) is not None:
                raise Truncated("the text ends inside a value" if final else "end of the prefix")
            raise Invalid(f"invalid character at byte {pos}")
        kind = m.lastgroup
        assert kind is not None  # every alternative of the token pattern is a named group
        tok = m.start(kind)
        pos = m.end()
        depth = len(stack)
        if kind == "str" and state in (_KEY_OR_CLOSE, _KEY):
            if depth == 1:
                key = m.group(kind)
            state = _COLON
        elif kind in ("str", "num", "lit"):
            if state not in (_VALUE, _VALUE_OR_CLOSE):
                raise Invalid(f"unexpected value at byte {tok}")
            state = _AFTER
            if depth == 1:
                yield key, tok, pos
        elif kind == "open":
            if state not in (_VALUE, _VALUE_OR_CLOSE):
                raise Invalid(f"unexpected bracket at byte {tok}")
            run = pos - tok
            if depth == 0 and run > 1:
                start = tok + 1  # the top-level array's first element is itself an array
            elif depth + run > 1 and depth <= 1:
                start = tok
            stack += m.group(kind)
            state = _KEY_OR_CLOSE if buf[tok] == 0x7B else _VALUE_OR_CLOSE
        elif kind == "close":
            if state not in (_AFTER, _VALUE_OR_CLOSE, _KEY_OR_CLOSE):
                raise Invalid(f"unexpected closing bracket at byte {tok}")
            run = pos - tok
            if run > depth or stack[depth - run :] != buf[tok:pos][::-1].translate(_OPENER):
                raise Invalid(f"mismatched closing bracket at byte {tok}")
            del stack[depth - run :]
            state = _AFTER
            if depth >= 2 and depth - run <= 1:
                # The closer that brings the depth back to 1 ends a top-level member.
                yield key, start, tok + depth - 1
        elif kind == "comma":
            if state != _AFTER or not stack:
                raise Invalid(f"unexpected ',' at byte {tok}")
            state = _KEY if stack[-1] == 0x7B else _VALUE
        else:  # colon
            if state != _COLON:
                raise Invalid(f"unexpected ':' at byte {tok}")
            state = _VALUE


_STRING = re.compile(rb'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"')
_SCALAR = re.compile(rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null")
_SCALAR_BYTES = frozenset(b"0123456789+-.eEtrufalsn")
_WS_BYTES = frozenset(b" \t\n\r")
_PAIRS = {ord("]"): ord("["), ord("}"): ord("{")}


def last_members(buf: bytes) -> Iterator[tuple[bytes, int, int]]:  # noqa: C901
    """Yield ``(key, start, end)`` for the members of the top-level object that
    ``buf`` ends (``buf`` is the end of a line, its suffix), last member first.

    JSON can be read backwards: the opening quote of a string is the first quote
    before its closing one that is preceded by an even run of backslashes. So the
    members of the object a line ends with are found without its beginning.

    Raises `Truncated` on reaching the start of ``buf`` (that member, or what is
    before it, is not known), `Invalid` when ``buf`` cannot end a JSON object.
    """
    pos = _back_ws(buf, len(buf))
    if pos == 0:
        raise Truncated("nothing to read")
    if buf[pos - 1] != 0x7D:  # "}"
        raise Invalid("the text does not end an object")
    pos = _back_ws(buf, pos - 1)
    if pos and buf[pos - 1] == 0x7B:  # "{}"
        return
    while True:
        end = pos
        start = _value_start(buf, end)
        pos = _back_ws(buf, start)
        if pos == 0:
            raise Truncated("the start of the text")
        if buf[pos - 1] != 0x3A:  # ":"
            raise Invalid(f"expected ':' before byte {start}")
        pos = _back_ws(buf, pos - 1)
        if pos == 0:
            raise Truncated("the start of the text")
        if buf[pos - 1] != 0x22:
            raise Invalid(f"expected a key before byte {pos}")
        key_start = _string_start(buf, pos)
        yield buf[key_start:pos], start, end
        pos = _back_ws(buf, key_start)
        if pos == 0:
            raise Truncated("the start of the text")
        if buf[pos - 1] == 0x7B:  # "{": the object's first member
            return
        if buf[pos - 1] != 0x2C:  # ","
            raise Invalid(f"expected ',' before byte {key_start}")
        pos = _back_ws(buf, pos - 1)


def _back_ws(buf: bytes, pos: int) -> int:
    while pos > 0 and buf[pos - 1] in _WS_BYTES:
        pos -= 1
    return pos


def _string_start(buf: bytes, end: int) -> int:
    """Where the string ending (with its closing quote) at ``end`` starts."""
    i = end - 1
    while True:
        j = buf.rfind(b'"', 0, i)
        if j < 0:
            raise Truncated("the start of the text is inside a string")
        k = j
        while k > 0 and buf[k - 1] == 0x5C:  # backslash
            k -= 1
        if k == 0:  # what comes before the text may be one more backslash
            raise Truncated("the start of the text is inside a string")
        if (j - k) % 2 == 0:
            if _STRING.fullmatch(buf, j, end) is None:
                raise Invalid(f"not a JSON string at byte {j}")
            return j
        i = j


def _value_start(buf: bytes, end: int) -> int:  # noqa: C901
    """Where the value ending at ``end`` starts."""
    if end == 0:
        raise Truncated("the start of the text")
    last = buf[end - 1]
    if last == 0x22:
        return _string_start(buf, end)
    if last in _PAIRS:
        stack = bytearray([_PAIRS[last]])
        pos = end - 1
        while stack:
            pos = max(buf.rfind(c, 0, pos) for c in (b'"', b"[", b"]", b"{", b"}"))
            if pos < 0:
                raise Truncated("the start of the text is inside a value")
            c = buf[pos]
            if c == 0x22:
                pos = _string_start(buf, pos + 1)
            elif c in _PAIRS:
                stack.append(_PAIRS[c])
            elif stack.pop() != c:
                raise Invalid(f"mismatched bracket at byte {pos}")
        return pos
    start = end
    while start > 0 and buf[start - 1] in _SCALAR_BYTES:
        start -= 1
    if start == 0:
        raise Truncated("the start of the text may be inside a number")
    if start == end or _SCALAR.fullmatch(buf, start, end) is None:
        raise Invalid(f"not a JSON value before byte {end}")
    return start
