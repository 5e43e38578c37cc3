"""Code anchors: the code a memory describes, and whether that code has changed.

A memory's anchor names a file of the session's checkout and, optionally, a
symbol in it (its qualified name as the code index has it:
``RetryPolicy.backoff``), with the digest of that code's text when the memory
was written (`digest`: whitespace, comments and the symbol's own name left
out). Against the checkout's current index an anchor is:

- ``fresh``: the same path and name hold code with the same digest;
- ``changed``: the same path and name hold code with another digest (or the
  file is still there but can no longer be indexed);
- ``moved``: the path and name are gone, and code with the same digest is
  found under another path or name (a rename, a move to another file or
  class), which `TargetState` names;
- ``deleted``: neither.

The index queries are by indexed columns (qualified name, digest, last name
segment), so a status check after a refresh reads a few rows per anchor and
re-parses nothing that did not change.

This module holds the data types, the text mining of `CodeService.find_targets`
and the decisions, as synchronous functions over a `CodeIndex` (run in the
service's database thread); `CodeService` holds the async methods.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable, Sequence

import msgspec

from ...protocol.errors import BadArgument
from .index import CodeIndex, PlaceRow
from .languages import language_for

FRESH, CHANGED, MOVED, DELETED = "fresh", "changed", "moved", "deleted"
FILE_KIND = "file"

# Bounds: an anchor list, and the text `find_targets` reads.
MAX_TARGETS = 16  # explicit anchors per memory (the store's MAX_ANCHORS)
MAX_PATH = 1024
MAX_SYMBOL = 512
MAX_TEXT = 20_000  # characters of a memory's text searched for names
MAX_CANDIDATES = 64  # distinct names looked up per text
MAX_NEAR = 200  # (path, symbol) pairs `near` returns
_ROWS = 50  # rows read per lookup (a name matching more is ambiguous anyway)


class CodeTarget(msgspec.Struct, frozen=True):
    """The code an anchor names, as it is now: symbol "" and kind "file" = the whole file."""

    path: str
    symbol: str
    kind: str
    digest: str


class TargetState(msgspec.Struct, frozen=True):
    status: str  # "fresh" | "changed" | "moved" | "deleted"
    path: str  # where the code is now (for "moved": its new path; else the anchor's own)
    symbol: str  # its name now (for "moved": the new name)


class AnchorError(BadArgument, ValueError):
    """An explicit anchor that names no code of the checkout; the message says which and what to do."""


def digest_text(language: str, text: bytes) -> str:
    """The digest of a whole file's ``text`` parsed as ``language`` (see `digest`).

    Parses in this process (tree-sitter is imported on first use): meant for
    tools and tests; the server's digests come from the parser workers.
    """
    from .extract import text_digest  # the grammars: not loaded by the server itself

    return text_digest(language, text)


# -- checking explicit anchors --------------------------------------------------


def check_wanted(wanted: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The explicit anchors without duplicates, after the size and character rules.

    Error handling: `AnchorError` naming the anchor and the rule.
    """
    if len(wanted) > MAX_TARGETS:
        raise AnchorError(
            f"too many code anchors ({len(wanted)}); at most {MAX_TARGETS} per memory"
        )
    out: list[tuple[str, str]] = []
    for number, (path, symbol) in enumerate(wanted, start=1):
        label = f"code anchor {number}"
        if not path:
            raise AnchorError(f"{label}: path is empty; give a file path relative to the checkout")
        if len(path) > MAX_PATH:
            raise AnchorError(f"{label}: path is longer than {MAX_PATH} characters")
        if len(symbol) > MAX_SYMBOL:
            raise AnchorError(f"{label}: symbol is longer than {MAX_SYMBOL} characters")
        if _has_control(path) or _has_control(symbol):
            raise AnchorError(f"{label}: path or symbol contains a control character")
        if (path, symbol) not in out:
            out.append((path, symbol))
    return out


