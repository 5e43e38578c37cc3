#!/usr/bin/env python
"""Staleness evaluation of code anchors (issue #33) on real Git history.

Two projects, both Python:

- ``self``: this repository's own history. The checkout the script runs in is
  cloned into a temporary directory (the working checkout is never touched);
  bases N are spread over its first-parent history and each is compared with
  N+k, the k-th first-parent commit after it.
- ``h11``: the files of the h11 0.16.0 sdist (MIT, shipped as
  ``tests/data/h11-0.16.0.tar.gz``), committed, then a scripted history of
  commits that each edit a few symbols: change a body, rename, move to
  another file (top-level code to a new file, a method into a class of another
  file), delete, re-space (blank lines, trailing spaces, a call re-wrapped
  after a comma) or comment (a comment line, a trailing comment). Seeded, so
  the history is the same on every run.

At each base N, the checkout's code index is refreshed (the real parser
workers), symbols (functions, methods, classes) are sampled from the index
and made into `CodeTarget`s, exactly as ``remember`` anchors them. For each k
the clone is checked out at N+k and `CodeService.target_states` gives each
anchor's status.

Ground truth comes from the symbols' own text at both commits, read by the
standard library (``ast`` for the symbols, ``tokenize`` for their text), not
by tree-sitter: a symbol's text is its tokens without comments and
non-logical newlines (indentation kept as INDENT/DEDENT), with its own name
replaced by a placeholder. At N+k an anchor is ``fresh`` when its path and
qualified name hold the same text, ``changed`` when they hold another text,
``moved`` when they are gone and the same text is found under another path
or name, ``deleted`` otherwise.

Scores: stale = changed or deleted; precision and recall of predicted stale
against true stale; ``moved found``: true moves reported ``moved`` at one of
the true places; ``false stale after whitespace/comment-only edits``: true
fresh anchors whose raw text did change, reported stale. Also the cost of a
status check (no change since the last refresh: wall time and files parsed).

Usage::

    python tools/eval_stale.py [--samples 300] [--seed 7] [--json OUT]
    python tools/eval_stale.py --digest-cost [--tree-files 2500]

Goals (issue #33): precision and recall >= 0.95, moved >= 0.9, 0 false stale.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import io
import json
import os
import random
import subprocess
import sys
import tarfile
import tempfile
import time
import tokenize
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import trio
from memtrio.actors.code.anchors import CodeTarget
from memtrio.actors.code.service import CodeService
from memtrio.actors.code.standalone import count_parses, standalone_service

HERE = Path(__file__).resolve().parent.parent
SDIST = HERE / "tests" / "data" / "h11-0.16.0.tar.gz"
GIT = [
    "git",
    "-c",
    "user.email=eval@example.com",
    "-c",
    "user.name=eval",
    "-c",
    "commit.gpgsign=false",
]
KINDS = ("function", "method", "class")
STALE = ("changed", "deleted")


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        [*GIT, "-C", str(root), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


# -- the oracle: symbols and their text, by the standard library ----------------------


@dataclass
class OSym:
    qname: str
    kind: str
    text: str  # hash of the tokens, own name replaced
    raw: str  # hash of the raw source segment


@dataclass
class Oracle:
    files: dict[str, dict[str, list[OSym]]] = field(default_factory=dict)  # path -> qname -> syms
    by_text: dict[str, set[tuple[str, str]]] = field(default_factory=dict)  # text -> places


def _symbols(tree: ast.Module) -> list[tuple[str, str, ast.AST]]:
    out: list[tuple[str, str, ast.AST]] = []

    def walk(body: list[ast.stmt], prefix: str, in_class: bool) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                q = prefix + node.name
                out.append((q, "method" if in_class else "function", node))
                walk(node.body, q + ".", False)
            elif isinstance(node, ast.ClassDef):
                q = prefix + node.name
                out.append((q, "class", node))
                walk(node.body, q + ".", True)
            else:
                for attr in ("body", "orelse", "finalbody", "handlers"):
                    inner = getattr(node, attr, None)
                    if isinstance(inner, list) and inner and isinstance(inner[0], ast.AST):
                        walk([n for n in inner if isinstance(n, ast.stmt)], prefix, in_class)
                if isinstance(node, ast.Try):
                    for handler in node.handlers:
                        walk(handler.body, prefix, in_class)

    walk(tree.body, "", False)
    return out


def oracle_file(source: str) -> dict[str, list[OSym]] | None:  # noqa: C901
    try:
        tree = ast.parse(source)
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (SyntaxError, tokenize.TokenError, ValueError):
        return None
    lines = source.splitlines(keepends=True)
    starts = [t.start for t in tokens]
    import bisect

    out: dict[str, list[OSym]] = {}
    for qname, kind, node in _symbols(tree):
        assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        begin = (node.lineno, node.col_offset)
        end = (node.end_lineno or node.lineno, node.end_col_offset or 0)
        parts: list[str] = []
        named = False
        after_keyword = False
        for tok in tokens[bisect.bisect_left(starts, begin) :]:
            if tok.start >= end:
                break
            if tok.type in (tokenize.COMMENT, tokenize.NL):
                continue
            if tok.type == tokenize.INDENT:
                parts.append("<INDENT>")
            elif tok.type == tokenize.DEDENT:
                if parts:  # those before its first token close the code above it
                    parts.append("<DEDENT>")
            elif tok.type == tokenize.NEWLINE:
                parts.append("<NEWLINE>")
            elif after_keyword and not named and tok.type == tokenize.NAME:
                parts.append("<NAME>")
                named = True
            else:
                parts.append(tok.string)
            after_keyword = tok.type == tokenize.NAME and tok.string in ("def", "class")
        segment = "".join(lines[begin[0] - 1 : end[0]])
        out.setdefault(qname, []).append(
            OSym(qname, kind, _hash("\x1f".join(parts)), _hash(segment))
        )
    return out


def _hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()


def oracle(root: Path) -> Oracle:
    found = Oracle()
    for path in git(root, "ls-files", "-co", "--exclude-standard").splitlines():
        if not path.endswith(".py") or os.path.islink(root / path):
            continue
        try:
            source = (root / path).read_text("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        syms = oracle_file(source)
        if syms is None:
            continue
        found.files[path] = syms
        for qname, entries in syms.items():
            for sym in entries:
                found.by_text.setdefault(sym.text, set()).add((path, qname))
    return found


def truth(anchor: tuple[str, str], base: OSym, after: Oracle) -> tuple[str, set[tuple[str, str]]]:
    path, qname = anchor
    now = after.files.get(path, {}).get(qname)
    if now:
        return ("fresh" if any(s.text == base.text for s in now) else "changed"), {anchor}
    places = after.by_text.get(base.text, set()) - {anchor}
    return ("moved" if places else "deleted"), places


def raw_changed(anchor: tuple[str, str], base: OSym, after: Oracle) -> bool:
    now = after.files.get(anchor[0], {}).get(anchor[1], [])
    return not any(s.raw == base.raw for s in now)


# -- the service -------------------------------------------------------------------------


async def sample_targets(
    service: CodeService, root: Path, base: Oracle, rng: random.Random, samples: int
) -> list[tuple[CodeTarget, OSym]]:
    """Symbols of the index (functions, methods, classes of Python files) that the
    oracle also knows, once in their file; ``samples`` of them at random."""
    await service.refresh(root)
    cid = await service.db(service.index.checkout_id, str(root))
    pool: list[tuple[CodeTarget, OSym]] = []
    for path in sorted(base.files):
        rows = await service.db(service.index.places_in, cid, path)
        seen = Counter(r[1] for r in rows)
        for _, qname, kind, digest in rows:
            osyms = base.files[path].get(qname, [])
            if kind in KINDS and seen[qname] == 1 and len(osyms) == 1:
                pool.append((CodeTarget(path, qname, kind, digest), osyms[0]))
    rng.shuffle(pool)
    return sorted(pool[:samples], key=lambda p: (p[0].path, p[0].symbol))


@dataclass
class Score:
    pairs: list[tuple[str, str]] = field(default_factory=list)  # (truth, predicted)
    moved_total: int = 0
    moved_found: int = 0
    ws_edited: int = 0  # true fresh with raw text changed
    ws_false_stale: int = 0
    check_ms: list[float] = field(default_factory=list)
    check_parsed: int = 0
    wrong: list[str] = field(default_factory=list)

    def add(self, other: Score) -> None:
        self.pairs += other.pairs
        self.moved_total += other.moved_total
        self.moved_found += other.moved_found
        self.ws_edited += other.ws_edited
        self.ws_false_stale += other.ws_false_stale
        self.check_ms += other.check_ms
        self.check_parsed += other.check_parsed
        self.wrong += other.wrong

    def summary(self) -> dict[str, object]:
        tp = sum(1 for t, p in self.pairs if t in STALE and p in STALE)
        fp = sum(1 for t, p in self.pairs if t not in STALE and p in STALE)
        fn = sum(1 for t, p in self.pairs if t in STALE and p not in STALE)
        exact = sum(1 for t, p in self.pairs if t == p)
        ms = sorted(self.check_ms)
        return {
            "anchors": len(self.pairs),
            "truth": dict(Counter(t for t, _ in self.pairs)),
            "status_accuracy": round(exact / len(self.pairs), 4) if self.pairs else None,
            "stale_precision": round(tp / (tp + fp), 4) if tp + fp else None,
            "stale_recall": round(tp / (tp + fn), 4) if tp + fn else None,
            "moved_found": round(self.moved_found / self.moved_total, 4)
            if self.moved_total
            else None,
            "moved_total": self.moved_total,
            "ws_comment_only_edited": self.ws_edited,
            "ws_comment_only_false_stale": self.ws_false_stale,
            "status_check_ms_p50": round(ms[len(ms) // 2], 2) if ms else None,
            "status_check_ms_max": round(ms[-1], 2) if ms else None,
            "status_check_files_parsed": self.check_parsed,
        }


async def score_at(
    service: CodeService,
    root: Path,
    anchors: list[tuple[CodeTarget, OSym]],
    label: str,
) -> Score:
    """Statuses of ``anchors`` at the checkout's current commit, against the oracle."""
    after = oracle(root)
    targets = [t for t, _ in anchors]
    states = await service.target_states(root, targets)
    # The cost of a status check when nothing changed since the last refresh.
    parsed = count_parses(service)
    t0 = time.perf_counter()
    again = await service.target_states(root, targets)
    check_ms = (time.perf_counter() - t0) * 1000
    del service.pool.parse_batch  # the spy: back to the pool's own method
    assert again == states
    score = Score(check_ms=[check_ms], check_parsed=len(parsed))
    for (target, base), state in zip(anchors, states, strict=True):
        anchor = (target.path, target.symbol)
        status, places = truth(anchor, base, after)
        score.pairs.append((status, state.status))
        if status == "moved":
            score.moved_total += 1
            if state.status == "moved" and (state.path, state.symbol) in places:
                score.moved_found += 1
        if status == "fresh" and raw_changed(anchor, base, after):
            score.ws_edited += 1
            if state.status in STALE:
                score.ws_false_stale += 1
        ok = status == state.status and (status != "moved" or (state.path, state.symbol) in places)
        if not ok:
            score.wrong.append(
                f"{label} {target.path}:{target.symbol} truth {status} {sorted(places)[:2]}"
                f" got {state.status} {state.path}:{state.symbol}"
            )
    return score


