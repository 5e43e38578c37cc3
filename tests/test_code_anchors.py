"""Code anchors against a real Git checkout and real parser workers: digests that
ignore whitespace and comments, the four statuses, names found in a text,
explicit anchors refused with a reason, `near`, `anchor_diff`, and a status
check that parses nothing that did not change."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import trio
from gitrepo import git, make_repo, write
from memtrio.actors.code.anchors import (
    MAX_CANDIDATES,
    AnchorError,
    CodeTarget,
    TargetState,
    candidates,
    digest_text,
)
from memtrio.actors.code.service import CodeService
from memtrio.actors.code.standalone import count_parses, standalone_service
from memtrio.actors.code.wire import ParseJob, ParseResult
from memtrio.protocol.errors import BadArgument, Unavailable

T = TypeVar("T")

RETRY = '''"""Retrying."""

import time


class RetryPolicy:
    """How long to wait."""

    def backoff(self, attempt):
        # doubles the delay up to 30 s
        return min(30, 2 ** attempt)

    def give_up(self, attempt):
        if attempt > 5:
            return True
        return False


def load_config(path):
    with open(path) as f:
        return f.read()
'''

FILES: dict[str, str | bytes] = {
    "app/retry.py": RETRY,
    "app/main.py": "from app.retry import RetryPolicy\nfrom .retry import load_config\n\n\ndef main():\n    return RetryPolicy().backoff(1)\n",
    "app/other.py": "def setup():\n    pass\n\n\ndef teardown():\n    pass\n",
    "lib/a.py": "def setup():\n    return 1\n",
    "web/util.js": "// helpers\nexport function formatDate(d) {\n  return d.toISOString();\n}\n",
    "web/page.js": "import { formatDate } from './util.js';\nexport const x = formatDate(new Date());\n",
    "README.md": "# not source\n",
}


async def anchored(service: CodeService, root: Path) -> list[CodeTarget]:
    return await service.resolve_targets(
        root,
        [
            ("app/retry.py", "RetryPolicy.backoff"),
            ("app/retry.py", "give_up"),  # a unique suffix of RetryPolicy.give_up
            ("app/retry.py", "load_config"),
            ("web/util.js", "formatDate"),
            ("app/other.py", ""),
        ],
    )


async def test_whitespace_and_comment_edits_keep_anchors_fresh(tmp_path: Path, home: Path) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    async with standalone_service(home) as (service, _):
        targets = await anchored(service, root)
        assert [(t.path, t.symbol, t.kind) for t in targets] == [
            ("app/retry.py", "RetryPolicy.backoff", "method"),
            ("app/retry.py", "RetryPolicy.give_up", "method"),
            ("app/retry.py", "load_config", "function"),
            ("web/util.js", "formatDate", "function"),
            ("app/other.py", "", "file"),
        ]
        edited = (
            RETRY.replace("# doubles the delay up to 30 s", "# doubled, capped at 30 seconds")
            .replace("min(30, 2 ** attempt)", "min(30,\n                   2**attempt)  # cap")
            .replace("        if attempt > 5:", "\n        # five tries\n        if attempt>5 :")
            .replace("def load_config(path):", "def load_config( path ):\n    # read it all")
        )
        write(
            root,
            {
                "app/retry.py": edited,
                "web/util.js": "/* helpers */\nexport function formatDate( d ){\n\n  return d.toISOString() ; // iso\n}\n",
                "app/other.py": "# lifecycle\ndef setup():\n    pass\n\n\n\ndef teardown():  # end\n    pass\n",
            },
        )
        states = await service.target_states(root, targets)
        assert [s.status for s in states] == ["fresh"] * 5


async def test_changed_moved_and_deleted(tmp_path: Path, home: Path) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    async with standalone_service(home) as (service, _):
        targets = await anchored(service, root)
        # backoff: body changed; give_up: renamed; load_config: moved to another file;
        # formatDate: deleted; app/other.py: the file renamed (git mv).
        retry = (
            RETRY.replace("min(30, 2 ** attempt)", "min(60, 3 ** attempt)")
            .replace("def give_up(", "def should_stop(")
            .split("\n\ndef load_config")[0]
        )
        write(
            root,
            {
                "app/retry.py": retry,
                "app/config.py": "def load_config(path):\n    with open(path) as f:\n        return f.read()\n",
                "web/util.js": "export const unrelated = 1;\n",
            },
        )
        git(root, "mv", "app/other.py", "app/lifecycle.py")
        states = await service.target_states(root, targets)
        assert states == [
            TargetState("changed", "app/retry.py", "RetryPolicy.backoff"),
            TargetState("moved", "app/retry.py", "RetryPolicy.should_stop"),
            TargetState("moved", "app/config.py", "load_config"),
            TargetState("deleted", "web/util.js", "formatDate"),
            TargetState("moved", "app/lifecycle.py", ""),
        ]
        # Python indentation is structure: moving a statement out of a block changes the code.
        target = (await service.resolve_targets(root, [("app/retry.py", "should_stop")]))[0]
        write(
            root,
            {"app/retry.py": retry.replace("            return True\n", "        return True\n")},
        )
        assert (await service.target_states(root, [target]))[0].status == "changed"


async def test_method_alone_in_its_class_keeps_its_digest_when_siblings_come(
    tmp_path: Path, home: Path
) -> None:
    # The class's block starts and ends with its only method: it is not part of the method.
    root = make_repo(tmp_path / "repo", {"m.py": "class A:\n    def m(self):\n        return 1\n"})
    async with standalone_service(home) as (service, _):
        target = (await service.resolve_targets(root, [("m.py", "A.m")]))[0]
        write(
            root,
            {
                "m.py": "class A:\n    x = 1\n\n    def m(self):\n        return 1\n\n    def n(self):\n        pass\n"
            },
        )
        assert await service.target_states(root, [target]) == [TargetState("fresh", "m.py", "A.m")]


async def test_status_check_parses_only_changed_files(tmp_path: Path, home: Path) -> None:
    files = dict(FILES)
    files.update({f"pkg/m{i}.py": f"def f{i}():\n    return {i}\n" for i in range(30)})
    root = make_repo(tmp_path / "repo", files)
    async with standalone_service(home) as (service, _):
        targets = await anchored(service, root)
        parsed = count_parses(service)
        assert [s.status for s in await service.target_states(root, targets)] == ["fresh"] * 5
        assert parsed == []
        # A file no anchor is in decides no status: nothing is parsed for it.
        write(root, {"pkg/m3.py": "def f3():\n    return 33\n"})
        assert [s.status for s in await service.target_states(root, targets)] == ["fresh"] * 5
        assert parsed == []
        # An anchored file changed: the refresh parses the changed files, and only them.
        write(root, {"app/other.py": "def setup():\n    return 2\n"})
        states = await service.target_states(root, targets)
        assert [s.status for s in states] == ["fresh"] * 4 + ["changed"]
        assert sorted(parsed) == ["app/other.py", "pkg/m3.py"]


async def test_status_check_of_unchanged_files_is_one_thread_call(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each thread hand-off costs the server more CPU than the check itself: a recall's
    # status check of unchanged code (the common case) makes one, and stats only the
    # anchored files, not every file of the checkout.
    files = dict(FILES)
    files.update({f"pkg/m{i}.py": f"def f{i}():\n    return {i}\n" for i in range(30)})
    root = make_repo(tmp_path / "repo", files)
    async with standalone_service(home) as (service, _):
        targets = await anchored(service, root)
        await service.target_states(root, targets)
        hops: list[str] = []
        original = trio.to_thread.run_sync

        async def counting(fn: Callable[..., T], *args: object, **kwargs: Any) -> T:
            hops.append(getattr(fn, "__name__", repr(fn)))
            return await original(fn, *args, **kwargs)

        monkeypatch.setattr(trio.to_thread, "run_sync", counting)
        states = await service.target_states(root, targets)
        assert [s.status for s in states] == ["fresh"] * 5
        assert len(hops) == 1, hops


async def test_anchored_file_newly_ignored_is_deleted(tmp_path: Path, home: Path) -> None:
    # The file is still on disk, unchanged, but Git no longer lists it: it is not
    # the checkout's code any more, whatever the index last held.
    root = make_repo(tmp_path / "repo", FILES)
    async with standalone_service(home) as (service, _):
        targets = await anchored(service, root)
        assert [s.status for s in await service.target_states(root, targets)] == ["fresh"] * 5
        git(root, "rm", "-q", "--cached", "web/util.js")
        write(root, {".gitignore": "web/util.js\n"})
        states = await service.target_states(root, targets)
        assert states[3] == TargetState("deleted", "web/util.js", "formatDate")
        assert [s.status for s in states[:3]] == ["fresh"] * 3


async def test_find_targets_anchors_only_names_that_resolve_to_one_place(
    tmp_path: Path, home: Path
) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    async with standalone_service(home) as (service, _):
        found = await service.find_targets(
            root,
            "`RetryPolicy.backoff` doubles the delay; config loading lives in "
            "`app/retry.py:load_config`, formatDate is in web/util.js. `setup` is "
            "ambiguous, so is setup_thing; the word policy and `nothing_here` anchor nothing.",
        )
        assert [(t.path, t.symbol) for t in found] == [
            ("app/retry.py", "RetryPolicy.backoff"),
            ("app/retry.py", "load_config"),
            ("web/util.js", "formatDate"),
            ("web/util.js", ""),
        ]
        # qualified by module, and a bare snake_case name that is unique
        found = await service.find_targets(root, "see retry.load_config and give_up")
        assert [(t.path, t.symbol) for t in found] == [
            ("app/retry.py", "load_config"),
            ("app/retry.py", "RetryPolicy.give_up"),
        ]
        assert await service.find_targets(root, "`setup` and `main.py` or setup") == [
            CodeTarget("app/main.py", "", "file", found_digest(service, root, "app/main.py"))
        ]
        assert await service.find_targets(root, "plain words only. Nothing here.") == []


def found_digest(service: CodeService, root: Path, path: str) -> str:
    cid = service.index.checkout_id(str(root))
    entry = service.index.file_state(cid, path)
    assert entry is not None
    return entry[2]


def test_long_texts_are_read_in_bounded_work() -> None:
    text = " ".join(f"name_{i} Class{i}Name" for i in range(100_000))
    assert len(candidates(text)) == MAX_CANDIDATES


@pytest.mark.parametrize(
    ("wanted", "message"),
    [
        ([("app/nope.py", "")], "no such file"),
        ([("../etc/passwd", "")], "contains '..'"),
        ([("README.md", "")], "not a supported source file"),
        ([("app/retry.py", "RetryPolicy.nope")], "no symbol 'RetryPolicy.nope' in app/retry.py"),
        ([("app/retry.py", "a\nb")], "control character"),
        ([("app/retry.py", "x" * 600)], "longer than 512"),
        ([("app/retry.py", "")] * 17, "at most 16"),
        ([("", "")], "path is empty"),
    ],
)
async def test_explicit_anchors_that_name_no_code_are_refused(
    tmp_path: Path, home: Path, wanted: list[tuple[str, str]], message: str
) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    async with standalone_service(home) as (service, _):
        with pytest.raises(AnchorError, match=message.replace("(", r"\(")) as caught:
            await service.resolve_targets(root, wanted)
        assert isinstance(caught.value, BadArgument)


async def test_ambiguous_explicit_symbol_is_refused(tmp_path: Path, home: Path) -> None:
    root = make_repo(
        tmp_path / "repo",
        {
            "m.py": "class A:\n    def run(self):\n        pass\n\n\nclass B:\n    def run(self):\n        pass\n"
        },
    )
    async with standalone_service(home) as (service, _):
        with pytest.raises(AnchorError, match=r"ambiguous \(A.run, B.run\)"):
            await service.resolve_targets(root, [("m.py", "run")])


async def test_symlinked_anchor_is_refused(tmp_path: Path, home: Path) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    (root / "link.py").symlink_to(root / "app" / "retry.py")
    async with standalone_service(home) as (service, _):
        with pytest.raises(AnchorError, match="symlink"):
            await service.resolve_targets(root, [("link.py", "")])
        assert await service.find_targets(root, "see `link.py`") == []


async def test_near_covers_symbols_and_importers(tmp_path: Path, home: Path) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    async with standalone_service(home) as (service, _):
        assert await service.near(root, "app/retry.py") == [
            ("app/retry.py", ""),
            ("app/retry.py", "RetryPolicy"),
            ("app/retry.py", "RetryPolicy.backoff"),
            ("app/retry.py", "RetryPolicy.give_up"),
            ("app/retry.py", "load_config"),
            ("app/main.py", ""),
        ]
        assert await service.near(root, "RetryPolicy") == [
            ("app/retry.py", "RetryPolicy"),
            ("app/retry.py", "RetryPolicy.backoff"),
            ("app/retry.py", "RetryPolicy.give_up"),
            ("app/main.py", ""),
        ]
        assert await service.near(root, "web/util.js") == [
            ("web/util.js", ""),
            ("web/util.js", "formatDate"),
            ("web/page.js", ""),
        ]
        assert await service.near(root, "gone_function") == [("", "gone_function")]
        with pytest.raises(BadArgument):
            await service.near(root, "x\ny")


async def test_anchor_diff_and_head_commit(tmp_path: Path, home: Path) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    async with standalone_service(home) as (service, _):
        commit = await service.head_commit(root)
        assert commit == git(root, "rev-parse", "HEAD")
        assert await service.anchor_diff(root, commit, "app/retry.py", 50) == ""
        write(root, {"app/retry.py": RETRY.replace("min(30,", "min(60,")})
        diff = await service.anchor_diff(root, commit, "app/retry.py", 50)
        assert diff.splitlines()[0] == "app/retry.py\tmodified"
        assert "~ 9-11\tmethod backoff" in diff
        (root / "web" / "util.js").unlink()
        assert "- 2-4\tfunction formatDate" in await service.anchor_diff(
            root, commit, "web/util.js", 50
        )
        assert "not in this repository" in await service.anchor_diff(
            root, "0" * 40, "app/retry.py", 50
        )
        with pytest.raises(BadArgument):
            await service.anchor_diff(root, commit, "../x.py", 50)
        with pytest.raises(BadArgument):
            await service.anchor_diff(root, "--output=/tmp/x", "app/retry.py", 50)
        outside = tmp_path / "plain"
        outside.mkdir()
        assert await service.head_commit(outside) == ""


async def test_crashed_parse_during_status_check_is_retried(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    async with standalone_service(home) as (service, _):
        targets = await anchored(service, root)
        write(root, {"app/retry.py": RETRY + "\n"})
        original = service.pool.parse_batch
        crashes = [1]

        async def crash_once(jobs: list[ParseJob]) -> list[ParseResult]:
            if crashes:
                crashes.pop()
                return [
                    ParseResult(skipped="parser worker crashed (exit status 137) and was replaced")
                    for _ in jobs
                ]
            return await original(jobs)

        monkeypatch.setattr(service.pool, "parse_batch", crash_once)
        assert [s.status for s in await service.target_states(root, targets)] == ["fresh"] * 5

        async def crash_always(jobs: list[ParseJob]) -> list[ParseResult]:
            return [
                ParseResult(skipped="parser worker timed out after 10 s and was replaced")
            ] * len(jobs)

        monkeypatch.setattr(service.pool, "parse_batch", crash_always)
        write(root, {"app/retry.py": RETRY + "\n\n"})
        with pytest.raises(Unavailable, match="app/retry.py could not be read"):
            await service.target_states(root, targets)


def test_digest_text_ignores_whitespace_and_comments() -> None:
    a = digest_text("rust", b"fn f(a: u32) -> u32 {\n    a + 1 // one\n}\n")
    b = digest_text("rust", b"/* doc */\nfn f(a: u32)->u32{ a+1 }\n")
    c = digest_text("rust", b"fn f(a: u32) -> u32 {\n    a + 2\n}\n")
    assert a == b != c
    assert digest_text("python", b"x = 'a  b'\n") != digest_text("python", b"x = 'ab'\n")


def test_each_symbols_slice_of_the_file_digests_like_the_symbol_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The outline digests every symbol from one normalised text of its file (sliced
    at sentinels); each must equal the digest of the symbol's own text normalised on
    its own (`digest.normal`), block markers, name placeholder and gap marks at the
    slice's ends included: in every language, and on variants of each case with
    whitespace, comment openers, brackets and control bytes put in or cut out
    (broken code too, and texts holding the gap-mark byte, which take the slow
    path). A gap mark of the text's own next to a symbol's name once did not."""
    import random

    from memtrio.actors.code import extract
    from memtrio.actors.code.digest import Span, Trivia, digest
    from test_code_languages import CASES

    seen: list[tuple[bytes, Trivia, list[Span], tuple[list[str], str]]] = []
    real = extract.digests

    def keep(src: bytes, trivia: Trivia, spans: list[Span]) -> tuple[list[str], str]:
        found = real(src, trivia, spans)
        seen.append((src, trivia, spans, found))
        return found

    monkeypatch.setattr(extract, "digests", keep)
    pieces = [" ", "\n", "\t", "\n    ", "\r\n", "#", "//", "/*", "*/", "--", "<!--", "-->"]
    pieces += ["x", "(", ")", "{", "}", ":", "'", '"', "é", "\x01"]
    rng = random.Random(33)
    for language, (_, source, _) in sorted(CASES.items()):
        for _ in range(30):
            data = bytearray(source.encode())
            for _ in range(rng.randint(0, 6)):
                at = rng.randint(0, len(data))
                if rng.random() < 0.3:
                    del data[at : at + rng.randint(1, 3)]
                else:
                    data[at:at] = rng.choice(pieces).encode()
            seen.clear()
            extract.outline(language, bytes(data))
            src, trivia, spans, (symbols, whole) = seen[0]
            alone = [digest(src, start, end, trivia, name) for start, end, name in spans]
            assert (symbols, whole) == (alone, digest(src, 0, len(src), trivia, None)), (
                language,
                bytes(data),
            )


