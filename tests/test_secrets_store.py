"""Secrets kept out of the store (issue 37 item 6), on every write path, in each mode of
``[store] secrets``: through the real tools (memory, knowledge graph, vectors' model
labels, the recall log), the CLI (``remember``, ``search``, ``import`` of both formats),
and the dashboard's edits (``tests/test_ui_api.py``).

Each write carries its own made-up GitHub token, so a leak names its path. What is
checked is what a user would find: the tool's answer (a refusal naming the argument and
the kind of secret, never the secret; or a warning naming the marker), ``memtrio
export``, and every byte of the store's files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp_client import call, open_client, run_cli

BASE = "Zq7Lk2Pw9Xc4Vb1Nm8Rt5Yh3Jd6Fs0Ga2K"  # 34 characters


def secret(i: int) -> str:
    """The made-up GitHub token of write ``i`` (``ghp_`` and 36 letters and digits)."""
    return f"ghp_{BASE}{i:02d}"


VECTORS = {
    "MEMTRIO_VECTORS": "on",
    "MEMTRIO_VECTORS_DIMS": "3",
    "MEMTRIO_VECTORS_BACKEND": "exact",
    "MEMTRIO_CODE": "off",
}

# (tool, arguments, the argument path a refusal names, the secrets the call holds)
WRITES: list[tuple[str, dict[str, Any], str, list[int]]] = [
    ("remember", {
        "content": f"deploy with {secret(1)}", "entities": [f"host {secret(2)}"],
        "relations": [{"source": "svc", "relation": "uses", "target": "db",
                       "metadata": {"note": f"via {secret(3)}"}}],
    }, "content", [1, 2, 3]),
    ("update", {"id": 1, "content": f"rotated to {secret(4)}"}, "content", [4]),
    ("relate", {"source": "svc", "relation": "calls", "target": f"api {secret(5)}",
                "metadata": {"auth": secret(6)}}, "target", [5, 6]),
    ("create_entities", {"entities": [{"name": f"key {secret(7)}", "entityType": "credential",
                                       "observations": [f"issued {secret(8)}"]}]},
     "entities[0].name", [7, 8]),
    ("create_relations", {"relations": [{"from": "svc", "to": "db",
                                         "relationType": f"uses {secret(9)}"}]},
     "relations[0].relationType", [9]),
    ("add_observations", {"observations": [{"entityName": "svc",
                                            "contents": [f"token {secret(10)}"]}]},
     "observations[0].contents[0]", [10]),
    ("upsert_entities", {"entities": [{"name": "db", "entityType": "service",
                                       "observations": [f"dsn {secret(11)}"]}]},
     "entities[0].observations[0]", [11]),
    ("merge_entities", {"sources": ["old"], "target": f"merged {secret(12)}"}, "target", [12]),
    ("vector_upsert_embedding", {"entityName": "svc", "embedding": [1.0, 0.0, 0.0],
                                 "model": f"m {secret(13)}"}, "model", [13]),
    ("vector_batch_upsert", {"items": [{"entityName": "db", "embedding": [0.0, 1.0, 0.0],
                                        "model": f"m {secret(14)}"}]}, "items[0].model", [14]),
]  # fmt: skip
RECALLED = 15  # the secret of a recall's query (the recall log keeps queries)
LONG = 16  # the secret at the end of a long memory
ALL = [*range(1, 17)]


async def seed(client: Any) -> None:
    """Rows the writes refer to, free of secrets (so that a refusal is the secret's)."""
    is_error, _ = await call(client, "remember", content="base memory")
    assert not is_error
    entities = [
        {"name": n, "entityType": "service", "observations": []} for n in ("svc", "db", "old")
    ]
    is_error, _ = await call(client, "create_entities", entities=entities)
    assert not is_error


def stored_bytes(home: Path) -> bytes:
    """Every byte of the store's files (the database, its WAL and shared memory)."""
    return b"".join(p.read_bytes() for p in sorted(home.glob("memtrio.sqlite*")))


def exported(home: Path) -> str:
    done = run_cli("export", home=home)
    assert done.returncode == 0, done.stderr
    return done.stdout


def leaked(text: str | bytes, numbers: list[int]) -> list[int]:
    data = text.encode() if isinstance(text, str) else text
    return [i for i in numbers if secret(i).encode() in data]


async def run_writes(home: Path, mode: str) -> dict[str, tuple[bool, Any]]:
    answers: dict[str, tuple[bool, Any]] = {}
    async with open_client(home, env={**VECTORS, "MEMTRIO_SECRETS": mode}) as client:
        await seed(client)
        for tool, arguments, _, _ in WRITES:
            answers[tool] = await call(client, tool, **arguments)
        answers["recall"] = await call(
            client, "recall", query=f"what is {secret(RECALLED)}", use_embeddings=False
        )
        # Over screening.THREAD_BYTES: screened on a worker thread, to the same effect.
        long_text = "a long note. " * 4000 + f"deploy key {secret(LONG)}"
        answers["remember-long"] = await call(client, "remember", content=long_text)
    return answers


async def test_refuse_stores_none_and_names_each_secret_s_argument(home: Path) -> None:
    answers = await run_writes(home, "refuse")
    for tool, _, path, numbers in WRITES:
        is_error, text = answers[tool]
        assert is_error, f"{tool} stored a secret under refuse: {text}"
        assert f"{path}: github-token `ghp_...` (40 characters" in text, (tool, text)
        assert '[store] secrets is "refuse"' in text
        assert leaked(text, numbers) == [] and BASE[:8] not in text, (tool, text)
    assert answers["remember-long"][0], answers["remember-long"]
    is_error, recalled = answers["recall"]
    assert not is_error, "a read is never refused"
    assert any("recall log keeps the query" in w for w in recalled["warnings"])
    assert leaked(exported(home), ALL) == []
    assert leaked(stored_bytes(home), ALL) == []


async def test_redact_stores_markers_and_warns(home: Path) -> None:
    answers = await run_writes(home, "redact")
    for tool, _, path, _ in WRITES:
        is_error, result = answers[tool]
        assert not is_error, (tool, result)
        warnings = " ".join(result["warnings"])
        assert f"{path}: a secret was replaced" in warnings, (tool, warnings)
        assert "by [REDACTED:github-token]" in warnings
        assert leaked(warnings, ALL) == []
    assert any("recall log" in w for w in answers["recall"][1]["warnings"])
    assert "content: a secret was replaced" in " ".join(answers["remember-long"][1]["warnings"])
    export = exported(home)
    assert leaked(export, ALL) == []
    assert leaked(stored_bytes(home), ALL) == []
    assert export.count("[REDACTED:github-token]") >= len(ALL)
    memories = [json.loads(line) for line in export.splitlines() if '"memory"' in line]
    assert any(m.get("content") == "rotated to [REDACTED:github-token]" for m in memories)


async def test_allow_stores_them_as_given(home: Path) -> None:
    answers = await run_writes(home, "allow")
    for tool, _, _, _ in WRITES:
        is_error, result = answers[tool]
        assert not is_error, (tool, result)
        assert "REDACTED" not in json.dumps(result)
    # The clients' own vectors (and their model labels) are not part of an export.
    own_vectors = [13, 14]
    assert leaked(exported(home), ALL) == [n for n in ALL if n not in own_vectors]
    assert leaked(stored_bytes(home), own_vectors) == own_vectors


def test_the_cli_remember_and_search_follow_the_flag_the_environment_and_config(
    home: Path,
) -> None:
    refused = run_cli("remember", f"ci uses {secret(21)}", "--secrets", "refuse", home=home)
    assert refused.returncode == 1
    assert "content: github-token `ghp_...`" in refused.stderr and secret(21) not in refused.stderr
    redacted = run_cli("remember", f"ci uses {secret(22)}", home=home)  # the default
    assert redacted.returncode == 0, redacted.stderr
    assert "warning: content: a secret was replaced" in redacted.stdout
    kept = run_cli("remember", f"ci uses {secret(23)}", home=home, env={"MEMTRIO_SECRETS": "allow"})
    assert kept.returncode == 0 and "warning" not in kept.stdout
    searched = run_cli("search", f"ci {secret(24)}", "--lexical", home=home)
    assert searched.returncode == 0 and "recall log keeps the query" in searched.stdout
    (home / "config.toml").write_text('[store]\nsecrets = "refuse"\n')
    (home / "config.toml").chmod(0o600)
    by_file = run_cli("remember", f"ci uses {secret(25)}", home=home)
    assert by_file.returncode == 1 and "refused" in by_file.stderr
    bad = run_cli("remember", "x", home=home, env={"MEMTRIO_SECRETS": "maybe"})
    assert bad.returncode == 2 and "store.secrets" in bad.stderr
    assert leaked(exported(home), [21, 22, 24, 25]) == []
    assert leaked(exported(home), [23]) == [23]


def _export_with_secrets(home: Path) -> str:
    """An export (memtrio format) of a store written with ``allow``: a memory, an entity,
    a relation with metadata, a vector's model label and a recall-log query hold secrets."""
    env = {"MEMTRIO_SECRETS": "allow"}
    steps = [
        ("remember", f"deploy with {secret(31)}", "--entity", f"host {secret(32)}",
         "--relation", f"svc:calls:{secret(33)}"),
        ("search", f"what {secret(34)}", "--lexical"),
    ]  # fmt: skip
    for step in steps:
        done = run_cli(*step, home=home, env=env)
        assert done.returncode == 0, done.stderr
    return exported(home)


@pytest.mark.parametrize("mode", ["refuse", "redact"])
def test_import_of_an_export_screens_every_record(tmp_path: Path, mode: str) -> None:
    source = tmp_path / "source"
    source.mkdir(mode=0o700)
    dump = tmp_path / "dump.jsonl"
    dump.write_text(_export_with_secrets(source))
    assert leaked(dump.read_text(), [31, 32, 33, 34]) == [31, 32, 33, 34]
    target = tmp_path / "target"
    target.mkdir(mode=0o700)
    done = run_cli("import", str(dump), "--secrets", mode, home=target)
    if mode == "refuse":
        assert done.returncode != 0
        assert "line " in done.stderr and "github-token `ghp_...`" in done.stderr, done.stderr
        assert leaked(done.stderr, [31, 32, 33, 34]) == []
        assert '"memory"' not in exported(target)
    else:
        assert done.returncode == 0, done.stderr
        assert done.stdout.count("warning: line ") >= 4, done.stdout
        export = exported(target)
        assert leaked(export, [31, 32, 33, 34]) == []
        assert leaked(stored_bytes(target), [31, 32, 33, 34]) == []
        assert "deploy with [REDACTED:github-token]" in export


@pytest.mark.parametrize("mode", ["refuse", "redact", "allow"])
def test_import_of_a_reference_memory_jsonl_screens_names_types_and_observations(
    tmp_path: Path, mode: str
) -> None:
    records = [
        {"type": "entity", "name": f"svc {secret(41)}", "entityType": "service",
         "observations": [f"token {secret(42)}"]},
        {"type": "entity", "name": "db", "entityType": "service", "observations": []},
        {"type": "relation", "from": "db", "to": f"svc {secret(41)}", "relationType": f"auth {secret(43)}"},
    ]  # fmt: skip
    source = tmp_path / "memory.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    done = run_cli("import", str(source), "--secrets", mode, home=home)
    export = run_cli("export", "--format", "jsonl", home=home).stdout
    if mode == "refuse":
        assert done.returncode != 0 and "line 1: name: github-token" in done.stderr, done.stderr
        assert leaked(done.stderr, [41, 42, 43]) == [] and export == ""
    elif mode == "redact":
        assert done.returncode == 0, done.stderr
        assert leaked(export, [41, 42, 43]) == [] and leaked(stored_bytes(home), [41, 42, 43]) == []
        graph = [json.loads(line) for line in export.splitlines()]
        relation = next(r for r in graph if r["type"] == "relation")
        assert relation["to"] == "svc [REDACTED:github-token]", (
            "the relation still finds its entity"
        )
    else:
        assert done.returncode == 0 and leaked(export, [41, 42, 43]) == [41, 42, 43]


# -- the class of bug: no write path without the screen ----------------------------------

DELETIONS = {
    "forget", "delete_entities", "delete_observations", "delete_relations",
    "vector_delete_embedding", "compact",
}  # fmt: skip


def test_every_tool_that_writes_is_screened_unless_it_only_deletes() -> None:
    """A new tool that writes is screened (`Tool.screened`) unless it only removes rows and
    is listed here; its arguments' strings, however nested, are then all screened."""
    from memtrio.actors.features import declared_tools

    unscreened = {t.name for t in declared_tools() if t.writes and not t.screened}
    assert unscreened == DELETIONS


def test_every_screened_tool_can_carry_its_warnings() -> None:
    """``redact`` reports what it replaced in the result's ``warnings``: every screened tool
    with arguments has one (`screening.with_warnings`)."""
    from memtrio.actors.features import declared_tools

    missing = [
        t.name
        for t in declared_tools()
        if t.screened
        and t.args.__struct_fields__
        and (t.result is None or "warnings" not in t.result.__struct_fields__)
    ]
    assert missing == []


def test_handlers_are_called_only_through_the_screen() -> None:
    """The sessions, the dashboard and the CLI call a tool's handler through
    `screening.run_tool`; no other module calls ``tool.handler(...)`` itself."""
    root = Path(__file__).resolve().parent.parent
    callers = [
        str(p.relative_to(root))
        for folder in ("actors", "supervisors")
        for p in sorted((root / folder).rglob("*.py"))
        if ".handler(" in p.read_text(encoding="utf-8")
    ]
    assert callers == ["actors/screening.py"]
