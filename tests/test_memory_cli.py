"""The memory CLI: same store and rules as the tools, human output, --json, lossless export/import."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from memtrio.supervisors.cli import main


@pytest.fixture
def repo(cli_checkout: Path) -> Path:
    return cli_checkout


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> object:
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_cli_commands_share_the_store_and_its_rules(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scope = f"repo:{repo / '.git'}"
    code, out, _ = run(
        capsys,
        "remember",
        "Use ruff for linting",
        "--type",
        "convention",
        "--entity",
        "ruff",
        "--relation",
        "memtrio:uses:ruff",
    )
    assert code == 0 and out.strip() == f"remembered #1 in {scope}"
    created = run_json(
        capsys, "remember", "Global tip: prefer pathlib", "--scope", "global", "--importance", "0.5"
    )
    assert created["id"] == 2 and created["scopes"] == ["global"]

    code, out, _ = run(capsys, "list")
    assert "#1 [convention]" in out and "#2 [observation]" in out
    assert [m["id"] for m in run_json(capsys, "list", "--type", "CONVENTION")] == [1]
    found = run_json(capsys, "search", "linting ruff", "--lexical")
    assert [m["id"] for m in found["memories"]] == [1]
    code, out, _ = run(capsys, "search", 'ruff AND "(', "--lexical")
    assert code == 0 and "#1" in out
    code, out, _ = run(capsys, "show", "1")
    assert (
        "memory #1" in out
        and "relation: memtrio -[uses]-> ruff" in out
        and "Use ruff for linting" in out
    )
    code, out, _ = run(capsys, "graph", "ruff")
    assert "memtrio -[uses]-> ruff" in out
    scopes = run_json(capsys, "scopes")
    assert scopes["current_scope"] == scope
    stats = run_json(capsys, "stats")
    assert (stats["memories"], stats["entities"], stats["edges"]) == (2, 2, 1)

    doctor = run_json(capsys, "doctor")
    assert (
        doctor["integrity"] == "ok"
        and doctor["fts_integrity"] == "ok"
        and doctor["schema_version"] >= 1
    )
    assert doctor["current_scope"] == scope and doctor["database"].endswith("memtrio.sqlite")

    # Errors: one clear line, non-zero exit, nothing changed.
    code, _, err = run(capsys, "remember", "x", "--scope", "repo:/somewhere/else")
    assert code == 1 and err.count("\n") == 1 and "repo:/somewhere/else" in err and "global" in err
    code, _, err = run(capsys, "forget", "42")
    assert code == 1 and "memory 42 not found" in err and err.count("\n") == 1
    code, _, err = run(capsys, "graph", "ruff", "--depth", "4")
    assert code == 1 and "`--depth`" in err and "max_depth" not in err
    code, _, err = run(capsys, "flush")
    assert code == 1 and "--yes" in err
    assert run_json(capsys, "stats")["memories"] == 2

    code, out, _ = run(capsys, "forget", "2")
    assert code == 0 and out.strip() == "forgot #2"
    flushed = run_json(capsys, "flush", "--yes")
    assert (
        flushed["deleted_memories"] == 1
        and flushed["deleted_entities"] == 2
        and flushed["deleted_relations"] == 1
    )
    assert run_json(capsys, "stats")["memories"] == 0


def test_export_import_round_trip_is_lossless(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    run_json(
        capsys,
        "remember",
        "first memory with ünïcödé",
        "--entity",
        "Alpha",
        "--relation",
        "alpha:feeds:beta",
    )
    run_json(
        capsys,
        "remember",
        "second, global",
        "--scope",
        "global",
        "--type",
        "decision",
        "--importance",
        "0.25",
    )
    run_json(capsys, "remember", "third mentions beta", "--entity", "BETA")
    run_json(capsys, "forget", "1")  # leaves a gap in the ids
    run_json(capsys, "search", "beta", "--lexical")
    run_json(capsys, "show", "2")
    # A vector row (as an embedder would store) must survive the trip too.
    conn = sqlite3.connect(tmp_path / "home" / "memtrio.sqlite")
    conn.execute(
        "INSERT INTO vectors VALUES ('memory', 3, 'm', 'r1', 2, ?)",
        (b"\x00\x00\x80?\x00\x00\x00\x00",),
    )
    conn.commit()
    conn.close()

    first = tmp_path / "one.jsonl"
    code, _, err = run(capsys, "export", str(first))
    assert code == 0 and "exported 2 memories" in err
    monkeypatch.setenv("MEMTRIO_HOME", str(tmp_path / "other"))
    imported = run_json(capsys, "import", str(first))
    assert imported["memories"] == 2 and imported["vectors"] == 1
    code, second_text, _ = run(capsys, "export")

    def body(text: str) -> list[dict[str, object]]:
        return [
            json.loads(line) for line in text.splitlines() if json.loads(line)["type"] != "header"
        ]

    assert body(second_text) == body(first.read_text())
    again = run_json(capsys, "import", str(first))  # importing twice adds no memory
    assert again["memories"] == 0 and again["skipped_memories"] == 2
    shown = run_json(capsys, "show", "3")
    assert shown["content"] == "third mentions beta" and [e["name"] for e in shown["entities"]] == [
        "beta"
    ]  # reused, first spelling kept

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "memory"}\n')
    code, _, err = run(capsys, "import", str(bad))
    assert code == 1 and "header" in err
    code, _, err = run(capsys, "import", str(tmp_path / "missing.jsonl"))
    assert code == 1 and "cannot read" in err
    assert os.environ["MEMTRIO_HOME"].endswith("other")


def test_a_store_that_cannot_open_is_one_clear_line(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "memtrio.sqlite").write_bytes(b"this is not a database at all" * 100)
    code, out, err = run(capsys, "stats")
    path = home / "memtrio.sqlite"
    assert (
        code == 1
        and err
        == f"memtrio: the memory store {path} is damaged (file is not a database): run memtrio doctor\n"
    )
    code, out, err = run(capsys, "doctor")
    assert code == 1 and "file is not a database" in out and "PROBLEMS FOUND" in out
    assert err.count("\n") == 1 and "aside" in err


def test_ids_and_counts_beyond_the_database_integers_are_refused_in_one_line(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # An id or a count no database integer holds was an "unexpected error"
    # (OverflowError) with a traceback in the log; it is an argument refusal.
    assert run(capsys, "remember", "a memory to keep")[0] == 0
    huge = str(2**70)
    for argv in (("show", huge), ("forget", huge)):
        code, _, err = run(capsys, *argv)
        assert code == 1 and err.startswith("memtrio: invalid arguments"), (argv, err)
        assert "unexpected" not in err and err.count("\n") == 1
    for flag in ("--limit", "--offset"):
        code, _, err = run(capsys, "list", flag, huge)
        assert code == 1 and err.startswith(f"memtrio: --limit must be 1 to {2**63 - 1}"), err
    assert [m["content"] for m in run_json(capsys, "list")] == ["a memory to keep"]  # type: ignore[index, union-attr]
