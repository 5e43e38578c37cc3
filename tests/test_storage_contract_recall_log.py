"""The storage contract of the recall log and access counts (`interfaces.recall_log.RecallLog`),
on SQLite and on PostgreSQL (the ``direct`` fixture)."""

from __future__ import annotations

import json

from memtrio.actors.store.direct import Direct
from memtrio.actors.store.interfaces import StoreTx
from memtrio.actors.store.interfaces.recall_log import RecallEntry
from memtrio.actors.store.interfaces.upkeep import MemoryRow


def _memory(tx: StoreTx, mid: int) -> int:
    return tx.imports.add_memory(
        MemoryRow(
            id=mid,
            content=f"memory {mid}",
            memory_type="note",
            importance=0.5,
            created_at=1.0,
            updated_at=1.0,
            last_accessed_at=None,
            access_count=0,
        )  # fmt: skip
    )


def _entry(
    ts: float, kind: str = "recall", query: str = "q", ids: list[int] | None = None
) -> RecallEntry:
    ids = ids or []
    return RecallEntry(
        ts=ts, kind=kind, query=query, scopes=json.dumps(["global"]), ids=json.dumps(ids),
        scores=json.dumps([1.0] * len(ids)),
    )  # fmt: skip


def test_count_access_counts_each_call_and_keeps_the_last_time(direct: Direct) -> None:
    direct.write(lambda tx: [_memory(tx, 1), _memory(tx, 2)])
    direct.write(lambda tx: tx.recall_log.count_access(1, 10.5))
    direct.write(lambda tx: tx.recall_log.count_access(1, 11.25))
    direct.write(lambda tx: tx.recall_log.count_access(999, 12.0))  # missing: nothing, no error
    rows = {m.id: m for m in direct.read(lambda tx: list(tx.export.memories()))}
    assert (rows[1].access_count, rows[1].last_accessed_at) == (2, 11.25)
    assert (rows[2].access_count, rows[2].last_accessed_at) == (0, None)


def test_newest_is_newest_first_and_filters_by_kind(direct: Direct) -> None:
    def fill(tx: StoreTx) -> None:
        for i in range(5):
            tx.recall_log.append(_entry(float(i), "recall" if i % 2 == 0 else "inspect", f"q{i}"))

    direct.write(fill)
    assert [e.query for e in direct.read(lambda tx: tx.recall_log.newest(3))] == ["q4", "q3", "q2"]
    recalls = direct.read(lambda tx: tx.recall_log.newest(10, "recall"))
    assert [e.query for e in recalls] == ["q4", "q2", "q0"]
    assert direct.read(lambda tx: tx.recall_log.newest(10, "nothing")) == []
    assert direct.read(lambda tx: tx.recall_log.newest(0)) == []


def test_entries_stream_oldest_first_with_text_unchanged(direct: Direct) -> None:
    odd = ["50% off_under 'quoted' \"double\"", "ünïcödé 日本語 🧠", "a\\b", "", "%", "_"]
    entries = [_entry(float(i), query=q, ids=[i, i + 1]) for i, q in enumerate(odd)]
    direct.write(lambda tx: [tx.recall_log.append(e) for e in entries])
    assert direct.read(lambda tx: list(tx.recall_log.entries())) == entries


def test_append_new_skips_a_line_of_the_same_time_kind_and_query(direct: Direct) -> None:
    first = _entry(1.5, "recall", "Same")
    assert direct.write(lambda tx: tx.recall_log.append_new(first)) is True
    assert direct.write(lambda tx: tx.recall_log.append_new(first)) is False
    # A query that differs only by case, or another kind or time, is another line.
    for other in (
        _entry(1.5, "recall", "same"),
        _entry(1.5, "inspect", "Same"),
        _entry(2.5, "recall", "Same"),
    ):
        assert direct.write(lambda tx, e=other: tx.recall_log.append_new(e)) is True
    assert len(direct.read(lambda tx: tx.recall_log.newest(100))) == 4


def test_a_large_log_streams_whole(direct: Direct) -> None:
    entries = [_entry(float(i), query=f"q{i}") for i in range(1500)]
    direct.write(lambda tx: [tx.recall_log.append(e) for e in entries])
    assert [e.ts for e in direct.read(lambda tx: list(tx.recall_log.entries()))] == [
        float(i) for i in range(1500)
    ]
