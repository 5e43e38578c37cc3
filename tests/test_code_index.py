"""The code index with real parser worker processes: refresh, find, formats,
path rules, a corrupt index, and parser workers that crash or hang."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
import trio.testing
from gitrepo import make_repo, write
from memtrio.actors.code.checkout import checkout_root, resolve_path, show_path
from memtrio.actors.code.index import CodeIndex, index_path
from memtrio.actors.code.service import CODE, MAX_PARSE_BATCH, CodeService, _batches
from memtrio.actors.code.standalone import standalone_service
from memtrio.actors.code.tools import format_imports, format_matches, format_outline
from memtrio.protocol.errors import DomainError
from memtrio.supervisors.supervisor import Supervisor

FILES: dict[str, str | bytes] = {
    "lib/billing.ex": "defmodule MyApp.Billing do\n  def charge(amount), do: amount\n  def charge(a, b), do: a + b\nend\n",
    "lib/live.ex": "defmodule MyAppWeb.ConsentLive do\n  use Phoenix.LiveView\nend\n",
    "app/service.py": "import os\nfrom std.queue import Queue\n\n\ndef load_config(path):\n    return path\n\n\ndef load_all():\n    pass\n",
    "db/schema.sql": "CREATE TABLE public.users (id int);\n",
    "README.md": "# not source\n",
    "blob.py": b"\x00\x01binary",
}


@asynccontextmanager
async def running_service(
    home: Path, workers: int = 2, file_timeout: float = 10.0, max_files: int = 20000
) -> AsyncIterator[tuple[CodeService, Supervisor]]:
    """`standalone_service` and its parser workers' own supervisor (``code.parsers``)."""
    async with standalone_service(
        home, workers=workers, file_timeout=file_timeout, max_files=max_files, name="test"
    ) as (service, root_sup):
        yield service, root_sup.child("code.parsers")


async def test_refresh_reads_only_changed_files(tmp_path: Path, home: Path) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    (root / "link.py").symlink_to(root / "app" / "service.py")
    async with running_service(home) as (service, _):
        first = await service.refresh(root, want_skipped=True)
        assert (first.source_files, first.parsed) == (6, 5)  # the symlink is never read
        assert dict(first.skipped) == {"blob.py": "binary", "link.py": "symlink"}
        again = await service.refresh(root, want_skipped=True)
        assert again.parsed == 0
        write(
            root,
            {"app/service.py": "def renamed():\n    pass\n", "new.py": "class New:\n    pass\n"},
        )
        (root / "lib" / "live.ex").unlink()
        third = await service.refresh(root, want_skipped=True)
        assert third.parsed == 2
        language, coverage, rows = await service.file_outline(root, "app/service.py")
        assert (language, coverage, [r[1] for r in rows]) == ("python", "complete", ["renamed"])
        rows, total = await service.find(root, "ConsentLive", None, 20)
        assert (rows, total) == ([], 0)


async def test_find_symbol_ordering_and_kinds(tmp_path: Path, home: Path) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    async with running_service(home) as (service, _):
        rows, total = await service.find(root, "charge", None, 20)
        assert [(r[0], r[4]) for r in rows] == [
            ("lib/billing.ex", "charge/1"),
            ("lib/billing.ex", "charge/2"),
        ]
        rows, _ = await service.find(root, "consentlive", None, 20)
        assert [r[4] for r in rows] == ["MyAppWeb.ConsentLive"]
        rows, _ = await service.find(root, "users", None, 20)
        assert [(r[3], r[4]) for r in rows] == [("table", "public.users")]
        rows, total = await service.find(root, "load", None, 1)
        assert ([r[4] for r in rows], total) == (["load_config"], 2)  # prefixes, by path and line
        text = format_matches(root, rows, total, (0, 0), 20000)
        assert (
            text
            == "app/service.py:5-6\tfunction load_config\tdef load_config(path):\n1 of 2 matches; raise limit for more"
        )
        # imports only with kind, and "/query" suffixes only for imports
        assert (await service.find(root, "queue", None, 20))[1] == 0
        rows, _ = await service.find(root, "queue", "import", 20)
        assert [r[4] for r in rows] == ["std.queue"]
        rows, _ = await service.find(root, "Phoenix.LiveView", "import", 20)
        assert [r[4] for r in rows] == ["Phoenix.LiveView"]
        # stale and missing marks when the file changed after the refresh
        rows, total = await service.find(root, "load_config", None, 20)
        write(root, {"app/service.py": "# edited\n"})
        assert format_matches(root, rows, total, (0, 0), 20000) == (
            "app/service.py:5-6\tfunction load_config\tstale\tdef load_config(path):"
        )
        (root / "app" / "service.py").unlink()
        assert format_matches(root, rows, total, (0, 0), 20000).split("\t")[2] == "missing"