# -- project 1: this repository's history ---------------------------------------------------


async def eval_self(
    service: CodeService, work: Path, rng: random.Random, samples: int, bases: int, ks: list[int]
) -> Score:
    clone = work / "self"
    subprocess.run(
        ["git", "clone", "-q", "--no-hardlinks", str(HERE), str(clone)],
        check=True,
        capture_output=True,
    )
    commits = git(clone, "rev-list", "--first-parent", "--reverse", "HEAD").splitlines()
    last = len(commits) - 1 - max(ks)
    picks = [int(last * (i + 1) / (bases + 1)) for i in range(bases)]
    total = Score()
    for at in picks:
        git(clone, "checkout", "-q", "--detach", commits[at])
        base = oracle(clone)
        anchors = await sample_targets(service, clone, base, rng, samples)
        for k in ks:
            git(clone, "checkout", "-q", "--detach", commits[at + k])
            score = await score_at(service, clone, anchors, f"self N={commits[at][:8]} k={k}")
            print(f"self N={commits[at][:8]} k={k:<3} {json.dumps(score.summary())}", flush=True)
            total.add(score)
    return total


# -- project 2: an sdist and a scripted history ------------------------------------------------

EDITS = ("body", "rename", "move", "delete", "respace", "comment")


def _lines_of(node: ast.AST) -> tuple[int, int]:
    """1-based first line (decorators included) and last line of a definition."""
    assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return first, node.end_lineno or node.lineno


