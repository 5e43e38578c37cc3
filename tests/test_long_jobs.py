"""Long jobs say what they are doing (issue #39 items 4-6).

Every long CLI job (migrate both ways, reembed, import, export, code index, doctor,
chaos) shows its progress on stderr through one module (`supervisors.progress`): on a
terminal a bar with count/total, rate and time left; piped, one line every
``MEMTRIO_PROGRESS_INTERVAL`` seconds. Each job runs here as a user runs it, under a
pseudo-terminal and piped. An import says what it left without a vector and what to
run; a recall over items without vectors says so in ``warnings``; ``migrate`` copies
between SQLite homes with the checks it applies to PostgreSQL.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time
from pathlib import Path
from typing import Any

import pytest
import zygote
from memtrio.actors.memory import transfer
from memtrio.supervisors.progress import Progress

from tests.launch import server_env

PIPED_LINE = re.compile(
    r"^(?P<label>[a-z :]+): (?P<n>\d+)/(?P<total>\d+) (?P<unit>\w+) \(\d+%\), .*/s, .* left$"
)


def export_file(path: Path, memories: int) -> Path:
    """A memtrio export of ``memories`` memories (no vectors)."""
    records: list[dict[str, Any]] = [
        {"type": "header", "format": transfer.FORMAT, "version": 3, "schema_version": 8},
        {"type": "scope", "id": 1, "name": "global"},
    ]
    records += [
        {
            "type": "memory",
            "id": i,
            "content": f"imported note {i} about retry backoff",
            "memory_type": "observation",
            "importance": 0.0,
            "created_at": 1.0 + i,
            "updated_at": 1.0 + i,
            "last_accessed_at": None,
            "access_count": 0,
            "scopes": ["global"],
            "entities": [],
            "relations": [],
        }  # fmt: skip
        for i in range(1, memories + 1)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def piped(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        zygote.command(args), env=env, cwd=cwd, capture_output=True, text=True, timeout=180
    )


def on_terminal(args: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str, str]:
    """``memtrio ARGS`` with stderr on a pseudo-terminal: (exit code, stdout, what the
    terminal showed). The process is ended before this returns."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    out_path = cwd / f"stdout-{time.monotonic_ns()}"
    with open(out_path, "wb") as out:
        proc = subprocess.Popen(
            zygote.command(args),
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=slave,
        )
    os.close(slave)
    shown = bytearray()
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: every writer closed the terminal
                    break
                if not data:
                    break
                shown += data
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return code, out_path.read_text(), shown.decode("utf-8", "replace")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return server_env(tmp_path / "home", {"MEMTRIO_PROGRESS_INTERVAL": "0"})


def test_import_and_migrate_show_progress_piped_and_on_a_terminal(
    tmp_path: Path, env: dict[str, str]
) -> None:
    dump = export_file(tmp_path / "dump.jsonl", 40)
    done = piped(["import", str(dump)], env, tmp_path)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("import")]
    parsed = [PIPED_LINE.match(line) for line in lines]
    assert lines and all(parsed), done.stderr
    assert {m["label"] for m in parsed if m} == {"import: check", "import: write"}
    assert {m["total"] for m in parsed if m} == {"42"}  # every line of the file
    assert "42/42 lines (100%)" in done.stderr
    assert "import" not in done.stdout.split("\n", 1)[1:]  # progress never reaches stdout

    code, out, shown = on_terminal(["migrate", "--to", str(tmp_path / "copy")], env, tmp_path)
    assert code == 0, shown
    assert "copied the home's SQLite store to" in out and "memory: 40" in out
    assert "migrate:" not in out  # progress never reaches stdout
    # tqdm's bar: count/total, the rate and elapsed<left, redrawn in place
    assert re.search(
        r"migrate: import: 100%\|[^|]*\| 42/42 \[[\d:]+<[\d:]+, +[\d.]+ records/s\]", shown
    ), shown
    assert "\r" in shown


