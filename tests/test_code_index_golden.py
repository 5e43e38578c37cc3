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
from pathlib import Path

from code_tree import GOLDEN, index_tree, tree_files
from gitrepo import make_repo, write
from memtrio.actors.code.extract import outline
from memtrio.actors.code.languages import language_for
from memtrio.actors.code.standalone import standalone_service
from memtrio.actors.code.symbols import qualified_names


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
        from code_tree import index_rows

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
