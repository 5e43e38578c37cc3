"""Rows of the reference systems (graphmem, mcp-memory) that memtrio now matches, each
through a real process: the official MCP client on ``memtrio mcp``, or the CLI.

- an invalid ``[code]`` setting: one warning, the server starts with the memory tools;
- ``warnings`` always present in ``remember``, ``recall`` and ``relate`` results;
- ``--embedding-batch-size`` and ``--retrieval-*`` flags, the environment winning;
- a command that fails on loading the model says so in the trace log;
- ``code_diff`` ignores the separators between nested symbols wherever they sit;
- the reference's ``EMBEDDING_REVISION`` / ``EMBEDDING_CACHE_DIR`` accepted with a warning;
- ``--vec-index`` defaults to hnsw; ``--memory-file`` / ``-f`` names the store file.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec
import pytest
import waits
from gitrepo import git, make_repo, write
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_client import ok, run_cli, server_command, server_env
from memtrio.supervisors.config import RetrievalConfig

CODE_TOOLS = {"code_outline", "code_imports", "find_symbol", "code_diff"}


@asynccontextmanager
async def mcp_child(
    home: Path,
    stderr: Path,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> AsyncIterator[Client]:
    """The official client on a real ``memtrio mcp --no-attach`` (its stderr kept in ``stderr``,
    complete once the block ends)."""
    command = server_command(["--no-attach", *args])
    params = StdioServerParameters(
        command=command[0], args=command[1:], env=server_env(home, env), cwd=str(cwd or home)
    )
    with stderr.open("w") as errlog:
        async with Client(
            stdio_client(params, errlog=errlog), read_timeout_seconds=60, mode="auto"
        ) as client:
            yield client


def trace_events(home: Path) -> list[dict[str, Any]]:
    """The events of the home's trace log."""
    log = home / "logs" / "memtrio.log"
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def warning_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "warning" in line.lower()]


JS_BASE = """\
export const api = {
  load() {
    return fetch("/a")
  },
  save(item) {
    return post("/a", item)
  }
}
"""
# A trailing `,` after the last method: no symbol changed.
JS_TRAILING = JS_BASE.replace(
    '    return post("/a", item)\n  }\n', '    return post("/a", item)\n  },\n'
)
# The separator moved from `},` to a leading `,` on the next line: no symbol changed.
JS_LEADING = JS_BASE.replace("  },\n  save(item) {", "  }\n  , save(item) {")
# A property gains the `,` that a method added after it needs: only the method is new.
JS_PROPERTY = "export const cfg = {\n  retries: 3\n}\n"
JS_PROPERTY_METHOD = "export const cfg = {\n  retries: 3,\n  reset() {\n    return 0\n  }\n}\n"
TS_INTERFACE = "export interface Shape {\n  area(): number;\n  name: string;\n}\n"
TS_INTERFACE_COMMAS = "export interface Shape {\n  area(): number,\n  name: string,\n}\n"
# Members that are not symbols: a Rust struct's last field, a C enum in leading-comma style.
RUST_STRUCT = "pub struct Point {\n    pub x: f64,\n    pub y: f64\n}\n"
RUST_STRUCT_TRAILING = RUST_STRUCT.replace("pub y: f64\n", "pub y: f64,\n")
C_ENUM = "enum color {\n  RED,\n  GREEN\n};\n"
C_ENUM_LEADING = "enum color {\n  RED\n  , GREEN\n};\n"
# Python keeps its commas: a trailing `,` makes a tuple.
PY_DEF = "def pair():\n    return 1\n"
PY_TUPLE = "def pair():\n    return 1,\n"


