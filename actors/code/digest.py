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
was made from; the comments and blocks come from the outline's own query (its
trivia patterns, see `trivia_patterns`), so no second walk of the tree. Each
file is normalised once (`digests`): its text, with the comments cut out, the
block markers put in and a sentinel byte at every symbol's and name's start
and end, goes through a few whole-text passes in C (``split``, two regular
expressions, ``replace``); each symbol's digest then hashes a slice of that
one normalised text, with its name's slice replaced by the placeholder. Which
block markers a slice holds is settled by where the sentinels sit among them
(see `_events`), so a slice is exactly what `normal` makes of the symbol's
text on its own; `normal` remains the reference, and the path for the rare
file that the sentinels cannot describe (a sentinel or gap-mark byte in the
text, a symbol starting inside a comment, an empty block).
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import itertools
import operator
import re

from tree_sitter import Language

# Grammar node kinds whose name says "comment" but that are code.
_NOT_COMMENTS = frozenset({"comment_statement", "keyword_comment", "comment_directive"})
# Languages whose indentation is structure: node kinds that open an indented block.
_BLOCKS = {"python": ("block",)}
# Capture names of the trivia patterns (a leading "_": not an outline definition).
COMMENT_CAPTURE = "_trivia.comment"
BLOCK_CAPTURE = "_trivia.block"

_WORD = rb"[A-Za-z0-9_\x80-\xff]"
_WORD_GAP = re.compile(rb"(?<=" + _WORD + rb")\s+(?=" + _WORD + rb")")
_SPACE = re.compile(rb"\s+")
NAME_MARK = b"\x00"  # where the symbol's own name was
_GAP_MARK = b"\x01"  # whitespace between two word characters
_GAP = _GAP_MARK[0]

# A byte that valid UTF-8 never holds, so it cannot be the text's own: marks the
# places `digests` slices the normalised text at. It counts as neither word nor
# space: a space next to it is kept or dropped as if it were not there.
_SENTINEL = b"\xff"
# In a text of single spaces: a space followed (past any sentinels) by a space, a
# non-word character or the end. On the reversed text, preceded by them.
_LONE_SPACE = re.compile(rb" (?=\xff*+(?:[^A-Za-z0-9_\x80-\xff]|\Z))")

_LAST = 1 << 62  # sorts after any byte offset
# (start, end) byte ranges, sorted by start.
Ranges = list[tuple[int, int]]
# A symbol to digest: its byte range and that of its name node, if any.
Span = tuple[int, int, tuple[int, int] | None]


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
def trivia_patterns(spec_name: str, language: Language) -> str:
    """Query patterns capturing a language's comments and indented blocks, to append
    to its outline query (captured as `COMMENT_CAPTURE` and `BLOCK_CAPTURE`)."""
    patterns = [f"({kind}) @{COMMENT_CAPTURE}" for kind in _comment_kinds(language)]
    patterns += [f"({kind}) @{BLOCK_CAPTURE}" for kind in _BLOCKS.get(spec_name, ())]
    return "\n".join(patterns)


class Trivia:
    """The comment ranges (merged, sorted) and block ranges (sorted) of one parsed file."""

    __slots__ = ("blocks", "cut_starts", "cuts")

    def __init__(self, comments: Ranges, blocks: Ranges) -> None:
        comments.sort()
        merged: Ranges = []
        for start, end in comments:
            if merged and start <= merged[-1][1]:
                if end > merged[-1][1]:
                    merged[-1] = (merged[-1][0], end)
            else:
                merged.append((start, end))
        self.cuts = merged
        self.cut_starts = [c[0] for c in merged]
        blocks.sort()
        self.blocks = blocks


def normal(src: bytes, start: int, end: int, trivia: Trivia, name: tuple[int, int] | None) -> bytes:  # noqa: C901
    """The text of ``src[start:end]`` as digested (see the module docstring): the
    reference definition, one symbol at a time."""
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


def _hex(text: bytes | memoryview) -> str:
    return hashlib.blake2b(text, digest_size=16).hexdigest()


def digest(src: bytes, start: int, end: int, trivia: Trivia, name: tuple[int, int] | None) -> str:
    """The digest of ``src[start:end]``: 32 hex characters."""
    return _hex(normal(src, start, end, trivia, name))


class _Unsliceable(Exception):
    """The sentinels cannot describe this file; digest it one symbol at a time."""


# Event kinds, in their order at one byte offset (after the key that orders the
# ends among themselves): what ends there, block starts, what starts there, comments.
_END, _OPEN, _BEGIN, _CUT = 0, 1, 2, 3