async def test_a_write_does_not_wait_for_a_cold_index_past_find_wait(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first write in a large repository builds its code index: past `FIND_WAIT` the
    memory is stored without found anchors and a warning says why; the index goes on at
    the next call, which finds them."""
    from memtrio.actors.anchors import anchoring

    monkeypatch.setattr(anchoring, "FIND_WAIT", 0.5)
    root = make_repo(tmp_path / "repo", FILES)
    async with standalone_service(home) as (service, _):
        original = service.pool.parse_batch
        parsed = trio.Event()  # the parser's work done, which takes long here

        async def parse_slowly(jobs: list[ParseJob]) -> list[ParseResult]:
            await parsed.wait()  # a repository far larger than this one
            return await original(jobs)

        service.pool.parse_batch = parse_slowly  # type: ignore[method-assign]  # a slow pool
        repo = anchoring.Repo(service, root, "repo:test")
        warnings: list[str] = []
        started = time.monotonic()
        assert await anchoring.found(repo, "`RetryPolicy.backoff` doubles it", warnings) == []
        assert time.monotonic() - started < 5
        assert len(warnings) == 1 and "still being built" in warnings[0], warnings
        parsed.set()
        # The next call waits as a real one does: the 0.5 s above is too short for the rest
        # of the index on a loaded machine (this failed under a load of 12 on 2 cores).
        monkeypatch.setattr(anchoring, "FIND_WAIT", 30.0)
        later: list[str] = []
        targets = await anchoring.found(repo, "`RetryPolicy.backoff` doubles it", later)
        assert [(t.path, t.symbol) for t in targets] == [("app/retry.py", "RetryPolicy.backoff")]
        assert later == []