def _has_control(text: str) -> bool:
    return any(ord(c) < 32 or ord(c) == 127 for c in text)


def pick_symbol(rows: list[PlaceRow], symbol: str, path: str) -> PlaceRow:
    """The one symbol of ``path`` an explicit anchor names: its exact qualified name,
    else the one whose qualified name ends with ``.symbol``.

    Error handling: `AnchorError` when none or several match.
    """
    exact = [r for r in rows if r[1] == symbol]
    if exact:
        return exact[0]  # same name twice (a property's getter and setter): the first
    tail = [r for r in rows if r[1].endswith("." + symbol)]
    names = sorted({r[1] for r in tail})
    if len(names) == 1:
        return tail[0]
    if names:
        shown = ", ".join(names[:5]) + (" ..." if len(names) > 5 else "")
        raise AnchorError(f"code anchor {path}:{symbol} is ambiguous ({shown}); give the full name")
    known = ", ".join(sorted({r[1] for r in rows})[:5])
    hint = f" (it has: {known} ...)" if known else " (it has no symbols)"
    raise AnchorError(
        f"code anchor {path}:{symbol}: no symbol {symbol!r} in {path}{hint}; give the name as"
        " code_outline shows it (Class.method), or anchor the whole file with no symbol"
    )


# -- statuses -----------------------------------------------------------------


def states_in_place(
    index: CodeIndex, cid: int, targets: Sequence[CodeTarget]
) -> list[TargetState | None]:
    """The status of each target that its own file decides: ``fresh`` or ``changed``
    (the file, or the name in it, is still there); None for one that is ``moved`` or
    ``deleted``, which the whole index decides (see `state_of`). Reads only the
    targets' own files' rows (two queries for all), so it needs only those files
    to be up to date."""
    files = index.file_states(cid, sorted({t.path for t in targets if not t.symbol}))
    places = index.places_at(cid, [(t.path, t.symbol) for t in targets if t.symbol])
    return [_in_place(t, files.get(t.path), places.get((t.path, t.symbol), [])) for t in targets]


def _in_place(
    target: CodeTarget, entry: tuple[str, str | None, str] | None, rows: list[PlaceRow]
) -> TargetState | None:
    if not target.symbol:
        if entry is None:
            return None
        _, skipped, digest = entry
        same = skipped is None and digest == target.digest
        return TargetState(FRESH if same else CHANGED, target.path, "")
    if not rows:
        return None
    same = any(r[3] == target.digest for r in rows)
    return TargetState(FRESH if same else CHANGED, target.path, target.symbol)


def state_of(index: CodeIndex, cid: int, target: CodeTarget) -> TargetState:
    """The status of one target against the index of checkout ``cid`` (refreshed)."""
    if not target.symbol:
        entry = index.file_state(cid, target.path)
        rows = []
    else:
        entry, rows = None, index.places(cid, target.path, target.symbol)
    state = _in_place(target, entry, rows)
    if state is not None:
        return state
    if not target.symbol:
        others = [p for p in index.files_with_digest(cid, target.digest, _ROWS) if p != target.path]
        if others and target.digest:
            return TargetState(MOVED, _closest_path(others, target.path), "")
        return TargetState(DELETED, target.path, "")
    found = [
        r
        for r in index.places_with_digest(cid, target.digest, _ROWS)
        if (r[0], r[1]) != (target.path, target.symbol)
    ]
    if found and target.digest:
        best = min(found, key=lambda r: _move_rank(r, target))
        return TargetState(MOVED, best[0], best[1])
    entry = index.file_state(cid, target.path)
    if entry is not None and entry[1] is not None:
        # the file is still there but no longer indexed (binary, too large...): not the same code
        return TargetState(CHANGED, target.path, target.symbol)
    return TargetState(DELETED, target.path, target.symbol)


def _last(qname: str) -> str:
    return qname.rsplit(".", 1)[-1]


