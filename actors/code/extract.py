"""Outline one source file: its symbols (definitions and imports) and coverage.

Pure and synchronous; it runs inside the parser worker processes (see
``worker``). Per file the Python work is one query cursor over the tree (the
outline's patterns and, for the digests, the comments and blocks: see
``digest``) and a few attribute reads per captured symbol: nesting comes from
byte ranges, not from walking the tree in Python.
"""

from __future__ import annotations

import functools

from tree_sitter import Node, Parser, Query, QueryCursor, Range
from tree_sitter_language_pack import SupportedLanguage, get_language, get_parser

from .digest import BLOCK_CAPTURE, COMMENT_CAPTURE, Span, Trivia, digests, trivia_patterns
from .languages import SPECS, Captures, Spec
from .symbols import MAX_BYTES, Outline, Symbol

MAX_NAME = 160
MAX_SIGNATURE = 200

# Kinds that hold other symbols but are never parents in the outline.
_LEAF_KINDS = frozenset({"import", "expression"})
# Kinds for which a signature is never shown (their name is the declaration).
_NO_SIGNATURE = frozenset(
    {"import", "expression", "component", "slot", "rule", "media", "supports", "keyframes"}
)
# Words a first line may end with that add nothing the kind and name do not say.
# (An open "(" stays: `def f(` followed by parameter lines shows that it takes some.)
_TRAILERS = ("{", "}", ":", ";", "()", "do", "=>", "where", "begin", "then", "->", "=")


class Skipped(Exception):
    """The file is not indexed; the message is the reason shown to users."""


@functools.cache
def _query(spec_name: str) -> tuple[Query, int]:
    """A language's outline query with its trivia patterns (comments and blocks, for
    the digests) appended, and the index of the first trivia pattern."""
    spec = SPECS[spec_name]
    language = get_language(spec.grammar)
    outline_only = Query(language, spec.query)
    trivia = trivia_patterns(spec.name, language)
    if not trivia:
        return outline_only, outline_only.pattern_count
    return Query(language, spec.query + "\n" + trivia), outline_only.pattern_count


@functools.cache
def _parser(grammar: SupportedLanguage) -> Parser:
    return get_parser(grammar)


def check_content(path: str, data: bytes) -> None:
    """Raise `Skipped` for files that are not source text worth parsing."""
    if len(data) > MAX_BYTES:
        raise Skipped("larger than 1 MiB")
    if b"\0" in data[:8192]:
        raise Skipped("binary")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        raise Skipped("not UTF-8") from None
    base = path.rsplit("/", 1)[-1].lower()
    if ".min." in base:
        raise Skipped("minified")
    if len(data) > 4096:
        lines = data.count(b"\n") + 1
        if len(data) / lines > 400:
            raise Skipped("minified")


def _first_error_row(node: Node) -> int:
    """Row of the first ERROR or MISSING node under ``node`` (which has_error)."""
    while True:
        if node.is_error or node.is_missing:
            return node.start_point[0]
        for child in node.children:
            if child.has_error or child.is_missing:
                node = child
                break
        else:
            return node.start_point[0]


class _Rec:
    __slots__ = ("sb", "eb", "sr", "er", "kind", "name", "raw", "order", "span")

    def __init__(
        self,
        sb: int,
        eb: int,
        sr: int,
        er: int,
        kind: str,
        name: str,
        raw: str,
        order: int,
        span: tuple[int, int] | None,
    ) -> None:
        self.sb, self.eb, self.sr, self.er = sb, eb, sr, er
        self.kind, self.name, self.raw, self.order = kind, name, raw, order
        self.span = span  # byte range of the name node, if any


