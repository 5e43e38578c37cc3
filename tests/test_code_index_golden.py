"""The code index of a fixed tree holds the rows it held before issue #42.

Issue #42 made the cold index cheaper (the parser workers' outline and digests,
the server's writes); none of that may change what the index holds. The tree
(`code_tree.tree_files`: every language, with comments, re-indented, doubled and
cut short, plus stress files) is indexed cold by parser worker processes and
every file row and symbol row (kind, names, lines, nesting, signature, qualified
name, digest) is compared with the rows the code before the change wrote
(``tests/data/code_index_golden.json``).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import trio
from code_tree import GOLDEN, index_rows, index_tree, tree_files
from gitrepo import make_repo, write
from memtrio.actors.code import index as index_module
from memtrio.actors.code.extract import outline
from memtrio.actors.code.index import CodeIndex
from memtrio.actors.code.languages import language_for
from memtrio.actors.code.standalone import standalone_service
from memtrio.actors.code.symbols import qualified_names

LOOKUP = ["symbols_digest", "symbols_lname", "symbols_qname", "symbols_tail"]


def _differences(got: dict[str, object], want: dict[str, object]) -> list[str]:
    out = [f"{path}: only in the index now" for path in sorted(set(got) - set(want))]
    out += [f"{path}: missing now" for path in sorted(set(want) - set(got))]
    for path in sorted(set(got) & set(want)):
        if got[path] != want[path]:
            out.append(f"{path}: {json.dumps(got[path])[:300]} != {json.dumps(want[path])[:300]}")
    return out


async def test_cold_index_holds_the_same_rows_as_before(tmp_path: Path, home: Path) -> None:
    root = make_repo(tmp_path / "tree", dict(tree_files()))
    want = json.loads(GOLDEN.read_text())
    got = await index_tree(root, home, workers=2)
    assert _differences(got, want) == []


async def test_refresh_of_changed_files_writes_the_same_rows_as_a_cold_index(
    tmp_path: Path, home: Path
) -> None:
    """Files re-parsed by a later refresh (replacing their rows) end with the rows a
    cold index of the same text writes."""
    files = tree_files()
    first = {path: text for path, text in files.items() if not path.startswith("python/")}
    first |= {
        path: "def placeholder():\n    pass\n" for path in files if path.startswith("python/")
    }
    root = make_repo(tmp_path / "tree", dict(first))
    async with standalone_service(home, workers=2, name="golden") as (service, _):
        await service.refresh(root)
        write(root, {path: text for path, text in files.items() if path.startswith("python/")})
        report = await service.refresh(root)
        assert report.parsed == sum(path.startswith("python/") for path in files)
        got = index_rows(service.index.path)
    assert _differences(got, json.loads(GOLDEN.read_text())) == []


def test_outline_in_process_matches_the_index() -> None:
    """The outline made in this process (the path the CLI and anchors use on blobs)
    gives the same symbols and digests as the index of the same file."""
    want = json.loads(GOLDEN.read_text())
    for path, text in tree_files().items():
        language = language_for(path)
        assert language is not None, path
        got = outline(language, text.encode())
        row = want[path]
        assert (got.coverage, got.digest) == (row["coverage"], row["digest"]), path
        qnames = qualified_names(got.symbols)
        assert [
            [s.kind, s.name, s.start, s.end, s.depth, s.parent, s.signature, q, s.digest]
            for s, q in zip(got.symbols, qnames, strict=True)
        ] == [[r[1], r[2], r[5], r[6], r[7], r[8], r[9], r[10], r[11]] for r in row["symbols"]], (
            path
        )


def _lookup_indexes(index_file: Path) -> list[str]:
    conn = sqlite3.connect(index_file)
    try:
        return [
            row[0]
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'symbols'"
                " AND name LIKE 'symbols_%' ORDER BY name"
            )
        ]
    finally:
        conn.close()


async def test_bulk_refresh_writes_the_same_rows_and_rebuilds_the_lookup_indexes(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refresh large enough to drop the symbols' lookup indexes while it writes
    (`BULK_FILES`) writes the same rows, and leaves the indexes in place: find
    answers from them (its query plan searches an index, no table scan)."""
    monkeypatch.setattr(index_module, "BULK_FILES", 10)
    root = make_repo(tmp_path / "tree", dict(tree_files()))
    async with standalone_service(home, workers=2, name="golden") as (service, _):
        await service.refresh(root)
        assert _lookup_indexes(service.index.path) == LOOKUP
        plan = service.index.conn.execute(
            "EXPLAIN QUERY PLAN SELECT * FROM symbols WHERE checkout = 1 AND lname = 'x'"
        ).fetchall()
        assert any("USING INDEX symbols_lname" in row[-1] for row in plan), plan
        matches = await service.find(root, "duplicate", None, 10)
        assert {m[0] for m in matches[0]} >= {"python/stress.py"}
        got = index_rows(service.index.path)
    assert _differences(got, json.loads(GOLDEN.read_text())) == []


async def test_cancelled_bulk_refresh_leaves_the_lookup_indexes(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large refresh cancelled half-way still builds the lookup indexes again; an
    index file left without them (a server killed half-way) gets them when opened."""
    monkeypatch.setattr(index_module, "BULK_FILES", 10)
    root = make_repo(tmp_path / "tree", dict(tree_files()))
    async with standalone_service(home, workers=2, name="golden") as (service, _):
        written = trio.Event()
        original = service.index.apply
        token = trio.lowlevel.current_trio_token()

        def apply_then_signal(*args: Any, **kwargs: Any) -> None:
            original(*args, **kwargs)
            token.run_sync_soon(written.set)

        service.index.apply = apply_then_signal  # type: ignore[method-assign]  # a spy
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(service.refresh, root)
                await written.wait()
                assert _lookup_indexes(service.index.path) == []  # dropped while it writes
                scope.cancel()
        assert _lookup_indexes(service.index.path) == LOOKUP
        service.index.drop_lookup_indexes()
        index_file = service.index.path
    assert _lookup_indexes(index_file) == []
    CodeIndex(index_file).close()
    assert _lookup_indexes(index_file) == LOOKUP
