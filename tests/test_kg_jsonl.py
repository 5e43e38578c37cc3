"""memory.jsonl (the reference memory server's file) in and out: byte-for-byte round trips."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import trio
import zygote
from mcp import Client, StdioServerParameters
from mcp_client import ok, open_client, run_cli, server_env


def js_line(record: dict) -> str:
    """What the reference server's JSON.stringify writes for a record."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


TRICKY = [
    {"type": "entity", "name": "Alice  Smith", "entityType": "person",
     "observations": ['likes "tea"', "ünïcödé ☕ \u2028 line sep", "tab\there\nnewline", "dup", "dup", ""]},
    {"type": "entity", "name": "Acme", "entityType": "", "observations": []},
    {"type": "entity", "name": "ctrl\u0001char \\ back", "entityType": "weird/type",
     "observations": ["emoji 🎉", "\u007f del", "<script>&amp;"]},
    {"type": "entity", "name": "zürich", "entityType": "city", "observations": ["Zürich is in CH"]},
    {"type": "relation", "from": "Alice  Smith", "to": "Acme", "relationType": "works_at"},
    {"type": "relation", "from": "Acme", "to": "Alice  Smith", "relationType": "employs"},
    {"type": "relation", "from": "Acme", "to": "Acme", "relationType": "owns itself"},
    {"type": "relation", "from": "zürich", "to": "Acme", "relationType": "hosts"},
]  # fmt: skip


def memtrio(home: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, "--home", str(home), home=home, cwd=cwd, timeout=60)


async def test_import_then_export_is_byte_for_byte_stable(home: Path, tmp_path: Path) -> None:
    source = tmp_path / "memory.jsonl"
    source.write_bytes("\n".join(js_line(r) for r in TRICKY).encode("utf-8"))
    done = memtrio(home, "import", str(source), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    counts = json.loads(done.stdout)
    assert (counts["entities"], counts["observations"], counts["relations"]) == (4, 10, 4)
    out = tmp_path / "out.jsonl"
    done = memtrio(home, "export", "--format", "jsonl", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == source.read_bytes()
    # stdout gives the same bytes
    done = subprocess.run(
        zygote.command(["export", "--format", "jsonl"]),
        env={**server_env(home)}, cwd=tmp_path, capture_output=True, timeout=60,
    )  # fmt: skip
    assert done.stdout == source.read_bytes()

    # Importing the same file again changes nothing.
    again = json.loads(memtrio(home, "import", str(source), "--json", cwd=tmp_path).stdout)
    assert (again["entities"], again["observations"], again["relations"]) == (0, 0, 0)
    assert again["existingEntities"] == 4 and again["existingRelations"] == 4
    memtrio(home, "export", "--format", "jsonl", str(out), cwd=tmp_path)
    assert out.read_bytes() == source.read_bytes()

    # The server's export_graph is the same text; the memory tools see the observations.
    async with open_client(home, cwd=tmp_path) as client:
        exported = await ok(client, "export_graph")
        assert exported["jsonl"].encode("utf-8") == source.read_bytes()
        alice = await ok(client, "get_entity", name="Alice  Smith")
        assert alice["observations"] == TRICKY[0]["observations"]
        recalled = await ok(client, "recall", query="Zürich")
        assert [m["content"] for m in recalled["memories"]] == ["Zürich is in CH"]

    # The memtrio format still round-trips through the same commands.
    full = tmp_path / "full.jsonl"
    assert memtrio(home, "export", str(full), cwd=tmp_path).returncode == 0
    other = tmp_path / "other-home"
    other.mkdir()
    done = memtrio(other, "import", str(full), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    memtrio(other, "export", "--format", "jsonl", str(out), cwd=tmp_path)
    assert out.read_bytes() == source.read_bytes()


async def test_import_errors_name_the_line_and_dangling_relations_get_endpoints(
    home: Path, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        js_line(TRICKY[1])
        + "\n"
        + '{"type":"entity","name":"x","entityType":"t","observations":[1]}'
    )
    done = memtrio(home, "import", str(bad), cwd=tmp_path)
    assert done.returncode == 1 and "line 2" in done.stderr and "observations" in done.stderr
    bad.write_text(js_line(TRICKY[1]) + "\n{not json")
    done = memtrio(home, "import", str(bad), "--format", "jsonl", cwd=tmp_path)
    assert done.returncode == 1 and "line 2: not JSON" in done.stderr
    bad.write_text('{"type":"entity","name":"x","entityType":"t","observations":["\\ud800"]}')
    done = memtrio(home, "import", str(bad), cwd=tmp_path)
    assert done.returncode == 1 and "line 1" in done.stderr and "surrogate" in done.stderr
    dangling = tmp_path / "dangling.jsonl"
    dangling.write_text(js_line({"type": "relation", "from": "P", "to": "Q", "relationType": "r"}))
    done = memtrio(home, "import", str(dangling), cwd=tmp_path)
    assert done.returncode == 0 and "2 relation endpoints" in done.stdout
    out = tmp_path / "out.jsonl"
    memtrio(home, "export", "--format", "jsonl", str(out), cwd=tmp_path)
    assert out.read_text().split("\n") == [
        js_line({"type": "entity", "name": "P", "entityType": "entity", "observations": []}),
        js_line({"type": "entity", "name": "Q", "entityType": "entity", "observations": []}),
        js_line({"type": "relation", "from": "P", "to": "Q", "relationType": "r"}),
    ]


def _reference_command() -> list[str] | None:
    npx = shutil.which("npx")
    if npx is None or shutil.which("node") is None:
        return None
    return [npx, "-y", "--prefer-offline", "@modelcontextprotocol/server-memory"]


REFERENCE_TIMEOUT = 60.0


async def _write_with_reference(params: StdioServerParameters) -> None:
    async with Client(params, read_timeout_seconds=60) as ref:
        await ok(ref, "create_entities", entities=[
            {"name": r["name"], "entityType": r["entityType"], "observations": r["observations"]}
            for r in TRICKY if r["type"] == "entity"
        ])  # fmt: skip
        await ok(ref, "create_relations", relations=[
            {k: r[k] for k in ("from", "to", "relationType")} for r in TRICKY if r["type"] == "relation"
        ])  # fmt: skip
        await ok(
            ref, "add_observations", observations=[{"entityName": "Acme", "contents": ["late"]}]
        )


async def test_a_file_written_by_the_reference_server_round_trips(
    home: Path, tmp_path: Path
) -> None:
    command = _reference_command()
    if command is None:
        pytest.skip("Node/npx not installed: the reference server cannot run here")
    ref_file = tmp_path / "memory.jsonl"
    params = StdioServerParameters(
        command=command[0],
        args=command[1:],
        env={"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", str(tmp_path)),
             "MEMORY_FILE_PATH": str(ref_file)},
        cwd=str(tmp_path),
    )  # fmt: skip
    try:
        # Bounded: without a cached package npx fetches from the registry.
        with trio.fail_after(REFERENCE_TIMEOUT):
            await _write_with_reference(params)
    except Exception as exc:  # noqa: BLE001 - no cached package and no registry: skip
        pytest.skip(f"the reference server did not run ({type(exc).__name__}: {exc})")
    assert memtrio(home, "import", str(ref_file), cwd=tmp_path).returncode == 0
    out = tmp_path / "out.jsonl"
    memtrio(home, "export", "--format", "jsonl", str(out), cwd=tmp_path)
    assert out.read_bytes() == ref_file.read_bytes()