def _move_rank(row: PlaceRow, target: CodeTarget) -> tuple[bool, bool, bool, bool, str, str]:
    """Sort key of the code a moved target most likely became: the same qualified
    name elsewhere (a file move), the same last name, the same file, the same kind."""
    path, qname, kind, _ = row
    return (
        qname != target.symbol,
        _last(qname) != _last(target.symbol),
        path != target.path,
        kind != target.kind,
        path,
        qname,
    )


def _closest_path(paths: list[str], old: str) -> str:
    """Of the files a moved file may now be, the one with its name, else the first."""
    base = posixpath.basename(old)
    same = [p for p in paths if posixpath.basename(p) == base]
    return (same or paths)[0]


# -- names in a memory's text ---------------------------------------------------

_BACKTICKED = re.compile(r"`([^`\n]{1,300})`")
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
# An identifier, maybe qualified with `.` or `::` (RetryPolicy.backoff, std::io::Read).
_QUALIFIED = re.compile(rf"(?<![\w./-]){_IDENT}(?:(?:\.|::){_IDENT})*(?![\w/-])")
# A path: segments with `/`, ending in a file name with an extension; maybe `:symbol`.
_PATHLIKE = re.compile(
    rf"(?<![\w./-])(?:[\w.-]+/)*[\w-][\w.-]*\.[A-Za-z0-9]{{1,10}}(?::{_IDENT}(?:\.{_IDENT})*)?(?![\w/])"
)
# A camelCase hump: a run of lowercase letters and digits followed by an uppercase
# letter, with a lowercase letter in the run or an uppercase one just before it
# (`RetryPolicy`, `getX`, `X2Y`). Only a run's first character may start a match (the
# look-behind) and the run is never backtracked into (`++`), so a word is read once:
# `[a-z][a-z0-9]*[A-Z]` searched anywhere read a run once per start, quadratic on a
# long word (20,000 letters: seconds holding the GIL).
_HUMP = re.compile(r"(?<![a-z0-9])[a-z0-9]++(?=[A-Z])")
_LOWER = re.compile(r"[a-z]")
_SNAKE = re.compile(r"[A-Za-z0-9]_[A-Za-z0-9]")
_DOTTED = re.compile(rf"{_IDENT}(?:(?:\.|::){_IDENT})*")


def candidates(text: str) -> list[tuple[str, str]]:
    """(kind, text) of the names in a memory's text that may name code: ``path``
    (a file name with an extension, maybe with ``:symbol``), or ``name`` (backticked,
    CamelCase, camelCase, snake_case or qualified ``a.b``). In order of appearance,
    without duplicates, at most `MAX_CANDIDATES`; only the first `MAX_TEXT`
    characters are read, in time linear in their number (each pattern reads the text
    once, and stops at its `MAX_CANDIDATES`-th distinct name: no later one can make
    the list)."""
    text = text[:MAX_TEXT]
    spans = [
        *_first(_BACKTICKED.finditer(text), _backticked),
        *_first(_PATHLIKE.finditer(text), _pathlike),
        *_first(_QUALIFIED.finditer(text), _qualified),
    ]
    spans.sort(key=lambda s: s[0])
    found: list[tuple[str, str]] = []
    for _, kind, value in spans:
        if (kind, value) not in found and len(found) < MAX_CANDIDATES:
            found.append((kind, value))
    return found


def _first(
    matches: Iterable[re.Match[str]], judge: Callable[[re.Match[str]], tuple[str, str] | None]
) -> list[tuple[int, str, str]]:
    """(start, kind, value) of the matches ``judge`` keeps, up to the `MAX_CANDIDATES`-th
    distinct (kind, value); a match with the text of one already judged is skipped."""
    out: list[tuple[int, str, str]] = []
    judged: set[str] = set()
    keys: set[tuple[str, str]] = set()
    for match in matches:
        raw = match.group(0)
        if raw in judged:
            continue
        judged.add(raw)
        key = judge(match)
        if key is None:
            continue
        out.append((match.start(), *key))
        keys.add(key)
        if len(keys) >= MAX_CANDIDATES:
            break
    return out