def _safe_line_ends(source: str, first: int, last: int) -> list[int]:
    """Lines in [first, last) that end with a logical or blank line end (not inside a string)."""
    ends = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in (tokenize.NEWLINE, tokenize.NL) and first <= tok.start[0] < last:
            ends.append(tok.start[0])
    return sorted(set(ends))


def edit(  # noqa: C901
    files: dict[str, str], path: str, qname: str, kind: str, rng: random.Random, step: int
) -> str | None:
    """Apply one edit of a random kind to symbol ``qname`` of ``path`` in ``files``; the
    edit's name, or None when none applied."""
    source = files[path]
    tree = ast.parse(source)
    nodes = {q: n for q, _, n in _symbols(tree)}
    node = nodes[qname]
    assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    lines = source.splitlines(keepends=True)
    first, last = _lines_of(node)
    parent = qname.rsplit(".", 1)[0] if "." in qname else ""
    what = rng.choice(EDITS)
    new: str | None = None
    if what == "body":
        stmt = node.body[0]
        if stmt.lineno > node.lineno:
            indent = lines[stmt.lineno - 1][: stmt.col_offset]
            lines.insert(stmt.lineno - 1, f"{indent}_eval_{step} = {step}\n")
            new = "".join(lines)
    elif what == "rename":
        line = lines[node.lineno - 1]
        word = ("class " if kind == "class" else "def ") + node.name
        at = line.find(word, node.col_offset)
        if at >= 0:
            cut = at + len(word)
            lines[node.lineno - 1] = line[:cut] + f"_r{step}" + line[cut:]
            new = "".join(lines)
    elif what == "move":
        block = "".join(lines[first - 1 : last])
        if not parent:
            rest = "".join(lines[: first - 1] + lines[last:])
            target = f"h11/_moved_{step}.py"
            files[target] = block if block.endswith("\n") else block + "\n"
            new = rest
        elif (
            kind == "method"
            and nodes.get(parent) is not None
            and isinstance(nodes[parent], ast.ClassDef)
        ):
            owner = nodes[parent]
            assert isinstance(owner, ast.ClassDef)
            if len(owner.body) > 1:
                for other in sorted(files):
                    if other == path or not other.endswith(".py"):
                        continue
                    classes = [
                        n for n in ast.parse(files[other]).body if isinstance(n, ast.ClassDef)
                    ]
                    if not classes:
                        continue
                    cls = rng.choice(classes)
                    olines = files[other].splitlines(keepends=True)
                    body_indent = olines[cls.body[0].lineno - 1][: cls.body[0].col_offset]
                    old_indent = lines[node.lineno - 1][: node.col_offset]
                    moved = [
                        (body_indent + ln[min(len(old_indent), len(ln) - len(ln.lstrip())) :])
                        if ln.strip()
                        else ln
                        for ln in lines[first - 1 : last]
                    ]
                    end = cls.end_lineno or cls.lineno
                    olines[end:end] = ["\n", *moved]
                    files[other] = "".join(olines)
                    new = "".join(lines[: first - 1] + lines[last:])
                    break
    elif what == "delete":
        siblings = nodes[parent].body if parent else tree.body  # type: ignore[attr-defined]
        if len(siblings) > 1:
            new = "".join(lines[: first - 1] + lines[last:])
    elif what == "respace":
        ends = _safe_line_ends(source, first, last)
        if ends:
            line_no = rng.choice(ends)
            lines[line_no - 1] = lines[line_no - 1].rstrip("\n") + "   \n\n"
            new = "".join(lines)
            # and re-wrap after a comma inside brackets, when there is one on a line of its own
            for tok in tokenize.generate_tokens(io.StringIO(new).readline):
                if (
                    tok.type == tokenize.OP
                    and tok.string == ","
                    and first <= tok.start[0] <= last
                    and rng.random() < 0.3
                ):
                    row, col = tok.end
                    relines = new.splitlines(keepends=True)
                    text = relines[row - 1]
                    if "#" not in text and '"' not in text and "'" not in text:
                        relines[row - 1] = text[:col] + "\n        " + text[col:].lstrip(" ")
                        new = "".join(relines)
                    break
    elif what == "comment":
        ends = _safe_line_ends(source, first, last)
        if ends:
            line_no = rng.choice(ends)
            nxt = lines[line_no] if line_no < len(lines) else "\n"
            indent = nxt[: len(nxt) - len(nxt.lstrip())]
            lines.insert(line_no, f"{indent}# reviewed in step {step}\n")
            stripped = lines[line_no - 1].rstrip("\n")
            if "#" not in stripped and stripped.strip():
                lines[line_no - 1] = stripped + "  # checked\n"
            new = "".join(lines)
    if new is None:
        return None
    try:
        ast.parse(new)
    except SyntaxError:
        return None
    files[path] = new
    return what