def _collect(  # noqa: C901
    spec: Spec,
    src: bytes,
    ranges: list[Range] | None,
    recs: list[_Rec],
    problems: list[str],
    order_base: int,
) -> Trivia:
    """Add the symbols of ``src`` parsed as ``spec`` (only ``ranges`` of it, when
    given) to ``recs``, then those of the regions it embeds in other languages;
    syntax errors are noted in ``problems``. Returns the comments and blocks of
    ``spec``'s own tree (not of the embedded regions')."""
    root = _parse(spec, src, ranges)
    if root.has_error:
        row = _first_error_row(root)
        where = f" in embedded {spec.name}" if ranges is not None else ""
        problems.append(f"syntax error{where} at line {row + 1}")
    embeds: dict[str, list[Range]] = {}
    kind_fn = spec.kind_fn
    comments: list[tuple[int, int]] = []
    blocks: list[tuple[int, int]] = []
    query, first_trivia = _query(spec.name)
    for pattern, caps in QueryCursor(query).matches(root):
        if pattern >= first_trivia:
            for node in caps.get(COMMENT_CAPTURE, ()):
                comments.append((node.start_byte, node.end_byte))
            for node in caps.get(BLOCK_CAPTURE, ()):
                blocks.append((node.start_byte, node.end_byte))
            continue
        found = _definition(caps, embeds)
        if found is None:
            continue
        kind, node = found
        if kind_fn is not None:
            renamed = kind_fn(kind, caps, src)
            if renamed is None:
                continue
            kind = renamed
        raw, name = _names(spec, kind, caps, node, src)
        sp, ep = node.start_point, node.end_point
        er = ep[0] if ep[1] > 0 or ep[0] == sp[0] else ep[0] - 1
        name_nodes = caps.get("name")
        span = (name_nodes[0].start_byte, name_nodes[0].end_byte) if name_nodes else None
        recs.append(
            _Rec(
                node.start_byte,
                node.end_byte,
                sp[0],
                er,
                kind,
                name,
                raw,
                order_base + pattern,
                span,
            )
        )
    for lang, rs in embeds.items():
        sub = SPECS.get(lang)
        if sub is not None and rs:
            rs.sort(key=lambda r: r.start_byte)
            _collect(sub, src, _disjoint(rs), recs, problems, order_base + 1000)
    return Trivia(comments, blocks)


def _definition(caps: Captures, embeds: dict[str, list[Range]]) -> tuple[str, Node] | None:
    """The kind and node of the definition a match captured; None for a match that
    marks an embedded region (added to ``embeds``) or captured nothing to outline."""
    for key, nodes in caps.items():
        if key == "name" or key[0] == "_":
            continue
        if key.startswith("embed."):
            embeds.setdefault(key[6:], []).append(nodes[0].range)
            return None
        if key.startswith("region."):
            region = _element_content(nodes[0])
            if region is not None:
                embeds.setdefault(key[7:], []).append(region)
            return None
        return key, nodes[0]
    return None


def _names(spec: Spec, kind: str, caps: Captures, node: Node, src: bytes) -> tuple[str, str]:
    """(the name as written, the name shown) of a definition."""
    name_nodes = caps.get("name")
    raw = (
        src[name_nodes[0].start_byte : name_nodes[0].end_byte].decode("utf-8", "replace")
        if name_nodes
        else ""
    )
    name = raw
    if spec.name_fn is not None:
        name = spec.name_fn(kind, raw, caps, src)
    elif not name and kind == "import":
        name = src[node.start_byte : node.end_byte].decode("utf-8", "replace")
    if "\n" in name or "\t" in name or "  " in name:
        name = " ".join(name.split())
    if len(name) > MAX_NAME:
        name = name[:MAX_NAME]
    return raw, name


def _parse(spec: Spec, src: bytes, ranges: list[Range] | None) -> Node:
    """The syntax tree of ``src`` (of only ``ranges`` of it, when given)."""
    parser = _parser(spec.grammar)
    if ranges is None:
        return parser.parse(src).root_node
    parser.included_ranges = ranges
    try:
        return parser.parse(src).root_node
    finally:
        parser.included_ranges = []


def _disjoint(ranges: list[Range]) -> list[Range]:
    out: list[Range] = []
    for r in ranges:
        if r.end_byte <= r.start_byte:
            continue
        if out and r.start_byte < out[-1].end_byte:
            continue
        out.append(r)
    return out


def _element_content(node: Node) -> Range | None:
    """The range between an element's start tag and its end tag."""
    first = node.child(0)
    last = node.child(node.child_count - 1)
    if first is None or last is None or first.id == last.id or not last.type.startswith("end"):
        return None
    if last.start_byte <= first.end_byte:
        return None
    return Range(first.end_point, last.start_point, first.end_byte, last.start_byte)


