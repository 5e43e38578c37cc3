"""``code_diff``: the symbols added, removed or modified between two revisions.

Like a pull request, the merge base of ``base`` and ``head`` is compared with
``head``. Both versions of each changed file are read with ``git cat-file``
and outlined in memory by the parser pool; the index is neither read nor
written.

A symbol is identified by its kind, its name, its ancestors' names and its
occurrence among symbols sharing those; it is modified when its signature or
its own text changed. Its own text is its lines minus those of its nested
symbols, plus the comment and attribute lines directly above it, compared
after dropping blank lines, repeated spaces inside a line and lines holding
only the ``,`` or ``;`` that separate nested symbols (indentation counts).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

import trio

from ...protocol.tools import ToolError
from ...supervisors.git import GitError, git
from .checkout import show_path
from .extract import MAX_BYTES, Outline, Symbol
from .languages import language_for
from .pool import ParserPool
from .wire import ParseJob

_REGULAR = ("100644", "100755")
_COMMENT_PREFIXES = ("#", "//", "/*", "*", "--", ";", "@", "%", "<!--", '"""', "'''")
_TEMPLATE_USAGES = ("component", "slot")


MAX_REVISION = 256


def _check_revision(rev: str) -> None:
    """Refuse a caller's revision git could read as an option, or an absurd one."""
    if rev.startswith("-"):
        raise ToolError(f"revision {rev!r} starts with '-'; refused (give a branch, tag or commit)")
    if any(ord(c) < 32 or ord(c) == 127 for c in rev):
        raise ToolError("revision contains a control character; refused")
    if len(rev) > MAX_REVISION:
        raise ToolError(f"revision is longer than {MAX_REVISION} characters; refused")


async def _resolve(root: Path, rev: str) -> str:
    try:
        out = await git(
            ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"], root
        )
    except GitError:
        raise ToolError(f"unknown revision {rev!r} in {root}") from None
    sha = out.decode("ascii", "replace").strip()
    if not _is_sha(sha):
        raise ToolError(f"unknown revision {rev!r} in {root}")
    return sha


def _is_sha(text: str) -> bool:
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)


class _Change:
    __slots__ = ("status", "old_mode", "new_mode", "old_sha", "new_sha", "old_path", "path")

    def __init__(
        self,
        status: str,
        old_mode: str,
        new_mode: str,
        old_sha: str,
        new_sha: str,
        old_path: str,
        path: str,
    ) -> None:
        self.status, self.old_mode, self.new_mode = status, old_mode, new_mode
        self.old_sha, self.new_sha, self.old_path, self.path = old_sha, new_sha, old_path, path


def _parse_raw(out: bytes) -> list[_Change]:
    fields = out.split(b"\0")
    changes = []
    i = 0
    while i < len(fields) and fields[i].startswith(b":"):
        meta = fields[i][1:].decode().split()
        old_mode, new_mode, old_sha, new_sha, status = meta[:5]
        letter = status[0]
        if letter in "RC":
            old = fields[i + 1].decode("utf-8", "surrogateescape")
            new = fields[i + 2].decode("utf-8", "surrogateescape")
            i += 3
        else:
            new = old = fields[i + 1].decode("utf-8", "surrogateescape")
            i += 2
        changes.append(_Change(letter, old_mode, new_mode, old_sha, new_sha, old, new))
    return changes


async def _blobs(root: Path, shas: list[str]) -> dict[str, bytes | int]:
    """Blob contents by sha (or the size when larger than the parse limit).

    Sizes are asked first, so a huge blob is never read into memory.
    """
    if not shas:
        return {}
    blobs: dict[str, bytes | int] = {}
    small: list[str] = []
    out = await git(["cat-file", "--batch-check"], root, check=False, input=_lines(shas))
    for line in out.decode("ascii", "replace").splitlines():
        header = line.split()  # "<sha> blob <size>" or "<sha> missing"
        if len(header) == 3 and header[1] == "blob" and header[2].isdigit():
            if int(header[2]) <= MAX_BYTES:
                small.append(header[0])
            else:
                blobs[header[0]] = int(header[2])
    if not small:
        return blobs
    out = await git(["cat-file", "--batch"], root, check=False, input=_lines(small))
    pos = 0
    while pos < len(out):
        end = out.find(b"\n", pos)
        if end < 0:
            break
        header = out[pos:end].decode("ascii", "replace").split()
        pos = end + 1
        if len(header) < 3 or not header[2].isdigit():  # "<sha> missing"
            continue
        sha, size = header[0], int(header[2])
        if size <= MAX_BYTES and pos + size <= len(out):
            blobs[sha] = out[pos : pos + size]
        pos += size + 1
    return blobs