def _parses(source: str) -> bool:
    try:
        ast.parse(source)
    except SyntaxError:
        return False
    return True


def build_sdist_history(root: Path, rng: random.Random, commits: int, per_commit: int) -> list[str]:
    """The sdist's files as the first commit, then ``commits`` scripted commits; their shas."""
    root.mkdir(parents=True)
    with tarfile.open(SDIST) as tar:
        for member in tar.getmembers():
            if not member.isfile():
                continue
            rel = member.name.split("/", 1)[1]
            out = root / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            extracted = tar.extractfile(member)
            assert extracted is not None
            out.write_bytes(extracted.read())
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "h11 0.16.0 sdist")
    shas = [git(root, "rev-parse", "HEAD")]
    done: Counter[str] = Counter()
    for step in range(1, commits + 1):
        files = {
            p: (root / p).read_text("utf-8")
            for p in git(root, "ls-files").splitlines()
            if p.endswith(".py")
        }
        touched: set[str] = set()
        for _ in range(per_commit):
            path = rng.choice(sorted(p for p in files if p not in touched))
            syms = oracle_file(files[path])
            if not syms:
                continue
            qname = rng.choice(sorted(syms))
            if len(syms[qname]) != 1:
                continue
            before = dict(files)
            what = edit(files, path, qname, syms[qname][0].kind, rng, step)
            if what is None or not all(
                _parses(text) for p, text in files.items() if text != before.get(p)
            ):
                files = before
                continue
            touched.update(p for p in files if files[p] != before.get(p))
            done[what] += 1
        for p, text in files.items():
            (root / p).write_text(text, "utf-8")
        git(root, "add", "-A")
        git(root, "commit", "-qm", f"scripted step {step}")
        shas.append(git(root, "rev-parse", "HEAD"))
    print(f"h11 scripted edits: {dict(sorted(done.items()))}", flush=True)
    return shas