def _find_word(text: str, word: str) -> int:
    """Index of ``word`` in ``text`` not inside a longer identifier, or -1."""
    at = text.find(word)
    while at >= 0:
        before = text[at - 1] if at > 0 else " "
        after_at = at + len(word)
        after = text[after_at] if after_at < len(text) else " "
        if not (before.isalnum() or before == "_") and not (after.isalnum() or after == "_"):
            return at
        at = text.find(word, at + 1)
    return -1


def _signature(line: str, raw: str, kind: str) -> str:
    if kind in _NO_SIGNATURE:
        return ""
    text = line.strip()
    if not text:
        return ""
    at = _find_word(text, raw) if raw else -1
    rest = text[at + len(raw) :] if at >= 0 else text
    rest = rest.strip()
    trailers = (*_TRAILERS, kind)
    # Strip trailers until none is left at the end (most lines end in none, or in one).
    while rest and rest.endswith(trailers):
        for trailer in trailers:
            if rest.endswith(trailer):
                rest = rest[: -len(trailer)].rstrip()
    if not rest:
        return ""
    text = text.replace("\t", " ")
    return text[:MAX_SIGNATURE]


def outline(language: str, data: bytes) -> Outline:
    """Symbols of ``data`` parsed as ``language`` (a key of ``SPECS``)."""
    spec = SPECS[language]
    recs: list[_Rec] = []
    problems: list[str] = []
    trivia = _collect(spec, data, None, recs, problems, 0)
    recs.sort(key=lambda r: (r.sb, -r.eb, r.order))
    lines = data.split(b"\n")
    # each symbol's fields but its digest, and its byte range and name's
    fields: list[tuple[str, str, int, int, int, str, str]] = []
    spans: list[Span] = []
    stack: list[tuple[int, _Rec]] = []  # (end byte, record) of open parents
    last_range = (-1, -1)  # byte range of the previous record, and the names seen on it
    last_names: set[str] = set()
    qualified = spec.qualified_kinds
    method_parents = spec.method_parents
    for rec in recs:
        if last_range == (rec.sb, rec.eb):
            if rec.name in last_names:
                continue  # the same node matched again by a later, less specific pattern
        else:
            last_range = (rec.sb, rec.eb)
            last_names = set()
        last_names.add(rec.name)
        while stack and (
            stack[-1][0] <= rec.sb or (stack[-1][1].sb == rec.sb and stack[-1][0] == rec.eb)
        ):
            stack.pop()  # ended before this record, or the same node (`const a = 1, b = 2`)
        parent = stack[-1][1] if stack else None
        kind = rec.kind
        name = rec.name
        if parent is not None:
            if kind == "function" and parent.kind in method_parents:
                kind = "method"
            if (
                kind in qualified
                and parent.kind in qualified
                and not name.startswith(parent.name + ".")
            ):
                name = f"{parent.name}.{name}"
                rec.name = name
        line = lines[rec.sr].decode("utf-8", "replace") if rec.sr < len(lines) else ""
        fields.append(
            (
                kind,
                name,
                rec.sr + 1,
                rec.er + 1,
                len(stack),
                parent.name if parent is not None else "",
                _signature(line, rec.raw, kind),
            )
        )
        spans.append((rec.sb, rec.eb, rec.span))
        if kind not in _LEAF_KINDS:
            rec.kind = kind
            stack.append((rec.eb, rec))
    coverage = "complete" if not problems else "partial: " + "; ".join(problems[:2])
    symbol_digests, file_digest = digests(data, trivia, spans)
    symbols = [Symbol(*f, d) for f, d in zip(fields, symbol_digests, strict=True)]
    return Outline(language, coverage, symbols, file_digest)


def text_digest(language: str, data: bytes) -> str:
    """The whole-file digest of ``data`` parsed as ``language`` (a key of ``SPECS``)."""
    return outline(language, data).digest


__all__ = [
    "MAX_BYTES",
    "Outline",
    "Skipped",
    "Symbol",
    "check_content",
    "outline",
    "text_digest",
]
