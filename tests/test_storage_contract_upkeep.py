"""The storage contract of upkeep (`interfaces.upkeep.Upkeep`): counts, health, maintenance
steps, flush, and the export and import in bulk, on SQLite and on PostgreSQL (``direct``)."""

from __future__ import annotations

from typing import cast

import pytest
from memtrio.actors.store.backend import Capability
from memtrio.actors.store.direct import Direct
from memtrio.actors.store.domain.embeddings import Vec, put_vector
from memtrio.actors.store.interfaces import StoreTx
from memtrio.actors.store.interfaces.upkeep import EntityRow, FileUpkeep, MemoryRow, RelationRow

ODD = "50% off_under 'q' \"d\" \\ ünï 🧠"


def _memory(tx: StoreTx, mid: int, content: str = "", scopes: tuple[str, ...] = ()) -> int:
    got = tx.imports.add_memory(
        MemoryRow(
            id=mid,
            content=content or f"memory {mid}",
            memory_type="note",
            importance=0.25,
            created_at=100.0 + mid,
            updated_at=200.0,
            last_accessed_at=None,
            access_count=3,
        )  # fmt: skip
    )
    tx.imports.link_scopes("memory", got, list(scopes))
    return got


def _entity(tx: StoreTx, eid: int, name: str, scopes: tuple[str, ...] = ()) -> int:
    got = tx.imports.add_entity(
        EntityRow(
            id=eid,
            name=name,
            canonical_name=name.lower(),
            kind="thing",
            created_at=1.0,
            updated_at=2.0,
        )  # fmt: skip
    )
    tx.imports.link_scopes("entity", got, list(scopes))
    return got


def _relation(
    tx: StoreTx, rid: int, src: int, rtype: str, dst: int, scopes: tuple[str, ...] = ()
) -> int:
    got = tx.imports.add_relation(
        RelationRow(
            id=rid, source="", relation_type=rtype, target="", metadata='{"w": 1}', created_at=3.0
        ),
        src,
        dst,
    )
    tx.imports.link_scopes("relation", got, list(scopes))
    return got


def _graph(tx: StoreTx) -> None:
    a = _entity(tx, 1, "Alpha", ("global",))
    b = _entity(tx, 2, ODD, ("repo:a", "global"))
    r = _relation(tx, 1, a, "uses", b, ("global",))
    m = _memory(tx, 1, ODD, ("repo:a",))
    _memory(tx, 2, "second", ("global", "repo:b"))
    tx.imports.link_memory(m, [a, b], [r])
    tx.imports.link_memory(m, [a], [r])  # links already there are kept, no error


def test_counts_of_an_empty_and_a_filled_store(direct: Direct) -> None:
    empty = direct.read(lambda tx: tx.upkeep.counts())
    assert (empty.memories, empty.scopes, empty.entities, empty.edges) == (0, 0, 0, 0)
    direct.write(_graph)
    got = direct.read(lambda tx: tx.upkeep.counts())
    assert (got.memories, got.scopes, got.entities, got.edges, got.vectors, got.recall_log) == (
        2, 3, 2, 1, 0, 0,
    )  # fmt: skip


def test_health_of_a_sound_store(direct: Direct) -> None:
    direct.write(_graph)
    report = direct.write(lambda tx: tx.health.report())
    assert report["integrity"] == "ok" and report["fts_integrity"] == "ok"
    assert report["schema_version"] == report["latest_schema_version"]
    assert isinstance(report["database_bytes"], int) and report["database_bytes"] > 0
    assert direct.read(lambda tx: tx.export.record_version()) >= 6  # chunked vectors on


def _file(tx: StoreTx) -> FileUpkeep:
    steps = tx.file_upkeep
    assert steps is not None
    return steps


def test_file_upkeep_is_offered_by_capability(direct: Direct) -> None:
    """SQLite's maintenance steps are offered where the backend keeps a file of its own,
    and nowhere else (no stubs standing in for them)."""
    offered = direct.write(lambda tx: tx.file_upkeep is not None)
    assert offered is direct.backend.has(Capability.FILE_UPKEEP)


