"""`memtrio import`: the tools' limits, typed records, and hostile files refused whole.

Every refusal is one line on stderr (exit 1, no traceback) naming the line and
the rule, and leaves every table of the store as it was. The CLI runs in
process (``memtrio.supervisors.cli.main``), as in tests/test_memory_cli.py.
"""

from __future__ import annotations

import io
import json
import os
import sqlite3
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import zygote
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memtrio.actors.memory import transfer
from memtrio.actors.store.domain import limits
from memtrio.actors.store.tooling.import_file import MAX_LINE_BYTES
from memtrio.supervisors.cli import main

GLOBAL = "global"


@pytest.fixture
def repo(cli_checkout: Path) -> Path:
    """A git checkout as the current directory, a store in ``tmp_path/home`` holding one memory."""
    assert main(["remember", "a memory that was there before", "--entity", "before"]) == 0
    return cli_checkout


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def snapshot() -> dict[str, list[str]]:
    """Every row of every table of the store (``MEMTRIO_HOME``)."""
    conn = sqlite3.connect(Path(os.environ["MEMTRIO_HOME"]) / "memtrio.sqlite")
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {t: sorted(map(repr, conn.execute(f'SELECT * FROM "{t}"'))) for t in tables}
    finally:
        conn.close()


def refused(capsys: pytest.CaptureFixture[str], path: Path | str, *flags: str) -> str:
    """Import ``path``: it must be refused in one line with nothing changed; returns the line."""
    before = snapshot()
    code, out, err = run(capsys, "import", str(path), *flags)
    assert code == 1, (out, err)
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith("memtrio: import ") and err.rstrip().endswith("nothing was imported"), err
    assert snapshot() == before
    return err


def jline(record: Any) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def entity(name: str = "Alice", kind: str = "person", observations: Any = ()) -> dict[str, Any]:
    return {"type": "entity", "name": name, "entityType": kind, "observations": list(observations)}


def relation(src: str = "Alice", dst: str = "Acme", rtype: str = "works_at") -> dict[str, Any]:
    return {"type": "relation", "from": src, "to": dst, "relationType": rtype}


HEADER = {"type": "header", "format": transfer.FORMAT, "version": 1, "schema_version": 5}


def m_entity(i: int, name: str | None = None, **over: Any) -> dict[str, Any]:
    name = name if name is not None else f"E{i}"
    return {
        "type": "entity", "id": i, "name": name, "canonical_name": name.casefold(), "kind": "entity",
        "created_at": 1.0, "updated_at": 1.0, "scopes": [GLOBAL], **over,
    }  # fmt: skip


def m_relation(i: int, src: str = "e1", dst: str = "e2", **over: Any) -> dict[str, Any]:
    return {
        "type": "relation", "id": i, "source": src, "relation_type": "uses", "target": dst,
        "metadata": "{}", "created_at": 1.0, "scopes": [GLOBAL], **over,
    }  # fmt: skip


def m_memory(i: int, content: str = "imported memory", **over: Any) -> dict[str, Any]:
    return {
        "type": "memory", "id": i, "content": content, "memory_type": "observation", "importance": 0.0,
        "created_at": 1.0, "updated_at": 1.0, "last_accessed_at": None, "access_count": 0,
        "scopes": [GLOBAL], "entities": [], "relations": [], **over,
    }  # fmt: skip


def memtrio_file(*records: dict[str, Any]) -> str:
    base = [HEADER, {"type": "scope", "id": 1, "name": GLOBAL}, m_entity(1), m_entity(2)]
    return "\n".join(jline(r) for r in [*base, *records]) + "\n"


# -- defect 3: the tools' limits -----------------------------------------------------------

TOO_LONG_NAME = "n" * (limits.MAX_NAME_BYTES + 1)