def _events(src: bytes, trivia: Trivia, spans: list[Span]) -> tuple[bytes, list[int]]:
    """``src`` with its comments cut (one space each), its block markers in, and a
    sentinel at each start and end of the spans' ranges and names; and what each
    sentinel stands for, in text order: ``4 * i + k`` for span ``i``, k = 0 its
    start, 1 its end, 2 and 3 its name's start and end (none when it has no name).

    Which markers a span's slice holds follows `normal`: a block's ``{`` and
    ``}`` only when the block starts after the span's start and ends by its end.
    At one offset, ends come first, innermost first (by start, descending), a
    sentinel before a ``}`` of a block that starts where its span does; then
    block starts (``{``), then sentinels of what starts there; then a comment."""
    # (offset, kind, order among ends, sequence, offset after it, what it puts there)
    Event = tuple[int, int, int, int, int, bytes]
    named = [
        (i, start, end, name)
        for i, (start, end, name) in enumerate(spans)
        if name is not None and start <= name[0] < name[1] <= end
    ]
    blocks = trivia.blocks
    if any(be <= bs for bs, be in blocks):
        raise _Unsliceable
    events: list[Event] = [
        *[(start, _BEGIN, 0, 4 * i, start, _SENTINEL) for i, (start, _, _) in enumerate(spans)],
        *[
            (end, _END, -start, 4 * i + 1, end, _SENTINEL)
            for i, (start, end, _) in enumerate(spans)
        ],
        *[(name[0], _BEGIN, 0, 4 * i + 2, name[0], _SENTINEL) for i, _, _, name in named],
        *[(name[1], _END, -name[0], 4 * i + 3, name[1], _SENTINEL) for i, _, _, name in named],
        *[(bs, _OPEN, 0, 0, bs, b"{") for bs, _ in blocks],
        # after the sentinel of a span starting at bs
        *[(be, _END, -bs, _LAST, be, b"}") for bs, be in blocks],
        *[(cs, _CUT, 0, 0, ce, b" ") for cs, ce in trivia.cuts],
    ]
    events.sort()
    ats, _, _, seqs, resumes, inserts = zip(*events, strict=True)
    froms = (0, *resumes)
    tos = (*ats, len(src))
    if any(map(operator.gt, froms, tos)):
        raise _Unsliceable  # something starts or ends inside a comment
    pieces = list(map(src.__getitem__, map(slice, froms, tos)))
    last = pieces.pop()
    text = b"".join(itertools.chain.from_iterable(zip(pieces, inserts, strict=True))) + last
    return text, [seq for seq, put in zip(seqs, inserts, strict=True) if put is _SENTINEL]


def _normalise(text: bytes) -> bytes:
    """What `normal` does to whitespace, on a text with sentinels in it: each run of
    whitespace between two word characters (sentinels skipped) becomes one gap
    mark, any other whitespace goes. Where a run meets a sentinel, its gap mark may
    land on either side of the sentinel (`digests` drops it at a slice's ends)."""
    text = b" ".join(text.split())
    text = _LONE_SPACE.sub(b"", text)
    text = _LONE_SPACE.sub(b"", text[::-1])[::-1]
    return text.replace(b" ", _GAP_MARK)


def digests(src: bytes, trivia: Trivia, spans: list[Span]) -> tuple[list[str], str]:
    """The digest of each span's text with its name (see `digest`), and the file's."""
    whole: Span = (0, len(src), None)
    try:
        if _SENTINEL in src or _GAP_MARK in src:
            raise _Unsliceable  # a gap mark of the text's own would pass for one of ours
        text, order = _events(src, trivia, [*spans, whole])
    except _Unsliceable:
        return (
            [digest(src, start, end, trivia, name) for start, end, name in spans],
            digest(src, 0, len(src), trivia, None),
        )
    pieces = _normalise(text).split(_SENTINEL)
    out = memoryview(b"".join(pieces))
    # where each sentinel is in `out`, by what it stands for (-1: a name there is not)
    at = [-1] * (4 * len(spans) + 4)
    for seq, offset in zip(order, itertools.accumulate(map(len, pieces[:-1])), strict=True):
        at[seq] = offset
    found: list[str] = []
    places = iter(at)
    # A gap mark at an end of a slice goes: the word beyond it is not in the slice.
    for start, end, name_start, name_end in zip(places, places, places, places, strict=True):
        if start < end and out[start] == _GAP:
            start += 1
        if start < end and out[end - 1] == _GAP:
            end -= 1
        if name_start < 0:
            found.append(_hex(out[start:end]))
            continue
        if start < name_start and out[name_start - 1] == _GAP:
            name_start -= 1
        if name_end < end and out[name_end] == _GAP:
            name_end += 1
        h = hashlib.blake2b(out[start:name_start], digest_size=16)
        h.update(NAME_MARK)
        h.update(out[name_end:end])
        found.append(h.hexdigest())
    file_digest = found.pop()
    return found, file_digest