def _lines(shas: list[str]) -> bytes:
    return ("\n".join(shas) + "\n").encode()


def _normalize(line: str) -> str:
    stripped = line.rstrip()
    body = stripped.lstrip()
    if not body or body in (",", ";"):
        return ""
    indent = stripped[: len(stripped) - len(body)]
    return indent + " ".join(body.split())


def _identities(outline: Outline, text: str) -> dict[tuple, tuple[Symbol, str]]:
    """Symbol identity -> (symbol, digest of its signature and own text)."""
    symbols = [s for s in outline.symbols if not (s.kind in _TEMPLATE_USAGES and s.depth > 0)]
    lines = text.split("\n")
    # first line of each symbol including the comment and attribute lines directly above it
    heads = []
    for sym in symbols:
        above = sym.start - 1
        while above >= 1 and lines[above - 1].strip().startswith(_COMMENT_PREFIXES):
            above -= 1
        heads.append(above + 1)
    out: dict[tuple, tuple[Symbol, str]] = {}
    counts: Counter[tuple] = Counter()
    chain: list[str] = []
    for index, sym in enumerate(symbols):
        del chain[sym.depth :]
        ancestors = tuple(chain)
        base = (sym.kind, sym.name, ancestors)
        occurrence = counts[base]
        counts[base] += 1
        # own lines: the symbol's lines and comments minus its direct children's
        # (which hold their own children)
        own = set(range(heads[index], sym.end + 1))
        for offset, child in enumerate(symbols[index + 1 :], start=index + 1):
            if child.depth <= sym.depth:
                break
            if child.depth == sym.depth + 1:
                own.difference_update(range(max(heads[offset], sym.start + 1), child.end + 1))
        own.add(sym.start)
        digest = hashlib.blake2b(digest_size=16)
        digest.update(" ".join(sym.signature.split()).encode())
        for number in sorted(own):
            if 1 <= number <= len(lines):
                norm = _normalize(lines[number - 1])
                if norm:
                    digest.update(norm.encode("utf-8", "surrogateescape") + b"\n")
        out[(*base, occurrence)] = (sym, digest.hexdigest())
        chain.append(sym.name)
    return out


def _sym_line(sign: str, sym: Symbol, with_signature: bool) -> str:
    line = f"  {sign} {sym.start}-{sym.end}\t{sym.kind} {sym.name}"
    if with_signature and sym.signature:
        line += f"\t{sym.signature}"
    return line


def compare(old: Outline | None, old_text: str, new: Outline | None, new_text: str) -> list[str]:
    """The ``+``/``-``/``~`` lines between two outlines of one file."""
    # Component and slot usages inside a definition (a ~H sigil, or a top-level
    # component of a .heex file) are part of its text, not symbols of their own.
    before = _identities(old, old_text) if old is not None else {}
    after = _identities(new, new_text) if new is not None else {}
    entries: list[tuple[int, int, str]] = []
    for key, (sym, digest) in after.items():
        prior = before.get(key)
        if prior is None:
            entries.append((sym.start, 1, _sym_line("+", sym, True)))
        elif prior[1] != digest:
            entries.append((sym.start, 2, _sym_line("~", sym, True)))
    for key, (sym, _) in before.items():
        if key not in after:
            entries.append((sym.start, 0, _sym_line("-", sym, False)))
    entries.sort(key=lambda e: (e[0], e[1]))
    return [e[2] for e in entries]