REFERENCE_OVER_LIMIT = {
    "observation": (
        [entity(), entity("Bob", observations=["x" * (limits.MAX_OBSERVATION_BYTES + 1)])],
        "line 2: observations[0]: the observation is 65,537 bytes; observations are limited to 65,536 bytes",
    ),
    "observation in multi-byte characters": (
        [entity(observations=["é" * (limits.MAX_OBSERVATION_BYTES // 2 + 1)])],
        "observations are limited to 65,536 bytes",
    ),
    "entity name": ([entity(TOO_LONG_NAME)], "entity names are limited to 1,024 bytes"),
    "blank entity name": ([entity("  ")], "must not be empty"),
    "entityType": ([entity(kind="k" * 1025)], "entityType is 1,025 bytes"),
    "relationType": ([relation(rtype="r" * 1025)], "relationType is 1,025 bytes"),
    "relation endpoint": ([relation(src=TOO_LONG_NAME)], "line 1: from: the name is 1,025 bytes"),
    "observations per line": ([entity(observations=["o"] * 1001)], "length <= 1000"),
}


@pytest.mark.parametrize("case", list(REFERENCE_OVER_LIMIT))
def test_defect3_import_enforces_tool_limits_reference_format(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    records, expected = REFERENCE_OVER_LIMIT[case]
    path = tmp_path / "memory.jsonl"
    path.write_text("\n".join(jline(r) for r in records))
    assert expected in refused(capsys, path)


MEMTRIO_OVER_LIMIT = {
    "content": (
        m_memory(1, "x" * (limits.MAX_CONTENT + 1)),
        "content: expected a string of length <= ",
    ),
    "memory_type": (
        m_memory(1, memory_type="t" * 65),
        "memory_type: expected a string of length <= 64",
    ),
    "blank memory_type": (m_memory(1, memory_type="  "), "memory_type must not be empty"),
    "importance": (m_memory(1, importance=1.5), "importance: expected a number <= 1.0"),
    "scopes per memory": (
        m_memory(1, scopes=[GLOBAL] * 65),
        "scopes: expected a list of length <= 64",
    ),
    "scope syntax": (m_memory(1, scopes=["relative/path"]), "line 5: scopes: invalid scope"),
    "scope length": (m_memory(1, scopes=["repo:/" + "p" * 5000]), "limited to 4,096 bytes"),
    "entities per memory": (
        m_memory(1, entities=["e1"] * 101),
        "entities: expected a list of length <= 100",
    ),
    "entity name": (m_entity(3, "é" * 600), "limited to 1,024 bytes (UTF-8) or 512 characters"),
    "canonical name": (m_entity(3, "Zed", canonical_name="other"), "not the canonical form"),
    "relation type": (m_relation(1, relation_type="r" * 1025), "relation_type is 1,025 bytes"),
    "metadata size": (
        m_relation(1, metadata=json.dumps({"k": "v" * limits.MAX_METADATA_BYTES})),
        "relation metadata is limited to 65,536 bytes",
    ),
    "metadata shape": (m_relation(1, metadata="[1, 2]"), "not the JSON text of an object"),
    "timestamp": (m_memory(1, created_at=1e300), "created_at: expected a number <= "),
    "access count": (m_memory(1, access_count=-1), "access_count: expected an integer >= 0"),
}


@pytest.mark.parametrize("case", list(MEMTRIO_OVER_LIMIT))
def test_defect3_import_enforces_tool_limits_memtrio_format(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    record, expected = MEMTRIO_OVER_LIMIT[case]
    path = tmp_path / "export.jsonl"
    path.write_text(memtrio_file(record))
    line = refused(capsys, path)
    assert "line 5" in line and expected in line, line


def test_defect3_import_accepts_what_is_exactly_at_the_limits(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    biggest = "ü" * (limits.MAX_OBSERVATION_BYTES // 2)  # 65,536 bytes
    path = tmp_path / "memory.jsonl"
    path.write_text(jline(entity("N" * limits.MAX_NAME_BYTES, "k" * 1024, [biggest] + ["o"] * 999)))
    code, out, err = run(capsys, "import", str(path), "--json")
    assert code == 0, err
    assert json.loads(out)["observations"] == 1000
    code, out, _ = run(capsys, "search", "üüü", "--lexical", "--json")
    assert code == 0 and len(out) < 4 * limits.MAX_OBSERVATION_BYTES  # bounded by the limit


def test_defect3_a_line_over_the_longest_record_is_refused_without_reading_it_whole(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "huge.jsonl"
    with path.open("w") as f:  # the review's case: a 100 MB observation
        f.write(jline(entity()) + "\n")
        f.write('{"type":"entity","name":"Bob","entityType":"t","observations":["')
        f.write("x" * (100 * 1024 * 1024))
        f.write('"]}\n')
    tracemalloc.start()
    try:
        line = refused(capsys, path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert f"line 2: longer than {MAX_LINE_BYTES:,} bytes" in line
    assert peak < 3 * MAX_LINE_BYTES  # one bounded line, not the 100 MB


async def test_defect3_the_tools_and_import_share_the_metadata_limit(
    home: Path, tmp_path: Path
) -> None:
    """The metadata limit import applies is the tools' own, merged metadata included."""
    from mcp_client import fails, ok, open_client

    over = {"note": "v" * limits.MAX_METADATA_BYTES}
    half = "v" * (limits.MAX_METADATA_BYTES // 2)
    async with open_client(home, cwd=tmp_path) as client:
        message = await fails(client, "relate", source="a", relation="r", target="b", metadata=over)
        assert "relation metadata is limited to 65,536 bytes" in message
        message = await fails(
            client, "remember", content="c",
            relations=[{"source": "a", "relation": "r", "target": "b", "metadata": over}],
        )  # fmt: skip
        assert "relations[0].metadata" in message
        await ok(client, "relate", source="a", relation="r", target="b", metadata={"x": half})
        message = await fails(
            client, "relate", source="a", relation="r", target="b", metadata={"y": half}
        )
        assert "merged metadata" in message
    path = tmp_path / "export.jsonl"
    path.write_text(memtrio_file(m_relation(1, metadata=json.dumps(over))))
    done = subprocess.run(
        zygote.command(["import", str(path), "--home", str(home)]),
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
        env={**os.environ, "MEMTRIO_EMBEDDINGS": "off", "MEMTRIO_CODE": "off"},
    )  # fmt: skip
    assert done.returncode == 1 and "relation metadata is limited to 65,536 bytes" in done.stderr


# -- defect 6: typed records, hostile files ----------------------------------------------------


def test_defect6_import_typed_records_refuse_a_string_where_a_list_belongs(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "export.jsonl"
    path.write_text(memtrio_file(m_memory(1, scopes=GLOBAL)))
    line = refused(capsys, path)
    assert "line 5: malformed memory record: scopes: expected a list, got a string" in line
    path.write_text(jline(entity()) + "\n" + jline({**entity("Bob"), "observations": "tea"}))
    line = refused(capsys, path)
    assert "line 2: malformed entity record: observations: expected a list, got a string" in line


HOSTILE: dict[str, tuple[bytes, str]] = {
    "invalid UTF-8": (b'{"type":"entity","name":"caf\xe9","entityType":"t"}', "line 1: not UTF-8 text"),
    "deep nesting": (
        b'{"type":"entity","name":"a","entityType":"t","x":' + b"[" * 50_000 + b"]" * 50_000 + b"}",
        "line 1: JSON nested too deeply",
    ),
    "deep nesting in a typed field": (
        jline(HEADER).encode() + b'\n{"type":"scope","id":1,"name":' + b"[" * 50_000 + b"]" * 50_000 + b"}",
        "line 2",
    ),
    "BOM": (b"\xef\xbb\xbf" + jline(entity()).encode(), "line 1: starts with a byte-order mark"),
    "NUL bytes": (jline(entity()).encode() + b"\n\x00\x00\x00", "line 2: not JSON: a NUL byte"),
    "empty": (b"", "the file is empty"),
    "only blank lines": (b"\n \n\t\n", "the file is empty"),
    "binary garbage": (bytes(range(255, -1, -1)) * 8, "line 1: not"),
    "truncated": (jline(entity()).encode() + b"\n" + jline(relation()).encode()[:25], "line 2: not JSON"),
    # A value of the wrong type before the cut: still refused as truncated JSON.
    "truncated after a wrong type": (b'\n{"type": 0', "line 2: not JSON"),
    "truncated array": (b"[1, 2", "line 1: not JSON"),
    "unpaired surrogate": (b'{"type":"entity","name":"a\\ud800b","entityType":"t"}', "surrogate"),
    "NaN": (memtrio_file(m_memory(1)).replace('"importance":0.0', '"importance":NaN').encode(), "NaN"),
    "Infinity": (memtrio_file(m_memory(1)).replace('"created_at":1.0', '"created_at":-Infinity', 3).encode(), "line 3"),
    "huge number": (memtrio_file(m_memory(1, id=10**30)).encode(), "line 5: malformed memory record"),
    "negative id": (memtrio_file(m_memory(-3)).encode(), "id: expected an integer >= 1"),
    "duplicate memory id": (memtrio_file(m_memory(7), m_memory(7, "other")).encode(), "line 6: memory 7 appears twice"),
    "duplicate entity": (memtrio_file(m_entity(3, "e1")).encode(), "line 5: entity 'e1' appears twice"),
    "dangling reference": (memtrio_file(m_memory(1, entities=["nobody"])).encode(), "does not define above"),
    "out of order": (memtrio_file(m_memory(1), m_entity(3)).encode(), "line 6: a entity record after memory"),
    "no header": (jline(m_memory(1)).encode(), "the first line must be its header"),
    "unknown field": (memtrio_file(m_memory(1, owner="x")).encode(), "unknown field `owner`"),
    "unknown type": (jline(entity()).encode() + b'\n{"type":"bogus"}', "type: Invalid value 'bogus'"),
    "a string, not an object": (b'"just a string"', "the first line must be its header"),
    "control characters in a field name": (
        jline({**entity(), "bad\nkey\x1b[31m": 1}).encode() + b"\n" + jline({**m_memory(1), "x\ny": 1}).encode(),
        "line 2",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(HOSTILE))
def test_defect6_import_typed_records_hostile_files_are_refused_whole(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    data, expected = HOSTILE[case]
    path = tmp_path / "hostile.jsonl"
    path.write_bytes(data)
    line = refused(capsys, path)
    assert expected in line, line


def test_defect6_import_typed_records_files_that_are_not_regular_files(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "cannot read: No such file or directory" in refused(capsys, tmp_path / "missing")
    assert "cannot read: it is a directory" in refused(capsys, tmp_path)
    assert "cannot read: it is a character device" in refused(capsys, "/dev/zero")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    # A FIFO with no writer would block a plain open(): run it where a hang fails the test.
    done = subprocess.run(
        [sys.executable, "-m", "memtrio.supervisors.cli", "import", str(fifo)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and "it is a FIFO" in done.stderr and "Traceback" not in done.stderr


def test_defect6_import_typed_records_from_stdin(
    repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def stdin(data: bytes) -> None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))

    stdin(b"\xff\xfe" + jline(entity()).encode())
    assert "import stdin: line 1: not UTF-8 text" in refused(capsys, "-")
    stdin(jline(entity(observations=["from stdin"])).encode())
    code, out, err = run(capsys, "import", "-", "--json")
    assert code == 0 and json.loads(out)["observations"] == 1, err


def test_defect6_other_commands_refuse_bad_values_in_one_line(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for argv, expected in [
        (["export", str(tmp_path)], "cannot write"),
        (["export", str(tmp_path / "no" / "such" / "dir.jsonl")], "cannot write"),
        (["export", "--format", "jsonl", str(tmp_path)], "cannot write"),
        (["remember", "bad \udcff bytes"], "`content` is not valid UTF-8"),
        (["search", "\udcff"], "`query` is not valid UTF-8"),
        (["list", "--type", "\udcff"], "`type` is not valid UTF-8"),
    ]:
        code, _, err = run(capsys, *argv)
        assert code == 1 and err.count("\n") == 1 and expected in err, (argv, err)
        assert "Traceback" not in err and "could not start" not in err, err
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"text \xff")))
    code, _, err = run(capsys, "remember", "-")
    assert code == 1 and "stdin is not UTF-8" in err


def test_defect6_round_trips_still_hold_and_big_entities_are_split_losslessly(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    many = [f"fact {i}" for i in range(2500)] + ["fact 3"]  # a repeat across the split
    source = tmp_path / "memory.jsonl"
    source.write_text(
        "\n".join(jline(entity(observations=many[i : i + 1000])) for i in range(0, len(many), 1000))
    )
    assert run(capsys, "import", str(source))[0] == 0
    out = tmp_path / "out.jsonl"
    assert run(capsys, "export", "--format", "jsonl", str(out))[0] == 0
    lines = [x for x in out.read_text().split("\n") if json.loads(x)["name"] == "Alice"]
    assert [len(json.loads(x)["observations"]) for x in lines] == [1000, 1000, 501]
    assert [o for x in lines for o in json.loads(x)["observations"]] == many
    # The memtrio format carries the same store into another home, and back out the same.
    full = tmp_path / "full.jsonl"
    assert run(capsys, "export", str(full))[0] == 0
    monkeypatch.setenv("MEMTRIO_HOME", str(tmp_path / "other"))
    code, _, err = run(capsys, "import", str(full))
    assert code == 0, err
    again = tmp_path / "again.jsonl"
    assert run(capsys, "export", str(again))[0] == 0
    body = lambda p: [x for x in p.read_text().splitlines() if '"header"' not in x]  # noqa: E731
    assert body(again) == body(full)


# -- property: any hostile file is refused whole or imported within the limits ----------------

texts = st.text(max_size=12)
names = st.text(min_size=1, max_size=12).filter(lambda s: s.strip())
hostile_values = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    texts,
    st.lists(texts, max_size=3),
    st.just("x" * (limits.MAX_OBSERVATION_BYTES + 1)),
    st.just(["o"] * (limits.MAX_ITEMS + 1)),
    st.dictionaries(texts, texts, max_size=2),
)
reference_records = st.one_of(
    st.builds(entity, names, texts, st.lists(texts, max_size=3)),
    st.builds(relation, names, names, texts),
)
memtrio_records = st.one_of(
    st.builds(lambda i, c: m_memory(i, c or "x", entities=["e1"]), st.integers(1, 50), texts),
    st.builds(lambda i, t: m_relation(i, relation_type=t), st.integers(1, 50), texts),
    st.builds(lambda i, n: m_entity(i, n), st.integers(3, 50), names),
)


def mutate(draw: st.DrawFn, record: dict[str, Any]) -> bytes:
    """One record's line, now and then with a field set to a hostile value, dropped or added."""
    record = dict(record)
    how = draw(st.sampled_from(["keep"] * 5 + ["set", "drop", "extra"]))
    key = draw(st.sampled_from(sorted(record)))
    if how == "set":
        record[key] = draw(hostile_values)
    elif how == "drop":
        del record[key]
    elif how == "extra":
        record[draw(texts)] = draw(hostile_values)
    return json.dumps(record, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")


raw_lines = st.one_of(
    st.binary(max_size=40),
    st.just(b"[" * 3000),
    st.just(b"\xef\xbb\xbf{}"),
    st.just(b'{"type":"entity","name":"\xc3\x28","entityType":"t"}'),
    st.just(b'{"type":"entity","name":"a\\udc00","entityType":"t"}'),
    st.just(b""),
)
RANK = {"entity": 0, "relation": 1, "memory": 2}


@st.composite
def hostile_files(draw: st.DrawFn) -> bytes:
    """A reference or memtrio file of valid records, some mutated, raw garbage mixed in, maybe cut."""
    reference = draw(st.booleans())
    records = draw(
        st.lists(reference_records if reference else memtrio_records, min_size=1, max_size=5)
    )
    if not reference:  # in the order an export has, so that valid files occur
        records = [
            HEADER,
            m_entity(1),
            m_entity(2),
            *sorted(records, key=lambda r: RANK[r["type"]]),
        ]
    lines = [mutate(draw, r) for r in records]
    if draw(st.integers(0, 3)) == 0:
        lines.insert(draw(st.integers(0, len(lines))), draw(raw_lines))
    data = b"\n".join(lines)
    if draw(st.integers(0, 5)) == 0:  # truncated anywhere
        data = data[: draw(st.integers(0, len(data)))]
    return data


def within_limits(home: Path) -> None:
    conn = sqlite3.connect(home / "memtrio.sqlite")
    try:
        for content, mtype, importance in conn.execute(
            "SELECT content, memory_type, importance FROM memories"
        ):
            assert len(content) <= limits.MAX_CONTENT and 0.0 <= importance <= 1.0
            assert mtype.strip() and len(mtype) <= 64
            if mtype == "observation":
                assert limits.utf8_size(content) <= limits.MAX_OBSERVATION_BYTES
        for name, kind in conn.execute("SELECT name, kind FROM entities"):
            limits.check_stored_name(name, "name")
            limits.check_type(kind, "kind")
        for (rtype,) in conn.execute("SELECT relation_type FROM relations"):
            limits.check_type(rtype, "relation_type")
        for (name,) in conn.execute("SELECT name FROM scopes"):
            assert name == GLOBAL or name.startswith("repo:/")
    finally:
        conn.close()


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=hostile_files())
def test_property_hostile_import_files_are_refused_whole_or_imported_within_limits(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], data: bytes
) -> None:
    path = tmp_path / "generated.jsonl"
    path.write_bytes(data)
    before = snapshot()
    code, out, err = run(capsys, "import", str(path), "--json")
    assert "Traceback" not in err and "could not start" not in err, err
    if code == 0:
        json.loads(out)
        within_limits(Path(os.environ["MEMTRIO_HOME"]))
    else:
        assert code == 1 and err.count("\n") == 1 and "nothing was imported" in err, err
        assert snapshot() == before


def test_defect6_a_file_changed_between_check_and_write_changes_nothing(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "export.jsonl"
    path.write_text(memtrio_file(m_memory(1), m_memory(2)))
    check_file = transfer.check_file

    def then_edit(file: Any, *rest: Any) -> transfer.Checked:
        checked = check_file(file, *rest)
        # Same inode, so the second read sees it: line 5 is written before line 6 fails.
        path.write_text(memtrio_file(m_memory(1), m_memory(2, scopes=GLOBAL)))
        return checked

    monkeypatch.setattr(transfer, "check_file", then_edit)
    line = refused(capsys, path)
    assert "line 6: malformed memory record" in line, line