def test_maintenance_steps_end_and_report_numbers(direct: Direct) -> None:
    if not direct.backend.has(Capability.FILE_UPKEEP):
        pytest.skip("a database server keeps its own files: no file upkeep steps")
    direct.write(lambda tx: [_memory(tx, i, f"text number {i} {ODD}") for i in range(1, 60)])
    tables = direct.write(lambda tx: _file(tx).fts_tables())
    for table in tables:
        for _ in range(50):
            if direct.write(lambda tx, t=table: _file(tx).fts_merge_step(t, 16)):
                break
        else:
            pytest.fail(f"{table} never merged")
    with pytest.raises(ValueError, match="not a full-text index"):
        direct.write(lambda tx: _file(tx).fts_merge_step("memories; DROP TABLE memories", 16))
    assert direct.write(lambda tx: _file(tx).auto_vacuum()) in ("none", "full", "incremental")
    freed, left = direct.write(lambda tx: _file(tx).vacuum_step(8))
    assert freed >= 0 and left >= 0 and left == direct.write(lambda tx: _file(tx).free_pages())
    assert direct.read(lambda tx: tx.upkeep.counts()).memories == 59


def test_flush_deletes_only_what_is_only_writable(direct: Direct) -> None:
    direct.write(_graph)
    deleted = direct.write(lambda tx: tx.imports.flush(["repo:a", "global"], False))
    # memory 1 (repo:a) goes; memory 2 is also in repo:b; both entities and the relation
    # are of writable scopes only and nothing refers to them any more.
    assert (deleted.deleted_memories, deleted.deleted_entities, deleted.deleted_relations) == (
        1, 2, 1,
    )  # fmt: skip
    assert [m.content for m in direct.read(lambda tx: list(tx.export.memories()))] == ["second"]


def test_flush_where_no_writable_scope_exists_deletes_nothing(direct: Direct) -> None:
    direct.write(_graph)
    deleted = direct.write(lambda tx: tx.imports.flush(["repo:none", "also-none"], False))
    assert (deleted.deleted_memories, deleted.deleted_entities, deleted.deleted_relations) == (
        0, 0, 0,
    )  # fmt: skip
    # Scope names are exact: "GLOBAL" is not "global".
    deleted = direct.write(lambda tx: tx.imports.flush(["GLOBAL", "REPO:A"], False))
    assert deleted.deleted_memories == 0
    assert direct.write(lambda tx: tx.imports.flush([], False)).deleted_memories == 0
    everything = direct.write(lambda tx: tx.imports.flush([], True))
    assert everything.deleted_memories == 2 and everything.deleted_entities == 2
    assert direct.read(lambda tx: tx.upkeep.counts()).scopes == 0


def test_export_streams_every_row_with_its_links(direct: Direct) -> None:
    direct.write(_graph)
    scopes = direct.read(lambda tx: [(s.id, s.name) for s in tx.export.scopes()])
    assert [n for _, n in scopes] == ["global", "repo:a", "repo:b"]  # by id: as created
    assert [i for i, _ in scopes] == sorted(i for i, _ in scopes)
    entities = direct.read(lambda tx: list(tx.export.entities()))
    assert [(e.id, e.name, e.scopes) for e in entities] == [
        (1, "Alpha", ["global"]),
        (2, ODD, ["global", "repo:a"]),
    ]
    [rel] = direct.read(lambda tx: list(tx.export.relations()))
    assert (rel.source, rel.relation_type, rel.target, rel.metadata) == (
        "Alpha",
        "uses",
        ODD,
        '{"w": 1}',
    )
    memories = direct.read(lambda tx: list(tx.export.memories()))
    assert [m.id for m in memories] == [1, 2]
    assert memories[0].content == ODD and memories[0].scopes == ["repo:a"]
    assert memories[0].entities == sorted(["Alpha", ODD])
    assert memories[0].relations == [["Alpha", "uses", ODD]]
    assert (memories[1].scopes, memories[1].entities, memories[1].access_count) == (
        ["global", "repo:b"], [], 3,
    )  # fmt: skip


