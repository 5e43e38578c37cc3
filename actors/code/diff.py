"""``code_diff``: the symbols added, removed or modified between two revisions.

Like a pull request, the merge base of ``base`` and ``head`` is compared with
``head``. Both versions of each changed file are read with ``git cat-file``
and outlined in memory by the parser pool; the index is neither read nor
written.

A symbol is identified by its kind, its name, its ancestors' names and its
occurrence among symbols sharing those; it is modified when its signature or
its own text changed. Its own text is its lines minus those of its nested
symbols, plus the comment and attribute lines directly above it, compared
after dropping blank lines, repeated spaces inside a line and the ``,`` and
``;`` that separate nested symbols and members wherever they sit
(indentation counts): lines holding only separators, and in the languages
where a ``,`` or ``;`` at the start or end of a line only separates items or
ends a statement (`SEPARATED`), those at the start and end of every line.
So a trailing ``,`` added after a JavaScript object method or a Rust struct's
last field, or a ``},`` turned into ``}`` and a leading ``,`` on the next
line, changes no symbol. Python (a trailing ``,`` makes a tuple), Racket (a
leading ``,`` unquotes) and Elixir and the templates (text) keep theirs.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import trio

from ...protocol.errors import BadArgument, LimitExceeded, NotFound
from ...protocol.plural import plural
from ...supervisors.git import GitError, git
from .checkout import has_control, show_path
from .files import Unsafe, read_file
from .languages import language_for
from .pool import ParserPool
from .symbols import MAX_BYTES, Outline, Symbol
from .wire import ParseJob

_REGULAR = ("100644", "100755")
_COMMENT_PREFIXES = ("#", "//", "/*", "*", "--", ";", "@", "%", "<!--", '"""', "'''")
_TEMPLATE_USAGES = ("component", "slot")
_STATUS_WORDS = {"A": "added", "C": "added", "D": "deleted", "M": "modified"}

# A symbol's identity in one file: (kind, name, ancestors' names, occurrence among those).
Identity = tuple[str, str, tuple[str, ...], int]

MAX_REVISION = 256


def _check_revision(rev: str) -> None:
    """Refuse a caller's revision git could read as an option, or an absurd one."""
    if rev.startswith("-"):
        raise BadArgument(
            f"revision {rev!r} starts with '-'; refused (give a branch, tag or commit)"
        )
    if any(ord(c) < 32 or ord(c) == 127 for c in rev):
        raise BadArgument("revision contains a control character; refused")
    if len(rev) > MAX_REVISION:
        raise LimitExceeded(f"revision is longer than {MAX_REVISION} characters; refused")


async def _resolve(root: Path, rev: str) -> str:
    return await _git_sha(
        root,
        ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"],
        f"unknown revision {rev!r} in {root}",
    )


async def _git_sha(root: Path, args: list[str], missing: str) -> str:
    """The commit sha git prints for ``args``; `NotFound` saying ``missing`` when none."""
    try:
        out = await git(args, root)
    except GitError:
        raise NotFound(missing) from None
    sha = out.decode("ascii", "replace").strip()
    if not _is_sha(sha):
        raise NotFound(missing)
    return sha


def _is_sha(text: str) -> bool:
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)


@dataclass(frozen=True, slots=True)
class _Change:
    """One file of ``git diff --raw``: its status letter, modes, blob shas and paths."""

    status: str
    old_mode: str
    new_mode: str
    old_sha: str
    new_sha: str
    old_path: str
    path: str

    @property
    def has_old(self) -> bool:
        """The file existed at the merge base (it was not added or copied)."""
        return self.status not in "AC"

    @property
    def has_new(self) -> bool:
        """The file exists at head (it was not deleted)."""
        return self.status != "D"


# One changed file planned for comparison: the change and the language to parse it as.
Plan = tuple[_Change, str]


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


# Languages where a `,` or `;` at the start or end of a line separates list items,
# fields, members or arguments, or ends a statement: never what a symbol means.
SEPARATED = frozenset(
    {
        "bash",
        "c",
        "cpp",
        "csharp",
        "css",
        "go",
        "java",
        "javascript",
        "kotlin",
        "lua",
        "php",
        "ruby",
        "rust",
        "scala",
        "scss",
        "sql",
        "swift",
        "tsx",
        "typescript",
        "zig",
    }
)
_SEPARATORS = ",;"
_EDGE = _SEPARATORS + " \t"


def _normalize(line: str, separated: bool) -> str:
    """``line`` as compared: "" if blank or separators only, else its indentation and its
    words one space apart; ``separated``: without the separators it starts or ends with."""
    stripped = line.rstrip()
    body = stripped.lstrip()
    indent = stripped[: len(stripped) - len(body)]
    if separated:
        body = body.strip(_EDGE)
    if not body.strip(_EDGE):
        return ""
    return indent + " ".join(body.split())