def test_progress_is_silent_for_short_piped_jobs_and_when_switched_off(
    tmp_path: Path, env: dict[str, str]
) -> None:
    dump = export_file(tmp_path / "dump.jsonl", 5)
    quiet = {**env, "MEMTRIO_PROGRESS_INTERVAL": "60"}
    done = piped(["import", str(dump)], quiet, tmp_path)
    assert done.returncode == 0 and "import:" not in done.stderr, done.stderr
    off = {**env, "MEMTRIO_PROGRESS": "off"}
    code, _, shown = on_terminal(["export", str(tmp_path / "out.jsonl")], off, tmp_path)
    assert code == 0 and "records" not in shown, shown


def test_a_progress_line_names_one_unit_and_the_last_one_the_total(tmp_path: Path) -> None:
    """A job whose total counts several kinds keeps one unit (reembed: texts)."""
    stream = (tmp_path / "err").open("w+")
    with Progress("reembed", 7, "texts", stream=stream) as bar:
        bar.interval = 0
        for n in (3, 2, 2):  # memories, then entities, then relations
            bar.advance(n)
    stream.seek(0)
    lines = stream.read().splitlines()
    assert [m["unit"] for m in map(PIPED_LINE.match, lines) if m] == ["texts"] * 3, lines
    assert lines[-1].startswith("reembed: 7/7 texts (100%)")