def _backticked(match: re.Match[str]) -> tuple[str, str] | None:
    inner = match.group(1).strip().removesuffix("()").rstrip(".,;:")
    if not inner:
        return None
    if _looks_like_path(inner):
        return "path", inner
    if _DOTTED.fullmatch(inner):
        return "name", inner.replace("::", ".")
    return None


def _pathlike(match: re.Match[str]) -> tuple[str, str] | None:
    return ("path", match.group(0)) if _looks_like_path(match.group(0)) else None


def _qualified(match: re.Match[str]) -> tuple[str, str] | None:
    word = match.group(0)
    if "." in word or "::" in word or _camel(word) or _SNAKE.search(word):
        return "name", word.replace("::", ".")
    return None


def _camel(word: str) -> bool:
    """Whether ``word`` is camelCase or CamelCase (`_HUMP`), in time linear in its length."""
    for hump in _HUMP.finditer(word):
        start = hump.start()
        if _LOWER.search(hump.group()) or (start > 0 and "A" <= word[start - 1] <= "Z"):
            return True
    return False


def _looks_like_path(text: str) -> bool:
    """A file path (``a/b.py``, ``b.py``, ``a/b.py:Sym``) of a supported language."""
    path = text.split(":", 1)[0] if ":" in text and not text.startswith("/") else text
    return (
        " " not in path
        and language_for(path) is not None
        and bool(re.search(r"[A-Za-z]", posixpath.basename(path).rsplit(".", 1)[0]))
    )


def split_path(text: str) -> tuple[str, str]:
    """``a/b.py:Sym`` -> (``a/b.py``, ``Sym``); a plain path -> (path, "")."""
    path, sep, symbol = text.partition(":")
    if sep and re.fullmatch(rf"{_IDENT}(?:\.{_IDENT})*", symbol):
        return path.removeprefix("./"), symbol
    return text.removeprefix("./"), ""


def module_of(path: str) -> str:
    """The dotted module a file would be imported as from its checkout root
    (``a/b/c.py`` -> ``a.b.c``, ``a/b/__init__.py`` -> ``a.b``)."""
    stem = path.rsplit(".", 1)[0]
    if stem.endswith("/__init__"):
        stem = stem[: -len("/__init__")]
    return stem.replace("/", ".")


def _segment_suffix(long: str, short: str) -> bool:
    return long == short or long.endswith("." + short)


def name_matches(rows: Iterable[PlaceRow], name: str) -> list[PlaceRow]:
    """The rows a free-standing ``name`` from a text may mean: its exact qualified
    name, a qualified name ending in ``.name``, or the file's module and the
    qualified name ending in it (``config.load`` for ``load`` in ``config.py``)."""
    out = []
    for row in rows:
        path, qname = row[0], row[1]
        base = qname.split("/", 1)[0]  # Elixir: charge/1
        if _segment_suffix(base, name) or (
            "." in name and _segment_suffix(f"{module_of(path)}.{base}", name)
        ):
            out.append(row)
    return out


def unique(rows: Sequence[PlaceRow]) -> PlaceRow | None:
    """The one symbol ``rows`` name (one path and qualified name), or None."""
    places = {(r[0], r[1]) for r in rows}
    return rows[0] if len(places) == 1 else None


# -- one hop of the index: who imports a file --------------------------------------

_QUOTES = "\"'`<>;() "


def import_tails(path: str) -> list[str]:
    """The last segments (lower case, as the index's ``tail`` column holds them) an
    import of ``path`` may end with."""
    stem = posixpath.basename(path).rsplit(".", 1)[0]
    if stem == "__init__":
        stem = posixpath.basename(posixpath.dirname(path))
    tails = {stem.lower()}
    if stem == "index":  # `./dir` imports dir/index.js
        tails.add(posixpath.basename(posixpath.dirname(path)).lower())
    ext = path.rsplit(".", 1)[-1].lower() if "." in posixpath.basename(path) else ""
    if ext and language_for(path) != "python":
        tails.add(ext)  # `./utils.js`: the index cuts the tail at the last `.`
    return sorted(t for t in tails if t)