def _identities(outline: Outline, text: str) -> dict[Identity, tuple[Symbol, str]]:
    """Symbol identity -> (symbol, digest of its signature and own text)."""
    symbols = [s for s in outline.symbols if not (s.kind in _TEMPLATE_USAGES and s.depth > 0)]
    separated = outline.language in SEPARATED
    lines = text.split("\n")
    heads = _heads(symbols, lines)
    out: dict[Identity, tuple[Symbol, str]] = {}
    counts: Counter[tuple[str, str, tuple[str, ...]]] = Counter()
    chain: list[str] = []
    for index, sym in enumerate(symbols):
        del chain[sym.depth :]
        base = (sym.kind, sym.name, tuple(chain))
        occurrence = counts[base]
        counts[base] += 1
        own = _own_lines(symbols, heads, index)
        out[(*base, occurrence)] = (sym, _digest(sym.signature, own, lines, separated))
        chain.append(sym.name)
    return out


def _heads(symbols: list[Symbol], lines: list[str]) -> list[int]:
    """The first line of each symbol, including the comment and attribute lines directly above it."""
    heads = []
    for sym in symbols:
        above = sym.start - 1
        while above >= 1 and lines[above - 1].strip().startswith(_COMMENT_PREFIXES):
            above -= 1
        heads.append(above + 1)
    return heads


def _own_lines(symbols: list[Symbol], heads: list[int], index: int) -> set[int]:
    """The lines of ``symbols[index]`` and its comments minus its direct children's
    (which hold their own children)."""
    sym = symbols[index]
    own = set(range(heads[index], sym.end + 1))
    for offset, child in enumerate(symbols[index + 1 :], start=index + 1):
        if child.depth <= sym.depth:
            break
        if child.depth == sym.depth + 1:
            own.difference_update(range(max(heads[offset], sym.start + 1), child.end + 1))
    own.add(sym.start)
    return own


def _digest(signature: str, own: set[int], lines: list[str], separated: bool) -> str:
    """Digest of a signature and of the normalized text of the line numbers ``own``
    (``separated``: see `SEPARATED`)."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(" ".join((signature.strip(_EDGE) if separated else signature).split()).encode())
    for number in sorted(own):
        if 1 <= number <= len(lines):
            norm = _normalize(lines[number - 1], separated)
            if norm:
                digest.update(norm.encode("utf-8", "surrogateescape") + b"\n")
    return digest.hexdigest()


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
    """The ``code_diff`` text: the symbols changed between the merge base of ``base``
    and ``head``, and ``head``, for the first ``limit`` changed files.

    Error handling: `BadArgument` or `LimitExceeded` for a refused revision,
    `NotFound` for an unknown one or when the two have no merge base.
    """
    _check_revision(base)
    _check_revision(head)
    base_sha = await _resolve(root, base)
    head_sha = await _resolve(root, head)
    merge_base = await _merge_base(root, base, head, base_sha, head_sha)
    changes = await _changed_files(root, merge_base, head_sha)
    shown = changes[:limit]
    plans, skipped = _plan(shown)
    blobs = await _blobs(root, _wanted(plans))
    results = await _compare_files(pool, plans, blobs)
    lines = [f"merge base {merge_base[:12]} head {head_sha[:12]}"]
    for index in range(len(plans)):
        for line in results.get(index, ()):
            (skipped if line.startswith("skipped (") else lines).append(line)
    lines.extend(skipped)
    if len(changes) > len(shown):
        lines.append(f"{len(shown)} of {plural(len(changes), 'changed file')}")
    return "\n".join(lines)


async def _merge_base(root: Path, base: str, head: str, base_sha: str, head_sha: str) -> str:
    return await _git_sha(
        root,
        ["merge-base", "--end-of-options", base_sha, head_sha],
        f"{base!r} and {head!r} have no merge base",
    )


async def _changed_files(root: Path, merge_base: str, head_sha: str) -> list[_Change]:
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
    return _parse_raw(raw)


def _plan(changes: list[_Change]) -> tuple[list[Plan | None], list[str]]:
    """Per change, what to compare (None when skipped), and the skipped files' lines."""
    plans: list[Plan | None] = []
    skipped: list[str] = []
    for change in changes:
        language = language_for(change.path)
        reason = _skip_reason(change, language)
        if reason is not None or language is None:
            skipped.append(f"skipped ({reason}): {show_path(change.path)}")
            plans.append(None)
        else:
            plans.append((change, language))
    return plans, skipped


def _skip_reason(change: _Change, language: str | None) -> str | None:
    """Why a changed file is not compared, or None."""
    if _not_utf8(change.path) or _not_utf8(change.old_path):
        return "path not UTF-8"
    if language is None:
        return "unsupported file type"
    if change.status == "T":
        return "type changed"
    if change.has_new and change.new_mode not in _REGULAR:
        return "symlink" if change.new_mode == "120000" else "not a regular file"
    if change.has_old and change.old_mode not in _REGULAR:
        return "type changed"
    return None


def _wanted(plans: list[Plan | None]) -> list[str]:
    """The blobs the planned comparisons read, sorted."""
    wanted: set[str] = set()
    for plan in plans:
        if plan is not None:
            change = plan[0]
            if change.has_old:
                wanted.add(change.old_sha)
            if change.has_new:
                wanted.add(change.new_sha)
    return sorted(wanted)


