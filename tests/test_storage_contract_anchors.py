"""The storage contract of code anchors (`interfaces.anchors`), driven directly on SQLite and
on PostgreSQL: set/of/at/anchored/count, replace semantics, scope filtering, the limits
(nothing written on bad input), the cascade on delete, and export/import with anchors.
A store of the previous schema and `memtrio migrate` are tests/test_anchor_migration.py.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from memtrio.actors.memory import transfer
from memtrio.actors.store.direct import Direct
from memtrio.actors.store.interfaces import StoreTx
from memtrio.actors.store.interfaces.anchors import (
    MAX_ANCHOR_PATH,
    MAX_ANCHOR_SYMBOL,
    MAX_ANCHORS,
    Anchor,
)
from memtrio.protocol.errors import BadArgument, LimitExceeded, NotFound

A = "repo:/home/a"
B = "repo:/home/b"
SHA = "0123456789abcdef0123456789abcdef01234567"


def anchor(path: str = "pkg/retry.py", symbol: str = "RetryPolicy.backoff", **kw: Any) -> Anchor:
    fields: dict[str, Any] = {
        "kind": "method" if symbol else "file",
        "commit": SHA,
        "digest": "sha256:" + "ab" * 32,
        "written_at": 1_700_000_000.5,
    }
    fields.update(kw)
    return Anchor(path=path, symbol=symbol, **fields)


def scope(direct: Direct, name: str) -> int:
    return direct.write(lambda tx: tx.scopes.ensure(name))


def memory(direct: Direct, scopes: list[int], content: str = "a fact") -> int:
    return direct.write(lambda tx: tx.memories.insert(content, "note", 0.5, 1000.0, scopes))


def put(direct: Direct, memory_id: int, anchors: list[Anchor]) -> None:
    direct.write(lambda tx: tx.anchors.set(memory_id, anchors))


def read(direct: Direct, op: Callable[[StoreTx], Any]) -> Any:
    return direct.read(op)


# -- set / of / count ----------------------------------------------------------------------


def test_anchors_read_back_exactly_in_the_order_they_were_set(direct: Direct) -> None:
    a = scope(direct, A)
    mid = memory(direct, [a])
    given = [
        anchor("z/last.py", "Zed"),
        anchor("pkg/retry.py", "RetryPolicy.backoff"),
        anchor('docs/é ü\'s "q" 100%_x.md', "", kind="file", commit=""),
        anchor(
            "pkg/retry.py", "retrypolicy.backoff", written_at=0.0
        ),  # another symbol: case counts
    ]
    put(direct, mid, given)
    assert read(direct, lambda tx: tx.anchors.of([mid])) == {mid: given}
    assert read(direct, lambda tx: tx.anchors.count()) == 4


def test_set_replaces_every_anchor_and_an_empty_list_clears_them(direct: Direct) -> None:
    mid = memory(direct, [scope(direct, A)])
    put(direct, mid, [anchor("a.py", "f"), anchor("b.py", "g")])
    put(direct, mid, [anchor("c.py", "h")])
    assert read(direct, lambda tx: tx.anchors.of([mid])) == {mid: [anchor("c.py", "h")]}
    put(direct, mid, [])
    assert read(direct, lambda tx: tx.anchors.of([mid])) == {}
    assert read(direct, lambda tx: tx.anchors.count()) == 0


def test_of_leaves_out_memories_without_anchors_and_reads_any_number_of_ids(direct: Direct) -> None:
    a = scope(direct, A)
    ids = direct.write(
        lambda tx: [tx.memories.insert(f"m{i}", "note", 0.5, 1.0, [a]) for i in range(1200)]
    )
    direct.write(lambda tx: [tx.anchors.set(i, [anchor(f"f{i}.py", "")]) for i in ids[::2]])
    got = read(direct, lambda tx: tx.anchors.of([*ids, 10**30, -5, 0]))
    assert sorted(got) == ids[::2]
    assert got[ids[2]] == [anchor(f"f{ids[2]}.py", "")]


def test_a_repeated_path_and_symbol_is_kept_once_its_first(direct: Direct) -> None:
    mid = memory(direct, [scope(direct, A)])
    put(direct, mid, [anchor(digest="one"), anchor("x.py", ""), anchor(digest="two")])
    assert read(direct, lambda tx: tx.anchors.of([mid])) == {
        mid: [anchor(digest="one"), anchor("x.py", "")]
    }


def test_anchors_of_a_memory_that_does_not_exist_are_refused(direct: Direct) -> None:
    with pytest.raises(NotFound, match="memory 4242 does not exist"):
        put(direct, 4242, [anchor()])
    with pytest.raises(NotFound):
        put(direct, 2**70, [anchor()])
    assert read(direct, lambda tx: tx.anchors.count()) == 0


# -- at / anchored: found by code, within the reader's scopes -------------------------------


def test_at_finds_memories_by_path_or_exact_symbol_ascending_once_each(direct: Direct) -> None:
    a = scope(direct, A)
    m1, m2, m3, m4 = (memory(direct, [a]) for _ in range(4))
    put(direct, m1, [anchor("pkg/retry.py", "RetryPolicy.backoff")])
    put(direct, m2, [anchor("pkg/config.py", "load"), anchor("pkg/retry.py", "")])
    put(direct, m3, [anchor("other/retry.py", "RetryPolicy.backoff")])
    put(direct, m4, [anchor("pkg/Retry.py", "retrypolicy.BACKOFF")])

    def at(paths: list[str], symbols: list[str]) -> list[int]:
        return read(direct, lambda tx: tx.anchors.at(paths, symbols, [a]))

    assert at(["pkg/retry.py"], []) == [m1, m2]
    assert at([], ["RetryPolicy.backoff"]) == [m1, m3]
    assert at(["pkg/config.py"], ["RetryPolicy.backoff"]) == [m1, m2, m3]
    assert at(["pkg/retry.py", "pkg/retry.py"], ["RetryPolicy.backoff"]) == [m1, m2, m3]
    assert at([], [""]) == []  # a whole-file anchor is found by its path
    assert at(["pkg/%.py", "pkg/_etry.py", "PKG/RETRY.PY"], ["%", "RetryPolicy.%"]) == []
    assert at([], []) == []
    assert at([f"p{i}.py" for i in range(2000)] + ["pkg/config.py"], []) == [m2]


def test_at_with_a_name_no_anchor_can_hold_finds_nothing_and_fails_nothing(
    direct: Direct,
) -> None:
    a = scope(direct, A)
    mid = memory(direct, [a])
    put(direct, mid, [anchor()])
    odd = ["pkg/retry.py\x00", "\ud800", "x" * (MAX_ANCHOR_PATH + 1), "a\nb", ""]
    assert read(direct, lambda tx: tx.anchors.at(odd, odd, [a])) == []
    assert read(direct, lambda tx: tx.anchors.at([*odd, "pkg/retry.py"], odd, [a])) == [mid]


def test_at_and_anchored_never_return_a_memory_of_another_scope(direct: Direct) -> None:
    a, b, g = scope(direct, A), scope(direct, B), scope(direct, "global")
    mine = memory(direct, [a])
    shared = memory(direct, [b, a])
    theirs = memory(direct, [b])
    unscoped = memory(direct, [])
    for mid in (mine, shared, theirs, unscoped):
        put(direct, mid, [anchor()])
    assert read(direct, lambda tx: tx.anchors.at(["pkg/retry.py"], [], [a])) == [mine, shared]
    assert read(direct, lambda tx: tx.anchors.at([], ["RetryPolicy.backoff"], [b])) == [
        shared,
        theirs,
    ]
    assert read(direct, lambda tx: tx.anchors.at(["pkg/retry.py"], [], [g])) == []
    assert read(direct, lambda tx: tx.anchors.at(["pkg/retry.py"], [], [])) == []
    assert read(direct, lambda tx: tx.anchors.anchored([a], 0, 100)) == [mine, shared]
    assert read(direct, lambda tx: tx.anchors.anchored([g], 0, 100)) == []
    assert read(direct, lambda tx: tx.anchors.anchored([], 0, 100)) == []


def test_anchored_pages_through_the_scope_s_anchored_memories(direct: Direct) -> None:
    a = scope(direct, A)
    ids = [memory(direct, [a]) for _ in range(7)]
    for mid in ids:
        if mid != ids[3]:
            put(direct, mid, [anchor("a.py", "f"), anchor("b.py", "g")])
    with_anchors = [i for i in ids if i != ids[3]]

    def page(after: int, limit: int) -> list[int]:
        return read(direct, lambda tx: tx.anchors.anchored([a], after, limit))

    assert page(0, 4) == with_anchors[:4]
    assert page(with_anchors[3], 4) == with_anchors[4:]
    assert page(with_anchors[-1], 4) == []
    assert page(0, 0) == [] and page(0, -1) == []
    assert page(-(2**70), 2**70) == with_anchors
    assert page(2**70, 10) == []


# -- limits: refused, naming the rule; nothing written --------------------------------------


BAD: list[tuple[str, Anchor, type[Exception], str]] = [
    ("long path", anchor("p/" + "x" * MAX_ANCHOR_PATH), LimitExceeded, "at most 1,024"),
    ("long symbol", anchor(symbol="s" * (MAX_ANCHOR_SYMBOL + 1)), LimitExceeded, "at most 512"),
    ("empty path", anchor(""), BadArgument, "`path` is empty"),
    ("absolute", anchor("/etc/passwd"), BadArgument, "repository-relative"),
    ("drive", anchor("C:/x.py"), BadArgument, "repository-relative"),
    ("backslash", anchor("..\\..\\x.py"), BadArgument, "repository-relative"),
    ("dotdot", anchor("pkg/../../etc/passwd"), BadArgument, "`..` segment"),
    ("dot", anchor("./pkg/x.py"), BadArgument, "`..` segment"),
    ("double slash", anchor("pkg//x.py"), BadArgument, "empty"),
    ("trailing slash", anchor("pkg/"), BadArgument, "empty"),
    ("nul", anchor("pkg/x\x00.py"), BadArgument, "control character"),
    ("newline symbol", anchor(symbol="f\ng"), BadArgument, "control character"),
    ("surrogate", anchor("pkg/\ud800.py"), BadArgument, "lone surrogate"),
    ("empty kind", anchor(kind=""), BadArgument, "`kind` is empty"),
    ("long kind", anchor(kind="k" * 65), LimitExceeded, "at most 64"),
    ("option commit", anchor(commit="--output=/tmp/x"), BadArgument, "hex digits"),
    ("upper commit", anchor(commit=SHA.upper()), BadArgument, "hex digits"),
    ("long commit", anchor(commit="a" * 129), BadArgument, "hex digits"),
    ("spaced digest", anchor(digest="a b"), BadArgument, "printable ASCII"),
    ("long digest", anchor(digest="d" * 129), BadArgument, "printable ASCII"),
    ("nan time", anchor(written_at=float("nan")), BadArgument, "epoch seconds"),
    ("inf time", anchor(written_at=float("inf")), BadArgument, "epoch seconds"),
    ("negative time", anchor(written_at=-1.0), BadArgument, "epoch seconds"),
]


@pytest.mark.parametrize(("case", "bad", "error", "says"), BAD, ids=[c[0] for c in BAD])
def test_a_malformed_anchor_is_refused_and_the_memory_keeps_its_anchors(
    direct: Direct, case: str, bad: Anchor, error: type[Exception], says: str
) -> None:
    mid = memory(direct, [scope(direct, A)])
    put(direct, mid, [anchor("kept.py", "")])
    with pytest.raises(error, match=r"code\[1\]") as raised:
        put(direct, mid, [anchor(), bad])
    assert says in str(raised.value)
    assert read(direct, lambda tx: tx.anchors.of([mid])) == {mid: [anchor("kept.py", "")]}


def test_more_anchors_than_the_limit_are_refused_naming_it(direct: Direct) -> None:
    mid = memory(direct, [scope(direct, A)])
    enough = [anchor(f"f{i}.py", "") for i in range(MAX_ANCHORS)]
    put(direct, mid, enough)
    with pytest.raises(LimitExceeded, match=f"at most {MAX_ANCHORS}"):
        put(direct, mid, [*enough, anchor("one-more.py", "")])
    assert read(direct, lambda tx: tx.anchors.of([mid]))[mid] == enough
    # the same anchor repeated is one anchor, not more than the limit
    put(direct, mid, [anchor()] * (MAX_ANCHORS + 5))
    assert read(direct, lambda tx: tx.anchors.count()) == 1


def test_the_longest_path_and_symbol_allowed_are_stored_and_found(direct: Direct) -> None:
    a = scope(direct, A)
    mid = memory(direct, [a])
    rng = random.Random(33)  # 4-byte UTF-8 characters that do not compress: 4,090 bytes,
    path = "d/" + "".join(chr(rng.randrange(0x10000, 0x2FFFF)) for _ in range(MAX_ANCHOR_PATH - 2))
    symbol = "".join(chr(rng.randrange(0x10000, 0x2FFFF)) for _ in range(MAX_ANCHOR_SYMBOL))
    # (past what a PostgreSQL B-tree entry may hold)
    put(direct, mid, [anchor(path, symbol)])
    assert read(direct, lambda tx: tx.anchors.at([path], [], [a])) == [mid]
    assert read(direct, lambda tx: tx.anchors.at([], [symbol], [a])) == [mid]


# -- the anchors go with their memory ----------------------------------------------------------


def test_deleting_a_memory_deletes_its_anchors(direct: Direct) -> None:
    a = scope(direct, A)
    gone, kept = memory(direct, [a]), memory(direct, [a])
    put(direct, gone, [anchor(), anchor("x.py", "")])
    put(direct, kept, [anchor()])
    assert direct.write(lambda tx: tx.memories.delete(gone))
    assert read(direct, lambda tx: tx.anchors.of([gone, kept])) == {kept: [anchor()]}
    assert read(direct, lambda tx: tx.anchors.at(["pkg/retry.py"], [], [a])) == [kept]
    assert read(direct, lambda tx: tx.anchors.count()) == 1


def test_a_flush_of_a_scope_deletes_its_memories_anchors_only(direct: Direct) -> None:
    a, b = scope(direct, A), scope(direct, B)
    mine, theirs = memory(direct, [a]), memory(direct, [b])
    put(direct, mine, [anchor()])
    put(direct, theirs, [anchor()])
    direct.write(lambda tx: tx.imports.flush([A], everything=False))
    assert read(direct, lambda tx: tx.anchors.of([mine, theirs])) == {theirs: [anchor()]}
    direct.write(lambda tx: tx.imports.flush([], everything=True))
    assert read(direct, lambda tx: tx.anchors.count()) == 0


def test_the_store_counts_its_anchors(direct: Direct) -> None:
    mid = memory(direct, [scope(direct, A)])
    put(direct, mid, [anchor(), anchor("x.py", "")])
    assert read(direct, lambda tx: tx.upkeep.counts()).anchors == 2


def test_stats_counts_the_anchors_of_the_memories_a_reader_sees(direct: Direct) -> None:
    a, b = scope(direct, A), scope(direct, B)
    put(direct, memory(direct, [a]), [anchor(), anchor("x.py", "")])
    put(direct, memory(direct, [b]), [anchor()])
    put(direct, memory(direct, []), [anchor("y.py", "")])  # unscoped: seen everywhere
    assert read(direct, lambda tx: tx.memories.counts()).anchors == 4
    assert read(direct, lambda tx: tx.memories.visible_counts([a])).anchors == 3
    assert read(direct, lambda tx: tx.memories.visible_counts([b])).anchors == 2


# -- export / import -------------------------------------------------------------------------


def export(direct: Direct) -> list[str]:
    return direct.read(
        lambda tx: [json.dumps(r, ensure_ascii=False) for r in transfer.export_lines(tx)]
    )


def test_an_export_with_anchors_imports_with_them(direct: Direct, tmp_path: Path) -> None:
    a = scope(direct, A)
    mid, bare = memory(direct, [a], "anchored"), memory(direct, [a], "bare")
    given = [anchor(), anchor("docs/x.md", "", commit="", written_at=3.25)]
    put(direct, mid, given)
    lines = export(direct)
    records = [json.loads(line) for line in lines]
    assert records[0]["version"] == transfer.VERSION == 3
    by_id = {r["id"]: r for r in records if r["type"] == "memory"}
    assert "anchors" not in by_id[bare]  # a memory without anchors: its line as before
    target = Direct(tmp_path / "target.sqlite", None)
    try:
        added = target.write(lambda tx: transfer.import_records(tx, transfer.parse_lines(lines)))
        assert added["memories"] == 2
        assert target.read(lambda tx: tx.anchors.of([mid, bare])) == {mid: given}
        again = export(target)
        assert again[1:] == lines[1:]  # the same lines, but for the header's time
    finally:
        target.close()


def test_an_export_of_the_previous_format_still_imports(direct: Direct) -> None:
    old = [
        {"type": "header", "format": "memtrio-export", "version": 2, "schema_version": 7},
        {"type": "scope", "id": 1, "name": A},
        {"type": "memory", "id": 5, "content": "old", "memory_type": "note", "importance": 0.5,
         "created_at": 1.0, "updated_at": 1.0, "scopes": [A]},
    ]  # fmt: skip
    checked = transfer.parse_lines([json.dumps(r) for r in old])
    added = direct.write(lambda tx: transfer.import_records(tx, checked))
    assert added["memories"] == 1
    assert read(direct, lambda tx: tx.anchors.count()) == 0


def _memory_line(anchors: list[dict[str, Any]]) -> list[str]:
    return [
        json.dumps({"type": "header", "format": "memtrio-export", "version": 3, "schema_version": 8}),
        json.dumps(
            {"type": "memory", "id": 5, "content": "x", "memory_type": "note", "importance": 0.5,
             "created_at": 1.0, "updated_at": 1.0, "anchors": anchors}
        ),
    ]  # fmt: skip


GOOD = {
    "path": "a.py",
    "symbol": "f",
    "kind": "function",
    "commit": "",
    "digest": "d",
    "written_at": 1.0,
}


@pytest.mark.parametrize(
    ("anchors", "says"),
    [
        ([{**GOOD, "path": "../../etc/passwd"}], "line 2: anchors[0]: `path`"),
        ([{**GOOD, "commit": "-x"}], "line 2: anchors[0]: `commit`"),
        ([{**GOOD, "extra": 1}], "unknown field `extra`"),
        ([{**GOOD, "path": f"f{i}.py"} for i in range(MAX_ANCHORS + 1)], "anchors"),
        ([{k: v for k, v in GOOD.items() if k != "digest"}], "missing required field `digest`"),
    ],
    ids=["traversal", "commit", "unknown field", "too many", "missing field"],
)
def test_an_import_with_a_bad_anchor_is_refused_whole_naming_the_line(
    direct: Direct, anchors: list[dict[str, Any]], says: str
) -> None:
    with pytest.raises(transfer.ImportRefused, match="line 2") as raised:
        transfer.parse_lines(_memory_line(anchors))
    assert says in str(raised.value)
    assert read(direct, lambda tx: tx.memories.counts().memories) == 0