def _diff(tmp_path: Path, home: Path, before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The symbol lines of ``memtrio code diff main HEAD`` after a commit from ``before``
    to ``after`` on a branch of a real repository."""
    repo = make_repo(tmp_path / "repo", before)
    git(repo, "checkout", "-q", "-b", "feature")
    write(repo, after)
    git(repo, "commit", "-qam", "separators")
    done = run_cli("code", "diff", "main", "HEAD", home=home, cwd=repo)
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if line.startswith("  ")]


def test_code_diff_ignores_separators_moved_between_nested_symbols(
    tmp_path: Path, home: Path
) -> None:
    before = {
        "api.js": JS_BASE,
        "moved.js": JS_BASE,
        "cfg.js": JS_PROPERTY,
        "shape.ts": TS_INTERFACE,
        "point.rs": RUST_STRUCT,
        "color.c": C_ENUM,
    }
    after = {
        "api.js": JS_TRAILING,
        "moved.js": JS_LEADING,
        "cfg.js": JS_PROPERTY_METHOD,
        "shape.ts": TS_INTERFACE_COMMAS,
        "point.rs": RUST_STRUCT_TRAILING,
        "color.c": C_ENUM_LEADING,
    }
    # The one real change: the method added to cfg.
    assert _diff(tmp_path, home, before, after) == ["  + 3-5\tmethod reset"]


def test_code_diff_still_sees_edits_next_to_separators(tmp_path: Path, home: Path) -> None:
    edited = JS_TRAILING.replace('post("/a", item)', 'post("/b", item)')
    before = {"api.js": JS_BASE, "pair.py": PY_DEF}
    after = {"api.js": edited, "pair.py": PY_TUPLE}
    assert _diff(tmp_path, home, before, after) == [
        "  ~ 5-7\tmethod save\tsave(item) {",
        "  ~ 1-2\tfunction pair",
    ]


# -- 4: an invalid [code] setting: one warning, the memory tools only -----------------------


@pytest.mark.parametrize(
    ("toml", "env", "named"),
    [
        ("[code]\nmax_files = 0\n", {}, "code.max_files"),
        ("", {"MEMTRIO_CODE_INDEX_THREADS": "lots"}, "code.index_threads"),
        ("", {"MEMTRIO_CODE_FILE_TIMEOUT": "-1"}, "code.file_timeout"),
        ('[code]\nenabled = "maybe"\n', {}, "code.enabled"),
        ("", {"MEMTRIO_CODE_MAX_FILE": "10"}, "code.max_file"),  # a typo of a [code] key
    ],
)
async def test_an_invalid_code_setting_warns_once_and_serves_the_memory_tools_only(
    tmp_path: Path, home: Path, toml: str, env: dict[str, str], named: str
) -> None:
    repo = make_repo(tmp_path / "repo", {"app.py": "def main():\n    return 1\n"})
    (home / "config.toml").write_text(toml)
    stderr = tmp_path / "stderr.txt"
    async with mcp_child(home, stderr, env=env, cwd=repo) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"remember", "recall", "relate", "server_status"} <= names
        assert not names & CODE_TOOLS
        made = await ok(client, "remember", content="deploys run on Fridays", scopes=["global"])
        found = await ok(client, "recall", query="deploys", use_embeddings=False)
        assert [m["id"] for m in found["memories"]] == [made["id"]]
    warned = warning_lines(stderr.read_text())
    assert len(warned) == 1, stderr.read_text()
    assert "[code]" in warned[0] and named in warned[0] and "code navigation is off" in warned[0]
    # The code commands refuse it as the configuration error it is: exit 2, one line.
    done = run_cli("code", "index", home=home, cwd=repo, env=env)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("memtrio: configuration error: ") and named in done.stderr


# -- 5: `warnings` always in remember, recall and relate ------------------------------------


async def test_remember_recall_and_relate_always_carry_warnings(tmp_path: Path, home: Path) -> None:
    async with mcp_child(home, tmp_path / "stderr.txt") as client:
        for tool, arguments in (
            ("remember", {"content": "the API answers in JSON", "scopes": ["global"]}),
            ("recall", {"query": "API", "use_embeddings": False}),
            ("relate", {"source": "api", "relation": "uses", "target": "json"}),
        ):
            result = await client.call_tool(tool, arguments)
            assert not result.is_error, result
            assert result.structured_content is not None
            assert result.structured_content["warnings"] == [], tool
            texts = [c.text for c in result.content if getattr(c, "type", "") == "text"]
            assert json.loads(texts[-1])["warnings"] == [], tool  # the text form too


# -- 6: --embedding-batch-size and --retrieval-* (the environment wins) ---------------------


def test_every_retrieval_key_has_its_flag_on_mcp_serve_and_search() -> None:
    keys = [f.name for f in msgspec.structs.fields(RetrievalConfig)]
    for command in ("mcp", "serve", "search"):
        shown = run_cli(command, "--help").stdout
        assert "--embedding-batch-size N" in shown, command
        missing = [k for k in keys if f"--retrieval-{k.replace('_', '-')}" not in shown]
        assert not missing, (command, missing)


def test_retrieval_flags_override_the_file_and_the_environment_overrides_them(
    home: Path,
) -> None:
    bad = run_cli("search", "anything", "--retrieval-damping", "7", home=home)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
    assert (
        "the command-line flag --retrieval-damping 7: retrieval.damping must be between 0 and 1"
        in bad.stderr
    )
    # The environment wins over the flag: its valid value is the one used.
    env = {"MEMTRIO_RETRIEVAL_DAMPING": "0.6", "MEMTRIO_EMBEDDING_BATCH_SIZE": "8"}
    flags = ["--retrieval-damping", "7", "--embedding-batch-size", "0"]
    done = run_cli("search", "anything", *flags, home=home, env=env)
    assert done.returncode == 0, done.stderr
    # The flag wins over config.toml.
    (home / "config.toml").write_text("[retrieval]\ndamping = 7.0\nrerank = 3\n")
    flags = ["--retrieval-damping", "0.6", "--retrieval-rerank", "off"]
    done = run_cli("search", "anything", *flags, home=home)
    assert done.returncode == 0, done.stderr
    (home / "config.toml").unlink()
    bad = run_cli("serve", "--bind", "127.0.0.1:0", "--embedding-batch-size", "0", home=home)
    assert bad.returncode == 2 and "--embedding-batch-size 0: embedding.batch_size" in bad.stderr


async def test_the_embedding_batch_size_flag_reaches_the_server_under_the_environment(
    tmp_path: Path, home: Path
) -> None:
    async def batch_size(env: dict[str, str]) -> int:
        env = {"MEMTRIO_EMBEDDINGS": "on", **env}
        args = ["--embedding-batch-size", "4"]
        async with mcp_child(home, tmp_path / "stderr.txt", args, env) as client:
            read = await client.read_resource("memtrio://embedding")
            return int(json.loads(read.contents[0].text)["batch_size"])  # type: ignore[union-attr]

    assert await batch_size({}) == 4
    assert await batch_size({"MEMTRIO_EMBEDDING_BATCH_SIZE": "8"}) == 8


# -- 7: a command failing on the model says so in the trace log -----------------------------


@pytest.mark.parametrize("broken", ["missing directory", "broken model file"])
def test_a_command_that_fails_on_loading_the_model_writes_the_failure_to_the_trace_log(
    tmp_path: Path, home: Path, broken: str
) -> None:
    model = tmp_path / "model"
    if broken == "broken model file":
        model.mkdir()
        (model / "model.onnx").write_bytes(b"not an onnx model")
        (model / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n")
    (home / "config.toml").write_text(f'[embedding]\nmodel = "{model}"\n')
    env = {"MEMTRIO_EMBEDDINGS": "on"}
    for command, code in ((["remember", "hello"], 1), (["reembed"], 2)):
        done = run_cli(*command, home=home, env=env)
        assert done.returncode == code, done.stderr
        said = done.stderr.strip().splitlines()[-1].removeprefix("memtrio: ")
        failed = [e for e in trace_events(home) if (e["actor"], e["event"]) == ("cli", "failed")]
        assert failed and failed[-1]["command"] == command[0], failed
        assert failed[-1]["error"] == said and failed[-1]["level"] == "error"
        assert any(e["event"] == "model_load_failed" for e in trace_events(home))


# -- 9: the reference's EMBEDDING_REVISION / EMBEDDING_CACHE_DIR ----------------------------


@pytest.mark.parametrize("where", ["environment", "config.toml"])
async def test_embedding_revision_and_cache_dir_are_accepted_with_one_warning(
    tmp_path: Path, home: Path, where: str
) -> None:
    env: dict[str, str] = {}
    if where == "environment":
        env = {"MEMTRIO_EMBEDDING_REVISION": "main", "MEMTRIO_EMBEDDING_CACHE_DIR": "/tmp/m"}
    else:
        (home / "config.toml").write_text('[embedding]\nrevision = "main"\ncache_dir = "/tmp/m"\n')
    stderr = tmp_path / "stderr.txt"
    async with mcp_child(home, stderr, env=env) as client:
        await ok(client, "remember", content="nothing is downloaded", scopes=["global"])
    warned = warning_lines(stderr.read_text())
    assert len(warned) == 1, stderr.read_text()
    assert "revision" in warned[0] and "cache_dir" in warned[0]
    assert "ships in the package" in warned[0] and "nothing is downloaded" in warned[0]


# -- 12: --vec-index defaults to hnsw; small tables stay exact ------------------------------


async def test_the_vector_index_is_hnsw_by_default_and_exact_for_small_tables(
    tmp_path: Path, home: Path
) -> None:
    args = ["--vectors", "--embedding-dims", "3"]
    async with mcp_child(home, tmp_path / "stderr.txt", args) as client:
        names = ["a", "b", "c"]
        await ok(client, "create_entities", entities=[
            {"name": n, "entityType": "t", "observations": []} for n in names
        ])  # fmt: skip
        items = [{"entityName": n, "embedding": [1.0, float(i), 0.5]} for i, n in enumerate(names)]
        await ok(client, "vector_batch_upsert", items=items)
    # Restarted: the index is built from the table with the default backend.
    async with mcp_child(home, tmp_path / "stderr.txt", args) as client:
        small = await ok(client, "vector_store_stats")
    env = {"MEMTRIO_VECTORS_EXACT_BELOW": "3"}  # a "large" table from three vectors
    async with mcp_child(home, tmp_path / "stderr.txt", args, env) as client:
        # Served at once (exact meanwhile), the graph built in the background takes over.
        first = await ok(client, "vector_search_entities", embedding=[1.0, 2.0, 0.5], topK=1)
        large: dict[str, Any] = {}

        async def hnsw() -> bool:
            large.update(await ok(client, "vector_store_stats"))
            return large["backend"] == "hnsw"

        await waits.until(hnsw, 20)
        found = await ok(client, "vector_search_entities", embedding=[1.0, 2.0, 0.5], topK=1)
    assert (small["backend"], large["backend"]) == ("exact", "hnsw")
    assert [hit["entityName"] for hit in first["results"]] == ["c"]
    assert [hit["entityName"] for hit in found["results"]] == ["c"]  # the graph answers


# -- 13: --memory-file / -f and MEMORY_FILE_PATH name the store file ------------------------


async def test_memory_file_names_the_store_file_on_the_cli_and_the_server(
    tmp_path: Path, home: Path
) -> None:
    first = tmp_path / "stores" / "team.sqlite"
    first.parent.mkdir()
    done = run_cli(
        "remember", "kept in team.sqlite", "--scope", "global", "-f", str(first), home=home
    )
    assert done.returncode == 0, done.stderr
    assert first.is_file() and first.stat().st_mode & 0o077 == 0
    assert not (home / "memtrio.sqlite").exists()
    found = run_cli("search", "team", "--json", "--memory-file", str(first), home=home)
    assert "kept in team.sqlite" in found.stdout, found.stderr
    assert "kept in team.sqlite" not in run_cli("search", "team", "--json", home=home).stdout
    # The reference's MEMORY_FILE_PATH, and memtrio's own name winning over it.
    assert (
        "kept in"
        in run_cli("list", "--json", home=home, env={"MEMORY_FILE_PATH": str(first)}).stdout
    )
    other = tmp_path / "stores" / "other.sqlite"
    env = {"MEMORY_FILE_PATH": str(first), "MEMTRIO_STORE_FILE": str(other)}
    assert "kept in" not in run_cli("list", "--json", home=home, env=env).stdout
    assert other.is_file()
    # A file and a PostgreSQL store at once: one line, exit 2.
    bad = run_cli("list", "-f", str(first), "--store", "postgresql://u@localhost/x", home=home)
    assert bad.returncode == 2 and "store.file names a SQLite file" in bad.stderr
    # The server: memtrio mcp -f reads and writes that file.
    async with mcp_child(home, tmp_path / "stderr.txt", ["-f", str(first)]) as client:
        hits = await ok(client, "recall", query="team", use_embeddings=False)
        assert [m["content"] for m in hits["memories"]] == ["kept in team.sqlite"]