def test_code_index_shows_progress_piped(tmp_path: Path, env: dict[str, str]) -> None:
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    for i in range(12):
        (repo / "pkg" / f"m{i}.py").write_text(f"def f{i}(x):\n    return x + {i}\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    done = piped(["code", "index", "--root", str(repo)], env, repo)
    assert done.returncode == 0, done.stderr
    assert re.search(r"^code index: \d+/12 files \(", done.stderr, re.M), done.stderr
    assert "code index: 12/12 files (100%)" in done.stderr


def test_doctor_shows_its_checks_piped(tmp_path: Path, env: dict[str, str]) -> None:
    done = piped(["doctor"], env, tmp_path)
    assert "doctor: 2/2 checks (100%)" in done.stderr, done.stderr


# -- item 5: what an import leaves without a vector ----------------------------------


def test_import_says_how_many_are_unembedded_and_what_to_run(
    tmp_path: Path, env: dict[str, str]
) -> None:
    dump = export_file(tmp_path / "dump.jsonl", 70)
    on = {**env, "MEMTRIO_EMBEDDINGS": "on", "MEMTRIO_PROGRESS": "off"}
    done = piped(["import", str(dump)], on, tmp_path)
    assert done.returncode == 0, done.stderr
    line = done.stdout.splitlines()[-1]
    assert line.startswith("not embedded: 70 memories have no vector"), done.stdout
    assert line.endswith("run memtrio reembed")
    as_json = piped(["import", "--json", str(dump)], on, tmp_path)
    assert json.loads(as_json.stdout)["unembedded"] == {"memory": 70, "entity": 0, "relation": 0}

    # A recall embeds at most 64 of them and says what it left out.
    found = piped(["search", "--json", "retry backoff"], on, tmp_path)
    assert found.returncode == 0, found.stderr
    warnings = json.loads(found.stdout)["warnings"]
    assert any("6 memories in the searched scopes have no vector" in w for w in warnings), warnings
    assert any("memtrio reembed" in w for w in warnings)

    # reembed counts texts of every kind under one unit, a line every interval, piped.
    redone = piped(["reembed"], {**on, "MEMTRIO_PROGRESS": ""}, tmp_path)
    assert redone.returncode == 0, redone.stderr
    lines = [m for m in map(PIPED_LINE.match, redone.stderr.splitlines()) if m]
    assert lines and {(m["label"], m["unit"]) for m in lines} == {("reembed", "texts")}
    assert lines[-1]["n"] == lines[-1]["total"], redone.stderr

    # Once everything has a vector, neither says anything.
    again = piped(["search", "--json", "retry backoff"], on, tmp_path)
    assert not any("no vector" in w for w in json.loads(again.stdout)["warnings"])


def test_import_with_embeddings_off_says_nothing_of_vectors(
    tmp_path: Path, env: dict[str, str]
) -> None:
    dump = export_file(tmp_path / "dump.jsonl", 3)
    done = piped(["import", str(dump)], {**env, "MEMTRIO_PROGRESS": "off"}, tmp_path)
    assert done.returncode == 0 and "not embedded" not in done.stdout, done.stdout


# -- item 6: migrate between SQLite homes ----------------------------------------------


def test_migrate_copies_between_sqlite_homes_with_the_same_checks(
    tmp_path: Path, env: dict[str, str]
) -> None:
    quiet = {**env, "MEMTRIO_PROGRESS": "off"}
    assert (
        piped(["import", str(export_file(tmp_path / "d.jsonl", 4))], quiet, tmp_path).returncode
        == 0
    )
    done = piped(["migrate", "--json", "--to", "./other"], quiet, tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["differ"] == [] and report["records"]["memory"]["count"] == 4
    assert report["to"] == str(tmp_path / "other" / "memtrio.sqlite")
    assert (tmp_path / "other").stat().st_mode & 0o077 == 0  # a private home
    other = {**quiet, "MEMTRIO_HOME": str(tmp_path / "other")}
    listed = piped(["list", "--json"], other, tmp_path)
    assert len(json.loads(listed.stdout)) == 4, listed.stdout

    # The same checks: a target that is not empty is refused, nothing is written.
    again = piped(["migrate", "--to", str(tmp_path / "other")], quiet, tmp_path)
    assert again.returncode == 1 and "not empty" in again.stderr, again.stderr
    # --from a SQLite file into an empty home.
    fresh = {**quiet, "MEMTRIO_HOME": str(tmp_path / "fresh")}
    back = piped(["migrate", "--from", str(tmp_path / "other" / "memtrio.sqlite")], fresh, tmp_path)
    assert back.returncode == 0 and "memory: 4" in back.stdout, back.stderr
    # The same store on both sides.
    same = piped(["migrate", "--to", str(tmp_path / "home")], quiet, tmp_path)
    assert same.returncode != 0 and "same store" in same.stderr, same.stderr


@pytest.mark.parametrize(
    ("flag", "where", "says"),
    [
        ("--from", "./missing-home", "does not exist"),
        ("--to", "backup", "neither a URL nor a path"),
    ],
)
def test_migrate_says_in_one_line_what_it_accepts(
    tmp_path: Path, env: dict[str, str], flag: str, where: str, says: str
) -> None:
    done = piped(["migrate", flag, where], env, tmp_path)
    assert done.returncode == 2, done.stderr
    err = done.stderr.strip().splitlines()
    assert len(err) == 1 and says in err[0], err
    assert "postgresql:// URL, a memtrio home (a directory) or a SQLite file" in err[0]
    assert not (tmp_path / "backup").exists()


def test_export_and_chaos_show_progress_piped(tmp_path: Path, env: dict[str, str]) -> None:
    quiet = {**env, "MEMTRIO_PROGRESS": "off"}
    assert (
        piped(["import", str(export_file(tmp_path / "d.jsonl", 6))], quiet, tmp_path).returncode
        == 0
    )
    done = piped(["export", "-o", str(tmp_path / "out.jsonl")], env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "export: 8/8 records (100%)" in done.stderr, done.stderr  # header, scope, 6 memories

    chaos = piped(
        ["chaos", "--quick", "--seed", "1", "--scenario", "crash-reader", "--json"], env, tmp_path
    )
    assert "chaos: 1/1 scenarios (100%)" in chaos.stderr, chaos.stderr
    assert json.loads(chaos.stdout)["totals"]["scenarios"] == 1  # stdout stays the report


def test_the_reference_format_shows_progress_both_ways(tmp_path: Path, env: dict[str, str]) -> None:
    graph = tmp_path / "memory.jsonl"
    graph.write_text(
        "".join(
            json.dumps(
                {
                    "type": "entity",
                    "name": f"E{i}",
                    "entityType": "service",
                    "observations": [f"o{i}"],
                }
            )
            + "\n"
            for i in range(9)
        )
    )
    done = piped(["import", str(graph)], env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "import: check: 9/9 lines (100%)" in done.stderr, done.stderr
    assert "import: write: 9/9 lines (100%)" in done.stderr, done.stderr
    out = piped(["export", "--format", "jsonl", "-o", str(tmp_path / "out.jsonl")], env, tmp_path)
    assert out.returncode == 0 and re.search(r"^export: 9 lines, ", out.stderr, re.M), out.stderr