async def structural_diff(pool: ParserPool, root: Path, base: str, head: str, limit: int) -> str:
    _check_revision(base)
    _check_revision(head)
    base_sha = await _resolve(root, base)
    head_sha = await _resolve(root, head)
    try:
        merge_base = (
            (await git(["merge-base", "--end-of-options", base_sha, head_sha], root))
            .decode("ascii", "replace")
            .strip()
        )
    except GitError:
        raise ToolError(f"{base!r} and {head!r} have no merge base") from None
    if not _is_sha(merge_base):
        raise ToolError(f"{base!r} and {head!r} have no merge base")
    raw = await git(
        [
            "diff",
            "--raw",
            "-z",
            "-M",
            "--no-abbrev",
            "--no-ext-diff",
            "--no-textconv",
            merge_base,
            head_sha,
            "--",
        ],
        root,
    )
    changes = _parse_raw(raw)
    total = len(changes)
    changes = changes[:limit]
    lines = [f"merge base {merge_base[:12]} head {head_sha[:12]}"]
    skipped: list[str] = []

    wanted: list[str] = []
    plans: list[tuple[_Change, str] | None] = []
    for change in changes:
        reason = None
        language = language_for(change.path)
        if _not_utf8(change.path) or _not_utf8(change.old_path):
            reason = "path not UTF-8"
        elif language is None:
            reason = "unsupported file type"
        elif change.status == "T":
            reason = "type changed"
        elif change.status != "D" and change.new_mode not in _REGULAR:
            reason = "symlink" if change.new_mode == "120000" else "not a regular file"
        elif change.status not in "AC" and change.old_mode not in _REGULAR:
            reason = "type changed"
        if reason is not None:
            skipped.append(f"skipped ({reason}): {show_path(change.path)}")
            plans.append(None)
            continue
        assert language is not None
        plans.append((change, language))
        if change.status not in "AC":
            wanted.append(change.old_sha)
        if change.status != "D":
            wanted.append(change.new_sha)
    blobs = await _blobs(root, sorted(set(wanted)))

    results: dict[int, list[str]] = {}

    async def one(index: int, change: _Change, language: str) -> None:
        old_data = blobs.get(change.old_sha) if change.status not in "AC" else None
        new_data = blobs.get(change.new_sha) if change.status != "D" else None
        if (change.status not in "AC" and old_data is None) or (
            change.status != "D" and new_data is None
        ):
            # e.g. a partial clone: missing objects are never fetched
            results[index] = [f"skipped (object missing): {show_path(change.path)}"]
            return
        outlines: list[Outline | None] = []
        for data, path in ((old_data, change.old_path), (new_data, change.path)):
            if data is None:
                outlines.append(None)
                continue
            if isinstance(data, int):
                results[index] = [f"skipped (larger than 1 MiB): {show_path(change.path)}"]
                return
            result = await pool.parse(ParseJob(path, language, data))
            if result.outline is None:
                results[index] = [f"skipped ({result.skipped}): {show_path(change.path)}"]
                return
            outlines.append(result.outline)
        old, new = outlines
        status = {"A": "added", "C": "added", "D": "deleted", "M": "modified"}.get(
            change.status, "modified"
        )
        if change.status == "R":
            status = f"renamed from {show_path(change.old_path)}"
        shown = new if new is not None else old
        head_line = f"{show_path(change.path)}\t{status}"
        if shown is not None and shown.coverage != "complete":
            head_line += f"\t{shown.coverage}"
        old_text = (
            old_data.decode("utf-8", "surrogateescape") if isinstance(old_data, bytes) else ""
        )
        new_text = (
            new_data.decode("utf-8", "surrogateescape") if isinstance(new_data, bytes) else ""
        )
        results[index] = [head_line, *compare(old, old_text, new, new_text)]

    limiter = trio.CapacityLimiter(max(1, 2 * pool.workers))

    async def limited(index: int, change: _Change, language: str) -> None:
        async with limiter:
            await one(index, change, language)

    async with trio.open_nursery() as nursery:
        for index, plan in enumerate(plans):
            if plan is not None:
                nursery.start_soon(limited, index, *plan)
    for index in range(len(plans)):
        for line in results.get(index, ()):
            (skipped if line.startswith("skipped (") else lines).append(line)
    lines.extend(skipped)
    if total > len(changes):
        lines.append(f"{len(changes)} of {total} changed files")
    return "\n".join(lines)


def _not_utf8(path: str) -> bool:
    try:
        path.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True