async def _compare_files(
    pool: ParserPool, plans: list[Plan | None], blobs: dict[str, bytes | int]
) -> dict[int, list[str]]:
    """The lines of each planned file, by its index in ``plans``; a few files at a
    time per parser worker."""
    results: dict[int, list[str]] = {}
    limiter = trio.CapacityLimiter(max(1, 2 * pool.workers))

    async def one(index: int, change: _Change, language: str) -> None:
        async with limiter:
            results[index] = await _file_diff(pool, change, language, blobs)

    async with trio.open_nursery() as nursery:
        for index, plan in enumerate(plans):
            if plan is not None:
                nursery.start_soon(one, index, *plan)
    return results


async def _file_diff(
    pool: ParserPool, change: _Change, language: str, blobs: dict[str, bytes | int]
) -> list[str]:
    """The lines of one changed file: its head line and its symbol lines, or one
    ``skipped (...)`` line."""
    old_data = blobs.get(change.old_sha) if change.has_old else None
    new_data = blobs.get(change.new_sha) if change.has_new else None
    if (change.has_old and old_data is None) or (change.has_new and new_data is None):
        # e.g. a partial clone: missing objects are never fetched
        return [f"skipped (object missing): {show_path(change.path)}"]
    outlines: list[Outline | None] = []
    for data, path in ((old_data, change.old_path), (new_data, change.path)):
        if data is None:
            outlines.append(None)
            continue
        if isinstance(data, int):
            return [f"skipped (larger than 1 MiB): {show_path(change.path)}"]
        result = await pool.parse(ParseJob(path, language, data))
        if result.outline is None:
            return [f"skipped ({result.skipped}): {show_path(change.path)}"]
        outlines.append(result.outline)
    old, new = outlines
    head_line = _file_line(change, new if new is not None else old)
    return [head_line, *compare(old, _text(old_data), new, _text(new_data))]


def _file_line(change: _Change, shown: Outline | None) -> str:
    """``path<TAB>status[<TAB>coverage]`` of one changed file."""
    status = _STATUS_WORDS.get(change.status, "modified")
    if change.status == "R":
        status = f"renamed from {show_path(change.old_path)}"
    line = f"{show_path(change.path)}\t{status}"
    if shown is not None and shown.coverage != "complete":
        line += f"\t{shown.coverage}"
    return line


def _text(data: bytes | int | None) -> str:
    return data.decode("utf-8", "surrogateescape") if isinstance(data, bytes) else ""


def _not_utf8(path: str) -> bool:
    try:
        path.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


async def file_change_diff(pool: ParserPool, root: Path, commit: str, path: str, limit: int) -> str:  # noqa: C901
    """The symbol changes of one file ``path`` from ``commit`` to the working tree:
    the ``code_diff`` file line and up to ``limit`` ``+``/``-``/``~`` lines (then a
    ``<n> of <total> changed symbols`` line), "" when no symbol changed, a
    ``skipped (<reason>): <path>`` line when a side cannot be compared, or a line
    saying the commit is not in the repository.

    The file in the working tree is read like the index reads it (no symlink is
    followed); the one at ``commit`` with ``git cat-file``.

    Error handling: `BadArgument` for a refused revision or a path that is not
    checkout-relative.
    """
    _check_revision(commit)
    parts = path.split("/")
    if not path or has_control(path) or path.startswith("/") or ".." in parts or "" in parts:
        raise BadArgument(f"path {path!r} is not a path relative to the checkout root")
    language = language_for(path)
    if language is None:
        return f"skipped (unsupported file type): {show_path(path)}"
    try:
        sha = await _resolve(root, commit)
    except NotFound:
        return f"commit {commit[:12]} is not in this repository; no diff"
    blobs: dict[str, bytes | int] = {}
    try:
        out = await git(
            ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{sha}:{path}"], root
        )
        blob = out.decode("ascii", "replace").strip()
        if _is_sha(blob):
            found = (await _blobs(root, [blob])).get(blob)
            if found is None:
                return f"skipped (object missing): {show_path(path)}"
            blobs["old"] = found
    except GitError:
        pass  # not in that commit: added since
    try:
        data, st = await trio.to_thread.run_sync(read_file, str(root), path, MAX_BYTES)
        blobs["new"] = data if data is not None else st.st_size
    except (FileNotFoundError, NotADirectoryError):
        pass  # deleted since
    except Unsafe as exc:
        return f"skipped ({exc}): {show_path(path)}"
    except OSError as exc:
        return f"skipped (cannot read: {exc.strerror or exc}): {show_path(path)}"
    if not blobs or blobs.get("old") == blobs.get("new"):
        return ""
    status = "M" if len(blobs) == 2 else ("A" if "new" in blobs else "D")
    change = _Change(status, "100644", "100644", "old", "new", path, path)
    lines = await _file_diff(pool, change, language, blobs)
    if lines and lines[0].startswith("skipped ("):
        return lines[0]
    symbols = lines[1:]
    if not symbols:
        return ""
    shown = symbols[:limit]
    tail = (
        [f"{len(shown)} of {plural(len(symbols), 'changed symbol')}"]
        if len(symbols) > len(shown)
        else []
    )
    return "\n".join([lines[0], *shown, *tail])