def imports_file(importer: str, name: str, target: str) -> bool:  # noqa: C901
    """Whether the import ``name`` (as written) in file ``importer`` loads ``target``."""
    spec = name.strip(_QUOTES)
    if not spec:
        return False
    target_stem = target.rsplit(".", 1)[0] if "." in posixpath.basename(target) else target
    if language_for(importer) == "python" and language_for(target) == "python":
        module = module_of(target)
        if spec.startswith("."):
            dots = len(spec) - len(spec.lstrip("."))
            base = posixpath.dirname(importer)
            for _ in range(dots - 1):
                base = posixpath.dirname(base)
            rest = spec[dots:].replace(".", "/")
            joined = posixpath.join(base, rest) if rest else base
            return module == joined.replace("/", ".").strip(".")
        return spec == module or (
            spec.count(".") >= 1 and (module.endswith("." + spec) or spec.endswith("." + module))
        )
    if spec.startswith("."):
        joined = posixpath.normpath(posixpath.join(posixpath.dirname(importer), spec))
        joined_stem = joined.rsplit(".", 1)[0] if language_for(joined) is not None else joined
        return joined_stem == target_stem or (
            posixpath.basename(target_stem) == "index"
            and joined_stem == posixpath.dirname(target_stem)
        )
    # Other languages: the import's trailing segments name the file's trailing path
    # segments (`use crate::net::http`, `import com.x.Http` for .../com/x/Http.java),
    # or those and one item imported from it (`use crate::net::http::Client`).
    parts = [p for p in re.split(r"[/.:\\]+", spec) if p]
    if language_for(spec) is not None and len(parts) > 1:
        parts = parts[:-1]  # "a/b.h": drop the extension
    target_parts = target_stem.split("/")
    for drop in (0, 1):
        named = parts[: len(parts) - drop]
        agree = 0
        for mine, theirs in zip(reversed(named), reversed(target_parts), strict=False):
            if mine != theirs:
                break
            agree += 1
        if agree >= 2 or (agree == 1 and len(target_parts) == 1 and len(named) == 1):
            return True
    return False


# -- the service's database-thread work -------------------------------------------


def resolve_all(index: CodeIndex, cid: int, wanted: Sequence[tuple[str, str]]) -> list[CodeTarget]:
    """The targets of explicit anchors ((checkout-relative path, symbol or "")).

    Error handling: `AnchorError` for a file the index does not hold or did not
    index, or a symbol that is not in it or is ambiguous.
    """
    out: list[CodeTarget] = []
    for rel, symbol in wanted:
        entry = index.file_state(cid, rel)
        if entry is None:
            raise AnchorError(
                f"code anchor {rel}: the file is not among the checkout's indexed files"
                " (ignored by Git, or beyond [code] max_files); anchor a file Git lists"
            )
        _, skipped, digest = entry
        if skipped is not None:
            raise AnchorError(
                f"code anchor {rel}: the file is not indexed ({skipped}); anchor another file"
            )
        if not symbol:
            target = CodeTarget(rel, "", FILE_KIND, digest)
        else:
            row = pick_symbol(index.places_in(cid, rel), symbol, rel)
            target = CodeTarget(rel, row[1], row[2], row[3])
        if target not in out:
            out.append(target)
    return out


