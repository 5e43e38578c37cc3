"""Code anchors of memories: which code a memory describes, as that code was when written.

The interface every store backend implements (`sqlite.anchors`, `pg.anchors`): arguments and
results are msgspec Structs or plain values, never rows, cursors or SQL.

An anchor belongs to its memory: it is set (all of a memory's anchors at once, replacing
those it had), read with the memory, found by path or symbol among the memories of the
scopes a reader may see, and deleted with the memory. What a scope may see of anchors is
what it may see of memories: a repository's anchors are those of its memories.

`check_anchors` is the one definition of a valid anchor list, used by both backends'
`Anchors.set` and by ``memtrio import``: a value a tool call could not have stored is
refused, naming the anchor and the rule, before anything is written.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Protocol

import msgspec

from ....protocol.errors import BadArgument, LimitExceeded, NotFound


class Anchor(msgspec.Struct, frozen=True):
    """One code anchor of a memory: the code it describes, as it was when written."""

    path: str  # repository-relative POSIX path of the file
    symbol: str  # qualified name as the code index names it ("RetryPolicy.backoff"); "" = the whole file
    kind: str  # the symbol's kind in the code index ("function", "method", "class", ...); "file" for a whole file
    commit: str  # Git commit (HEAD sha) of the repository at write time; "" outside Git
    digest: (
        str  # hash of the code's text normalised for whitespace and comments (from the code part)
    )
    written_at: float  # when anchored (epoch seconds): the "since" of a status


MAX_ANCHORS = 16  # per memory
MAX_ANCHOR_PATH = 1024  # characters
MAX_ANCHOR_SYMBOL = 512  # characters
MAX_ANCHOR_KIND = 64  # characters
MAX_ANCHOR_COMMIT = 128  # hex digits (SHA-1: 40, SHA-256: 64)
MAX_ANCHOR_DIGEST = 128  # characters (printable ASCII)
MAX_ANCHOR_TIME = 253_402_300_799.0  # 9999-12-31 23:59:59 UTC, as the export's timestamps

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_COMMIT = re.compile(r"[0-9a-f]*")
_DIGEST = re.compile(r"[\x21-\x7e]*")  # printable ASCII, no space


def _text(value: str, where: str, field: str, limit: int) -> None:
    """A text field: within ``limit`` characters, UTF-8 encodable, no control characters."""
    if len(value) > limit:
        raise LimitExceeded(
            f"{where}: `{field}` is {len(value):,} characters; anchors allow at most {limit:,} "
            f"(anchor a shorter path or symbol, or the whole file)"
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise BadArgument(f"{where}: `{field}` is not valid Unicode (a lone surrogate)") from None
    if _CONTROL.search(value):
        raise BadArgument(
            f"{where}: `{field}` holds a control character (a NUL, newline or tab); "
            "give the name as the code index shows it"
        )


def storable(value: str, limit: int) -> bool:
    """Whether a stored anchor's path or symbol (of at most ``limit`` characters) could be
    ``value``: `Anchors.at` looks for no other (a NUL, a lone surrogate or an endless
    name can match nothing, and some would fail the statement)."""
    if len(value) > limit or _CONTROL.search(value):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def wanted(paths: Sequence[str], symbols: Sequence[str]) -> tuple[list[str], list[str]]:
    """The paths and symbols `Anchors.at` looks for: each once, sorted, only those an
    anchor could hold (`storable`; the whole file's symbol ``""`` is no symbol)."""
    return (
        sorted({p for p in paths if p and storable(p, MAX_ANCHOR_PATH)}),
        sorted({s for s in symbols if s and storable(s, MAX_ANCHOR_SYMBOL)}),
    )


def _path(path: str, where: str) -> None:
    """A repository-relative POSIX path: no way out of the checkout, nothing to normalise."""
    _text(path, where, "path", MAX_ANCHOR_PATH)
    if not path:
        raise BadArgument(
            f"{where}: `path` is empty; give the file's path relative to the repository root"
        )
    if path.startswith("/") or "\\" in path or re.match(r"[A-Za-z]:", path):
        raise BadArgument(
            f"{where}: `path` {path[:200]!r} is not a repository-relative POSIX path "
            "(no leading `/`, drive letter or backslash); give it relative to the repository root, "
            "e.g. `supervisors/config.py`"
        )
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise BadArgument(
            f"{where}: `path` {path[:200]!r} has an empty, `.` or `..` segment; give the file's "
            "normalised path relative to the repository root, e.g. `supervisors/config.py`"
        )


def check_anchor(anchor: Anchor, where: str) -> None:
    """One anchor's fields within the store's rules.

    Error handling: raises `BadArgument` or `LimitExceeded` naming ``where``, the field and
    the rule (what to give instead)."""
    _path(anchor.path, where)
    _text(anchor.symbol, where, "symbol", MAX_ANCHOR_SYMBOL)
    _text(anchor.kind, where, "kind", MAX_ANCHOR_KIND)
    if not anchor.kind:
        raise BadArgument(
            f"{where}: `kind` is empty; give the symbol's kind (`file` for a whole file)"
        )
    if len(anchor.commit) > MAX_ANCHOR_COMMIT or not _COMMIT.fullmatch(anchor.commit):
        raise BadArgument(
            f"{where}: `commit` must be a Git commit id of at most {MAX_ANCHOR_COMMIT} lowercase "
            "hex digits (or empty outside Git)"
        )
    if len(anchor.digest) > MAX_ANCHOR_DIGEST or not _DIGEST.fullmatch(anchor.digest):
        raise BadArgument(
            f"{where}: `digest` must be at most {MAX_ANCHOR_DIGEST} printable ASCII characters "
            "without spaces (the code index's digest of the symbol)"
        )
    if not (
        isinstance(anchor.written_at, (int, float))
        and math.isfinite(anchor.written_at)
        and 0.0 <= anchor.written_at <= MAX_ANCHOR_TIME
    ):
        raise BadArgument(
            f"{where}: `written_at` must be a time in epoch seconds between 0 and "
            f"{MAX_ANCHOR_TIME:.0f} (year 9999)"
        )


def check_anchors(anchors: Sequence[Anchor], where: str = "code") -> list[Anchor]:
    """The anchors a memory may hold, as they are stored: each checked (`check_anchor`), the
    same (path, symbol) given twice kept once (its first), at most `MAX_ANCHORS`.

    Error handling: raises `LimitExceeded` for too many anchors or too long a field,
    `BadArgument` for a malformed one; ``where`` (a tool argument, an import line) and the
    anchor's position (``where[2]``) name it."""
    out: list[Anchor] = []
    seen: set[tuple[str, str]] = set()
    for i, anchor in enumerate(anchors):
        check_anchor(anchor, f"{where}[{i}]")
        key = (anchor.path, anchor.symbol)
        if key not in seen:
            seen.add(key)
            out.append(anchor)
    if len(out) > MAX_ANCHORS:
        raise LimitExceeded(
            f"{where}: {len(out):,} code anchors; a memory holds at most {MAX_ANCHORS} "
            "(anchor the enclosing class or file instead of each of its members, or split the memory)"
        )
    return out


def no_memory(memory_id: int) -> NotFound:
    """The error of `Anchors.set` for a memory that does not exist."""
    return NotFound(
        f"memory {memory_id} does not exist (deleted?); anchors belong to a stored memory"
    )


class AnchorReads(Protocol):
    """What a read transaction may ask of `Anchors` (`ReadTx.anchors`): nothing that writes."""

    def of(self, memory_ids: Sequence[int]) -> dict[int, list[Anchor]]:
        """memory id -> its anchors, in the order they were set; ids without anchors (or
        without a memory) are absent. Any number of ids."""
        ...

    def at(
        self, paths: Sequence[str], symbols: Sequence[str], scope_ids: Sequence[int]
    ) -> list[int]:
        """Ids, ascending and each once, of the memories in any of ``scope_ids`` with an
        anchor whose path is in ``paths`` or whose symbol is in ``symbols`` (exact
        comparison, case and all; the symbol ``""`` of whole-file anchors matches nothing:
        a file is found by its path). A path or symbol no anchor could hold (`wanted`: a
        NUL, a lone surrogate, over the limits) matches nothing; it is never an error."""
        ...

    def anchored(self, scope_ids: Sequence[int], after: int, limit: int) -> list[int]:
        """Ids above ``after``, ascending, at most ``limit`` (none for ``limit`` <= 0), of
        the memories in any of ``scope_ids`` that have anchors: one page of `review_stale`
        (the next page starts after the last id)."""
        ...

    def count(self) -> int:
        """Every anchor row of the store (all memories, all scopes)."""
        ...


class Anchors(AnchorReads, Protocol):
    """Code anchors of memories, in one transaction of the store (`StoreTx.anchors`).

    Scope filtering (`at`, `anchored`) is strict: a memory is found when it is linked to
    one of ``scope_ids``; a memory of other scopes only, or of none, is never returned.
    """

    def set(self, memory_id: int, anchors: Sequence[Anchor]) -> None:
        """Replace all of the memory's anchors by ``anchors`` (none: the memory has none any
        more), in a write transaction. The list is checked first (`check_anchors`: limits,
        shapes; a repeated (path, symbol) kept once), so nothing is written on bad input.

        Error handling: `LimitExceeded` / `BadArgument` from `check_anchors`; `NotFound`
        when the memory does not exist."""
        ...