async def test_max_files_truncates_and_says_so(tmp_path: Path, home: Path) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    async with running_service(home, max_files=2) as (service, _):
        report = await service.refresh(root, want_skipped=True)
        assert report.truncated and (report.source_files, report.indexed) == (5, 2)
        rows, total = await service.find(root, "nothing-here", None, 20)
        text = format_matches(root, rows, total, service.truncation(root), service.max_files)
        assert (
            text
            == "truncated: 2 of 5 source files indexed ([code] max_files = 2); a definition may be missing"
        )


async def test_corrupt_index_is_recreated(tmp_path: Path, home: Path) -> None:
    path = index_path(home)
    path.write_bytes(b"this is not a sqlite database" * 100)
    index = CodeIndex(path)
    assert index.file_map(index.checkout_id("/x")) == {}
    index.close()
    assert path.name == "code-v2.sqlite"


@pytest.mark.parametrize("workers", [1, 2])
async def test_worker_crash_reports_the_file_and_indexes_the_rest(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    files = {f"m{i}.py": f"def f{i}():\n    pass\n" for i in range(8)}
    files["crash.py"] = "def boom():\n    pass\n"  # sorted first: the job behind it is requeued
    root = make_repo(tmp_path / "repo", files)
    monkeypatch.setenv("MEMTRIO_FAULTS", "code.parse:crash.py=exit")
    async with running_service(home, workers=workers) as (service, parsers):
        report = await service.refresh(root, want_skipped=True)
        assert report.skipped == [
            ("crash.py", "parser worker crashed (exit status 137) and was replaced")
        ]
        for i in range(8):
            rows, _ = await service.find(root, f"f{i}", None, 5)
            assert [r[0] for r in rows] == [f"m{i}.py"]
        assert sum(child["restarts"] for child in parsers.snapshot()) == 1
        # the replacement worker serves the next request
        _, coverage, rows = await service.file_outline(root, "m0.py")
        assert [r[1] for r in rows] == ["f0"]


async def test_worker_hang_is_killed_after_file_timeout(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {f"m{i}.py": f"def f{i}():\n    pass\n" for i in range(4)}
    files["hang.py"] = "def stuck():\n    pass\n"
    root = make_repo(tmp_path / "repo", files)
    monkeypatch.setenv("MEMTRIO_FAULTS", "code.parse:hang.py=hang")
    async with running_service(home, file_timeout=1.0) as (service, parsers):
        with trio.fail_after(20):
            report = await service.refresh(root, want_skipped=True)
        assert report.skipped == [("hang.py", "parser worker timed out after 1 s and was replaced")]
        assert report.indexed == 5
        rows, _ = await service.find(root, "f3", None, 5)
        assert [r[0] for r in rows] == ["m3.py"]
        assert sum(child["restarts"] for child in parsers.snapshot()) == 1


@pytest.mark.parametrize(
    ("fault", "why"),
    [
        ("exit", "parser worker crashed (exit status 137) and was replaced"),
        ("hang", "parser worker timed out after 1 s and was replaced"),
    ],
)
async def test_worker_lost_in_the_middle_of_a_batch_loses_only_that_file(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch, fault: str, why: str
) -> None:
    # 40 files on one worker go in batches of 10, 7, 5, ...: m15.py is the sixth of
    # the second batch, so files before and after it in that frame must be indexed.
    files = {f"m{i:02d}.py": f"def f{i}():\n    pass\n" for i in range(40)}
    root = make_repo(tmp_path / "repo", files)
    monkeypatch.setenv("MEMTRIO_FAULTS", f"code.parse:m15.py={fault}")
    async with running_service(home, workers=1, file_timeout=1.0) as (service, parsers):
        with trio.fail_after(30):
            report = await service.refresh(root, want_skipped=True)
        assert report.skipped == [("m15.py", why)]
        rows, _ = await service.find(root, "f", None, 100)
        assert sorted(r[0] for r in rows) == sorted(set(files) - {"m15.py"})
        assert sum(child["restarts"] for child in parsers.snapshot()) == 1


async def test_path_rules(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {"a/b.py": "x = 1\n"})
    outside = tmp_path / "outside.py"
    outside.write_text("y = 2\n")
    (root / "link.py").symlink_to(outside)
    (root / "dirlink").symlink_to(root / "a")
    assert resolve_path(root, "a/b.py") == "a/b.py"
    assert resolve_path(root, str(root / "a" / "b.py")) == "a/b.py"
    refusals = {
        "a/../a/b.py": "contains '..'",
        "link.py": "symlink",
        "dirlink/b.py": "symlink",
        str(outside): "outside the checkout",
        "a/missing.py": "no such file",
        "a": "not a regular file",
    }
    for path, message in refusals.items():
        with pytest.raises(DomainError, match=message):
            resolve_path(root, path)
    with pytest.raises(DomainError, match="absolute"):
        await checkout_root("repo", tmp_path)
    with pytest.raises(DomainError, match="not inside a Git checkout"):
        await checkout_root(str(tmp_path), tmp_path)
    assert await checkout_root(str(root / "a"), tmp_path) == root


def test_outline_and_imports_formats() -> None:
    rows = [
        ("import", "os", 1, 1, 0, "", ""),
        ("class", "A", 3, 9, 0, "", "class A(B):"),
        ("method", "f", 4, 5, 1, "A", "def f(self, x):"),
        ("method", "g", 7, 9, 1, "A", ""),
        ("function", "inner", 8, 9, 2, "g", "def inner(y):"),
    ]
    assert format_outline("p.py", "python", "complete", rows, 0, 2, None) == (
        "p.py\tpython\tcomplete\n1-1\timport os\n3-9\tclass A\tclass A(B):\nnext_offset 2 of 5"
    )
    assert format_outline("p.py", "python", "complete", rows, 2, 200, None) == (
        "p.py\tpython\tcomplete\n4-5\t  method f\tdef f(self, x):\n7-9\t  method g\n8-9\t    function inner\tdef inner(y):"
    )
    assert format_outline("p.py", "python", "complete", rows, 1, 1, 0) == (
        "p.py\tpython\tcomplete\n3-9\tclass A\tclass A(B):"
    )
    assert format_outline("p.py", "python", "complete", rows, 0, 1, 1).endswith(
        "next_offset 1 of 4"
    )
    assert format_imports("p.py", "python", "partial: syntax error at line 2", rows, 0, 200) == (
        "p.py\tpython\tpartial: syntax error at line 2\n1-1\tos"
    )
    assert show_path("a\tb.py") == '"a\\tb.py"'
    assert show_path("plain/ü.py") == "plain/ü.py"


def test_index_file_is_versioned(home: Path) -> None:
    assert index_path(home) == home / "code-v2.sqlite"
    assert not os.path.exists(home / "code.sqlite")


async def test_new_files_in_new_directories_are_found(tmp_path: Path, home: Path) -> None:
    root = make_repo(tmp_path / "repo", {"a.py": "def a():\n    pass\n", ".gitignore": "build/\n"})
    async with running_service(home) as (service, _):
        assert (await service.find(root, "fresh", None, 5))[1] == 0
        write(
            root,
            {
                "pkg/sub/fresh.py": "def fresh():\n    pass\n",
                "build/gen.py": "def fresh_gen():\n    pass\n",
            },
        )
        rows, total = await service.find(root, "fresh", None, 5)
        assert [r[0] for r in rows] == ["pkg/sub/fresh.py"]
        write(root, {".gitignore": ""})  # un-ignoring build/ changes what is listed
        rows, _ = await service.find(root, "fresh", None, 5)
        assert [r[0] for r in rows] == ["pkg/sub/fresh.py", "build/gen.py"]  # exact, then prefix
        (root / "pkg" / "sub" / "fresh.py").rename(root / "pkg" / "moved.py")
        rows, _ = await service.find(root, "fresh", None, 5)
        assert [r[0] for r in rows] == ["pkg/moved.py", "build/gen.py"]
        with pytest.raises(DomainError, match="unsupported file type"):
            await service.file_outline(root, ".gitignore")
        write(root, {"bin.py": b"\x00\x00"})
        with pytest.raises(DomainError, match="not indexed: binary"):
            await service.file_outline(root, "bin.py")


async def test_non_utf8_paths_are_left_out(tmp_path: Path, home: Path) -> None:
    root = make_repo(tmp_path / "repo", {"ok.py": "def ok():\n    pass\n"})
    (root / os.fsdecode(b"bad\xff.py")).write_text("def hidden():\n    pass\n")
    async with running_service(home) as (service, _):
        report = await service.refresh(root)
        assert (report.source_files, report.indexed) == (1, 1)


def test_progress_on_a_terminal_redraws_one_line_and_piped_writes_few() -> None:
    """`code index` reports through the CLI's one progress module (supervisors/progress.py)."""
    import io

    from memtrio.supervisors.progress import Progress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    screen = Terminal()
    with Progress("code index", 4, "files", stream=screen) as bar:
        bar.advance(1)
        bar.advance(3)  # the last one is always drawn
    shown = screen.getvalue()
    assert "\n" not in shown.rstrip("\n") and shown.count("\r") >= 2, shown  # redrawn in place
    assert "code index: 100%" in shown and "4/4" in shown and "files/s" in shown, shown

    log = io.StringIO()
    with Progress("code index", 4, "files", stream=log) as bar:  # every 5 s: nothing here
        bar.advance(4)
    assert log.getvalue() == ""


async def test_workers_that_cannot_start_leave_the_server_up(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import memtrio.actors.code.pool as pool_module

    root = make_repo(tmp_path / "repo", {"a.py": "def a():\n    pass\n"})
    monkeypatch.setattr(pool_module, "WORKER_MODULE", "memtrio.actors.code.no_such_worker")
    async with running_service(home, workers=1) as (service, _):
        assert service.pool.down is None  # no worker process is started before the first parse
        report = await service.refresh(root, want_skipped=True)
        assert service.pool.down is not None
        ((path, reason),) = report.skipped
        assert path == "a.py" and reason.startswith("parser workers are down (Escalation:")
        # not recorded as the file's fault: the next refresh tries it again
        assert (await service.refresh(root)).parsed == 1


async def test_damaged_pages_found_later_recreate_the_index(tmp_path: Path, home: Path) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    async with running_service(home) as (service, _):
        await service.refresh(root)
    path = index_path(home)
    page_size = 4096
    data = bytearray(path.read_bytes())
    data[page_size:] = b"\xa5" * (len(data) - page_size)  # keep the header and schema page only
    path.write_bytes(bytes(data))
    async with running_service(home) as (service, _):  # found when opening: recreated empty
        rows, _ = await service.find(root, "charge", None, 20)
        assert [r[4] for r in rows] == ["charge/1", "charge/2"]
        # damage found while serving: the call says so, the file is recreated, the next call works
        real_find = service.index.find

        def damaged(*args: object) -> object:
            service.index.find = real_find
            raise sqlite3.DatabaseError("database disk image is malformed")

        service.index.find = damaged
        with pytest.raises(DomainError, match="corrupt and has been recreated"):
            await service.find(root, "charge", None, 20)
        rows, _ = await service.find(root, "charge", None, 20)
        assert [r[4] for r in rows] == ["charge/1", "charge/2"]
        # other SQLite failures leave the file alone
        service.index.find = lambda *args: (_ for _ in ()).throw(
            sqlite3.OperationalError("disk I/O error")
        )
        with pytest.raises(DomainError, match="disk I/O error; retry later"):
            await service.find(root, "charge", None, 20)
        service.index.find = real_find
        assert (await service.refresh(root)).parsed == 0


def test_feature_unavailable_when_the_index_cannot_be_opened(home: Path) -> None:
    from memtrio.actors.code.feature import FEATURE
    from memtrio.supervisors import config
    from memtrio.supervisors.app import build_context
    from memtrio.supervisors.context import FeatureUnavailable

    index_path(home).mkdir()  # a directory where the index file should be
    app = build_context(config.load(home, env={}), home)
    with pytest.raises(FeatureUnavailable, match="cannot open the code index"):
        FEATURE.setup(app)
    assert app.find(CODE) is None and app.registry.get("find_symbol") is None
    off = build_context(config.load(home, env={"MEMTRIO_CODE": "off"}), home)
    with pytest.raises(FeatureUnavailable, match="disabled"):
        FEATURE.setup(off)


def _parser_processes() -> int:
    """Running parser worker processes started by this test process."""
    count = 0
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, NotADirectoryError):
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == os.getpid() and b"memtrio.actors.code.worker" in cmdline:
            count += 1
    return count


async def test_parser_processes_start_on_the_first_parse(tmp_path: Path, home: Path) -> None:
    root = make_repo(tmp_path / "repo", {"a.py": "def a():\n    pass\n"})
    async with running_service(home, workers=2) as (service, _):
        # Every task of the service has settled (a worker that started its process at boot
        # would be waiting on its READY frame by then).
        await trio.testing.wait_all_tasks_blocked(cushion=0.05)
        assert _parser_processes() == 0
        assert (await service.refresh(root)).parsed == 1
        assert _parser_processes() == 2


def test_parse_batches_cover_every_file_in_order_and_spread_a_small_refresh() -> None:
    todo = [(f"m{i}.py", "python", os.stat(".")) for i in range(2500)]
    batches = _batches(todo, 2)
    assert [job for batch in batches for job in batch] == todo
    assert max(map(len, batches)) == MAX_PARSE_BATCH
    assert [len(b) for b in batches[-3:]] == [1, 1, 1]  # the workers finish together
    assert [len(b) for b in _batches(todo[:9], 2)] == [1] * 9  # both workers get a share