def test_export_of_vectors_joins_every_window_and_skips_vanished_rows(direct: Direct) -> None:
    direct.write(_graph)
    windows = Vec(b"\x00\x00\x80?" + b"\x00\x00\x00@" + b"\x00\x00@@", 1, "m", "r")
    # TRANSITIONAL: vectors are written through the vectors concept's module.
    direct.write(lambda tx: put_vector(tx, "memory", 1, windows))
    direct.write(lambda tx: put_vector(tx, "entity", 2, Vec(b"\x00\x00\x80?", 1, "m", "r")))
    direct.write(lambda tx: put_vector(tx, "relation", 1, Vec(b"\x00\x00\x80?", 1, "m", "r")))
    got = direct.read(lambda tx: [(v.kind, v.key, v.vec) for v in tx.export.vectors()])
    assert got == [
        ("entity", ODD, b"\x00\x00\x80?"),
        ("memory", 1, windows.data),
        ("relation", ["Alpha", "uses", ODD], b"\x00\x00\x80?"),
    ]


def test_import_ids_names_and_marks(direct: Direct) -> None:
    direct.write(_graph)
    assert direct.read(lambda tx: tx.imports.id_free("memories", 1)) is False
    assert direct.read(lambda tx: tx.imports.id_free("memories", 3)) is True
    assert direct.read(lambda tx: tx.imports.next_id("memories", 0)) == 3
    assert direct.read(lambda tx: tx.imports.next_id("memories", 40)) == 41
    # A deleted id is never given again: the high-water mark stays.
    direct.write(lambda tx: _memory(tx, 9))
    direct.write(lambda tx: tx.imports.flush(["nobody"], False))
    direct.write(lambda tx: tx.imports.flush([], True))
    assert direct.read(lambda tx: tx.imports.next_id("memories", 0)) == 10
    with pytest.raises(ValueError):
        direct.read(lambda tx: tx.imports.next_id("scopes; --", 0))  # type: ignore[arg-type]


def test_import_lookups_are_exact(direct: Direct) -> None:
    direct.write(_graph)
    assert direct.read(lambda tx: tx.imports.entity_id("Alpha")) == 1
    assert direct.read(lambda tx: tx.imports.entity_id("alpha")) is None  # names are exact
    assert direct.read(lambda tx: tx.imports.entity_id(ODD)) == 2
    assert direct.read(lambda tx: tx.imports.entity_id("Alph%")) is None
    assert direct.read(lambda tx: tx.imports.relation_id(1, "uses", 2)) == 1
    assert direct.read(lambda tx: tx.imports.relation_id(2, "uses", 1)) is None
    assert direct.read(lambda tx: tx.imports.relation_id(1, "USES", 2)) is None
    assert direct.read(lambda tx: tx.imports.memory_present(1, ODD, 101.0)) is True
    assert direct.read(lambda tx: tx.imports.memory_present(1, ODD.upper(), 101.0)) is False
    assert direct.read(lambda tx: tx.imports.memory_present(1, ODD, 102.0)) is False
    assert direct.read(lambda tx: tx.imports.memory_present(77, ODD, 101.0)) is False


def test_add_scope_is_exact_and_idempotent(direct: Direct) -> None:
    first = direct.write(lambda tx: tx.imports.add_scope("Repo:X"))
    assert direct.write(lambda tx: tx.imports.add_scope("Repo:X")) == first
    assert direct.write(lambda tx: tx.imports.add_scope("repo:x")) != first
    direct.write(lambda tx: _memory(tx, 1, scopes=("Repo:X", "Repo:X", ODD)))
    direct.write(lambda tx: tx.imports.link_scopes("memory", 1, ["Repo:X"]))  # kept, no error
    [memory] = direct.read(lambda tx: list(tx.export.memories()))
    assert memory.scopes == sorted(["Repo:X", ODD])
    assert direct.read(lambda tx: tx.upkeep.counts()).scopes == 3


def test_data_version_moves_when_another_connection_commits(direct: Direct) -> None:
    before = direct.read(lambda tx: tx.upkeep.data_version())
    direct.write(lambda tx: _memory(tx, 1))
    assert direct.read(lambda tx: tx.upkeep.data_version()) != before
    if direct.backend.has(Capability.FILE_UPKEEP):
        # A checkpoint cannot run inside a write transaction: the maintenance actor runs it
        # on a connection of its own, outside the StoreWriter's (here: the read connection).
        point = direct.read(lambda tx: _file(cast(StoreTx, tx)).checkpoint())
        assert point.busy in (True, False) and point.wal_frames >= 0