def find_all(
    index: CodeIndex,
    cid: int,
    found: Sequence[tuple[str, str]],
    paths: Sequence[str],
    limit: int,
) -> list[CodeTarget]:
    """The targets the `candidates` of a text resolve to, each to exactly one file or symbol."""
    files = _Files(paths)
    out: list[CodeTarget] = []
    seen: set[tuple[str, str]] = set()
    for kind, value in found:
        if len(out) >= limit:
            break
        target = _path_target(index, cid, files, value) if kind == "path" else None
        if kind == "name":
            row = unique(_named(index, cid, value))
            target = CodeTarget(row[0], row[1], row[2], row[3]) if row is not None else None
        if target is not None and (target.path, target.symbol) not in seen:
            seen.add((target.path, target.symbol))
            out.append(target)
    return out


def _named(index: CodeIndex, cid: int, name: str) -> list[PlaceRow]:
    """The anchorable symbols a name may mean (see `name_matches`); [] when too many to tell."""
    rows = index.places_tailed(cid, name.rsplit(".", 1)[-1].lower(), _ROWS)
    if len(rows) >= _ROWS:
        return []
    return name_matches(rows, name)


def _path_target(index: CodeIndex, cid: int, files: _Files, value: str) -> CodeTarget | None:
    path, symbol = split_path(value)
    rel = files.one(path)
    if rel is None:
        return None
    entry = index.file_state(cid, rel)
    if entry is None or entry[1] is not None:
        return None
    if not symbol:
        return CodeTarget(rel, "", FILE_KIND, entry[2])
    row = unique(name_matches(index.places_in(cid, rel), symbol))
    return CodeTarget(rel, row[1], row[2], row[3]) if row is not None else None


class _Files:
    """The checkout's indexed paths, looked up by full path or by a trailing part."""

    def __init__(self, paths: Sequence[str]) -> None:
        self.paths = set(paths)
        self._by_base: dict[str, list[str]] | None = None

    def one(self, path: str) -> str | None:
        """The one indexed file ``path`` names: itself, or the only one ending in ``/path``."""
        if path in self.paths:
            return path
        if self._by_base is None:
            self._by_base = {}
            for p in self.paths:
                self._by_base.setdefault(posixpath.basename(p), []).append(p)
        ends = [
            p for p in self._by_base.get(posixpath.basename(path), ()) if p.endswith("/" + path)
        ]
        return ends[0] if len(ends) == 1 else None


def near_all(index: CodeIndex, cid: int, code: str, paths: Sequence[str]) -> list[tuple[str, str]]:  # noqa: C901
    """(path, symbol) pairs for recall's ``code`` argument (see `CodeService.near`)."""
    out: list[tuple[str, str]] = []

    def add(pair: tuple[str, str]) -> None:
        if pair not in out and len(out) < MAX_NEAR:
            out.append(pair)

    if _looks_like_path(code) or "/" in code:
        path, symbol = split_path(code)
        rel = _Files(paths).one(path) or path
        if not symbol:
            add((rel, ""))
            for row in index.places_in(cid, rel):
                add((rel, row[1]))
            for pair in _importers(index, cid, rel):
                add(pair)
            return out
        matches = name_matches(index.places_in(cid, rel), symbol)
        name = symbol
    else:
        name = code.replace("::", ".")
        matches = name_matches(
            index.places_tailed(cid, name.rsplit(".", 1)[-1].lower(), MAX_NEAR), name
        )
    if not matches:
        return [("", name)]
    for path, qname, _, _ in matches:
        add((path, qname))
    for path in dict.fromkeys(r[0] for r in matches):
        inside = {r[1] for r in matches if r[0] == path}
        for row in index.places_in(cid, path):
            if any(row[1].startswith(q + ".") for q in inside):
                add((path, row[1]))
        for pair in _importers(index, cid, path):
            add(pair)
    return out


def _importers(index: CodeIndex, cid: int, path: str) -> list[tuple[str, str]]:
    """(file, "") of the files whose imports load ``path``."""
    rows = index.imports_tailed(cid, import_tails(path), 4 * MAX_NEAR)
    found = dict.fromkeys(p for p, name in rows if p != path and imports_file(p, name, path))
    return [(p, "") for p in found]
