"""Code digests: a hash of a symbol's (or a file's) text that ignores whitespace and comments.

A memory's code anchor stores the digest of the code it describes; the code is
``fresh`` while the digest at the same place is the same, ``moved`` when the
same digest turns up under another path or name. So the digest must not move
for edits that change nothing a reader of the code would call a change:

- comments are the grammar's own comment nodes (tree-sitter, per language:
  ``comment``, ``line_comment``, ``block_comment``, ...), never a guess from
  the text; each is cut out (it still separates the tokens around it);
- whitespace: a run of whitespace between two word characters counts as one
  space, any other whitespace not at all (``a+b`` equals ``a + b``, a call
  wrapped over several lines equals the one-line call); whitespace inside a
  string literal is treated the same way;
- Python's indentation is structure: each ``block`` adds a ``{`` and a ``}``,
  so re-indenting a statement into or out of a block changes the digest while
  re-wrapping a line does not;
- the symbol's own name (the node the outline names it by) is replaced by a
  placeholder, so a renamed symbol keeps its digest and is found as ``moved``.

Everything here runs in the parser worker processes, on the tree the outline
was made from: one extra query per file, then per symbol a few slices of its
text and two regular-expression passes (nested symbols are hashed with their
parent's text, so the work is the sum of the symbols' sizes).
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import re

from tree_sitter import Language, Node, Query, QueryCursor

# Grammar node kinds whose name says "comment" but that are code.
_NOT_COMMENTS = frozenset({"comment_statement", "keyword_comment", "comment_directive"})
# Languages whose indentation is structure: node kinds that open an indented block.
_BLOCKS = {"python": ("block",)}

_WORD = rb"[A-Za-z0-9_\x80-\xff]"
_WORD_GAP = re.compile(rb"(?<=" + _WORD + rb")\s+(?=" + _WORD + rb")")
_SPACE = re.compile(rb"\s+")
NAME_MARK = b"\x00"  # where the symbol's own name was
_GAP_MARK = b"\x01"  # whitespace between two word characters

_LAST = 1 << 62  # sorts after any byte offset
# (start, end) byte ranges, sorted by start.
Ranges = list[tuple[int, int]]


def _comment_kinds(language: Language) -> list[str]:
    kinds = set()
    for i in range(language.node_kind_count):
        kind = language.node_kind_for_id(i)
        if (
            kind
            and (kind == "comment" or kind.endswith("_comment"))
            and kind not in _NOT_COMMENTS
            and language.node_kind_is_named(i)
            and language.node_kind_is_visible(i)
        ):
            kinds.add(kind)
    return sorted(kinds)


@functools.cache
def trivia_query(spec_name: str, language: Language) -> Query | None:
    """One query capturing a language's comments (``@c``) and indented blocks (``@b``)."""
    patterns = [f"({kind}) @c" for kind in _comment_kinds(language)]
    patterns += [f"({kind}) @b" for kind in _BLOCKS.get(spec_name, ())]
    if not patterns:
        return None
    return Query(language, "\n".join(patterns))


class Trivia:
    """The comment ranges (merged, sorted) and block ranges of one parsed file."""

    __slots__ = ("blocks", "cut_starts", "cuts")

    def __init__(self, cuts: Ranges, blocks: Ranges) -> None:
        self.cuts = cuts
        self.cut_starts = [c[0] for c in cuts]
        self.blocks = blocks

    @classmethod
    def of(cls, query: Query | None, root: Node) -> Trivia:
        if query is None:
            return cls([], [])
        found = QueryCursor(query).captures(root)
        cuts = sorted((n.start_byte, n.end_byte) for n in found.get("c", ()))
        merged: Ranges = []
        for start, end in cuts:
            if merged and start <= merged[-1][1]:
                if end > merged[-1][1]:
                    merged[-1] = (merged[-1][0], end)
            else:
                merged.append((start, end))
        blocks = sorted((n.start_byte, n.end_byte) for n in found.get("b", ()))
        return cls(merged, blocks)


def normal(src: bytes, start: int, end: int, trivia: Trivia, name: tuple[int, int] | None) -> bytes:
    """The text of ``src[start:end]`` as digested (see the module docstring)."""
    # (position, order, end, replacement): order puts block ends before starts at one place.
    edits: list[tuple[int, int, int, bytes]] = []
    cuts = trivia.cuts
    at = bisect.bisect_left(trivia.cut_starts, start)
    if at > 0 and cuts[at - 1][1] > start:
        at -= 1  # a comment the range starts inside
    while at < len(cuts) and cuts[at][0] < end:
        cs, ce = cuts[at]
        edits.append((max(cs, start), 1, min(ce, end), b" "))
        at += 1
    blocks = trivia.blocks
    for index in range(bisect.bisect_right(blocks, (start, _LAST)), len(blocks)):
        bs, be = blocks[index]
        if bs >= end:
            break
        if be <= end:  # not an enclosing block that starts with this symbol
            edits.append((bs, 2, bs, b"{"))
            edits.append((be, 0, be, b"}"))
    if name is not None and start <= name[0] < name[1] <= end:
        edits.append((name[0], 1, name[1], NAME_MARK))
    if not edits:
        text = src[start:end]
    else:
        edits.sort()
        parts = []
        pos = start
        for at_pos, _, edit_end, replacement in edits:
            if at_pos < pos:
                if at_pos < edit_end <= pos:
                    continue  # a range inside one already cut
                at_pos = pos
            parts.append(src[pos:at_pos])
            parts.append(replacement)
            pos = max(pos, edit_end)
        parts.append(src[pos:end])
        text = b"".join(parts)
    return _SPACE.sub(b"", _WORD_GAP.sub(_GAP_MARK, text))


def digest(src: bytes, start: int, end: int, trivia: Trivia, name: tuple[int, int] | None) -> str:
    """The digest of ``src[start:end]``: 32 hex characters."""
    return hashlib.blake2b(normal(src, start, end, trivia, name), digest_size=16).hexdigest()


def file_digest(src: bytes, trivia: Trivia) -> str:
    return digest(src, 0, len(src), trivia, None)