async def eval_sdist(
    service: CodeService,
    work: Path,
    rng: random.Random,
    samples: int,
    ks: list[int],
    commits: int,
    per_commit: int,
) -> Score:
    root = work / "h11"
    shas = build_sdist_history(root, rng, commits, per_commit)
    total = Score()
    for at in (0, commits // 2):
        git(root, "checkout", "-q", "--detach", shas[at])
        base = oracle(root)
        anchors = await sample_targets(service, root, base, rng, samples)
        for k in ks:
            if at + k >= len(shas):
                continue
            git(root, "checkout", "-q", "--detach", shas[at + k])
            score = await score_at(service, root, anchors, f"h11 N={at} k={k}")
            print(f"h11  N={at:<8} k={k:<3} {json.dumps(score.summary())}", flush=True)
            total.add(score)
    return total


async def main_async(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="memtrio-eval-stale-") as tmp:
        work = Path(tmp)
        results: dict[str, dict[str, object]] = {}
        total = Score()
        async with standalone_service(work / "home", file_timeout=30.0, name="eval") as (
            service,
            _,
        ):
            t0 = time.perf_counter()
            if "self" in args.projects:
                own = await eval_self(service, work, rng, args.samples, args.bases, args.ks)
                results["self"] = own.summary()
                total.add(own)
            if "h11" in args.projects:
                sdist = await eval_sdist(
                    service, work, rng, args.samples, args.ks, args.commits, args.per_commit
                )
                results["h11"] = sdist.summary()
                total.add(sdist)
            results["all"] = total.summary()
            seconds = time.perf_counter() - t0
    print()
    for name, summary in results.items():
        print(f"{name:<5} {json.dumps(summary)}")
    print(f"seconds {seconds:.1f}")
    if total.wrong:
        print(f"\n{len(total.wrong)} anchors with a wrong status (first 40):")
        for line in total.wrong[:40]:
            print("  " + line)
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "wrong": total.wrong}, indent=1))
    allsum = results["all"]
    ok = (
        (allsum["stale_precision"] or 0) >= 0.95  # type: ignore[operator]
        and (allsum["stale_recall"] or 0) >= 0.95  # type: ignore[operator]
        and (allsum["moved_found"] or 0) >= 0.9  # type: ignore[operator]
        and allsum["ws_comment_only_false_stale"] == 0
    )
    print("goals met" if ok else "goals NOT met")
    return 0 if ok else 1


def digest_cost(tree: Path, repeats: int = 3) -> None:
    """What the digests add to parsing: outline the tracked source files of the Git
    checkout ``tree`` in this process with and without them (best of ``repeats``)."""
    from memtrio.actors.code import extract
    from memtrio.actors.code.languages import language_for

    files = []
    for path in git(tree, "ls-files").splitlines():
        language = language_for(path)
        if language is not None and (tree / path).is_file():
            data = (tree / path).read_bytes()
            try:
                extract.check_content(path, data)
            except extract.Skipped:
                continue
            files.append((language, data))
    real = (extract.digests, extract.trivia_patterns)

    def run() -> float:  # CPU time: on a shared machine, wall time is mostly the neighbours'
        t0 = time.process_time()
        for language, data in files:
            extract.outline(language, data)
        return time.process_time() - t0

    with_digests = min(run() for _ in range(repeats))
    extract.digests = lambda src, trivia, spans: ([""] * len(spans), "")  # type: ignore[assignment]
    extract.trivia_patterns = lambda *a: ""  # type: ignore[assignment]
    extract._query.cache_clear()
    try:
        without = min(run() for _ in range(repeats))
    finally:
        extract.digests, extract.trivia_patterns = real
        extract._query.cache_clear()
    size = sum(len(d) for _, d in files) / 1e6
    print(
        f"digest cost: {len(files)} files, {size:.1f} MB: outline {without * 1000:.0f} ms"
        f" without digests, {with_digests * 1000:.0f} ms with"
        f" (+{(with_digests / without - 1) * 100:.0f} %), CPU time, best of {repeats}, one process"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=300, help="anchors per base commit")
    parser.add_argument("--bases", type=int, default=4, help="base commits of this repository")
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 5, 20, 60])
    parser.add_argument("--commits", type=int, default=40, help="scripted h11 commits")
    parser.add_argument("--per-commit", type=int, default=6, help="edits per scripted commit")
    parser.add_argument("--projects", nargs="+", default=["self", "h11"])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", help="also write the results as JSON to this file")
    parser.add_argument(
        "--digest-cost", action="store_true", help="only measure what digests add to parsing"
    )
    parser.add_argument(
        "--tree-files",
        type=int,
        help="with --digest-cost: on the tree of tools/bench_code.py with this many files,"
        " not on this repository",
    )
    args = parser.parse_args()
    if args.digest_cost and args.tree_files:
        sys.path.insert(0, str(HERE / "tools"))
        from bench_code import build_tree, default_sources

        with tempfile.TemporaryDirectory(prefix="memtrio-digest-cost-") as tmp:
            build_tree(default_sources(), Path(tmp) / "tree", args.tree_files)
            digest_cost(Path(tmp) / "tree")
        return 0
    if args.digest_cost:
        digest_cost(HERE)
        return 0
    return trio.run(main_async, args)


if __name__ == "__main__":
    sys.exit(main())
