#!/usr/bin/env python
"""Generate docs/tools.md from the live tool registry of `memtrio mcp`.

Starts the real server (embeddings off, vectors on at 4 dimensions, a temporary home, a temporary git
checkout with one small Python file), lists its tools, calls every tool once
with the example arguments of `STEPS` in order (a deterministic setup: a
memory, a few entities and relations, then every read, then the deletes), and
renders each tool: name, title, group, annotations, description, an arguments
table from its ``inputSchema``, the fields of its result and one real example
call with its answer. Times, ids of the temporary paths and other values that
vary between runs are replaced by stable placeholders, so the output is the
same on every run.

The group of a tool is read from the server too: one short start per group
with ``--tools GROUP``.

Usage::

    python tools/gen_tools_doc.py            # rewrite docs/tools.md
    python tools/gen_tools_doc.py --check    # exit 1 when docs/tools.md is stale
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memtrio.actors.chaos.blocking import BlockingClient
from memtrio.protocol.tools import json_type as value_type

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "tools.md"
GROUPS = ("memory", "graph-read", "graph-write", "vectors", "code")
READ_TIMEOUT = 30.0
MAX_STRING = 160
MAX_ITEMS = 4
GIT = [
    "git",
    "-c",
    "user.email=docs@example.com",
    "-c",
    "user.name=docs",
    "-c",
    "commit.gpgsign=false",
]
GIT_DATE = "2024-01-01T00:00:00+00:00"

SERVICE = "import os\nfrom app import models\n\n\ndef load_config(path):\n    return path\n"
SCOPES = ["global"]

# The vector tools run with `--vectors` at 4 dimensions (`VECTORS_ENV`), exact search.
VECTORS_ENV = {
    "MEMTRIO_VECTORS": "on",
    "MEMTRIO_VECTORS_DIMS": "4",
    "MEMTRIO_VECTORS_BACKEND": "exact",
}
VEC_ADA = [1.0, 0.0, 0.0, 0.0]
VEC_QUERY = [1.0, 0.2, 0.0, 0.0]

# (tool, example arguments), in call order: reads before the deletes. `{id}` is
# the memory `remember` created, `{repo}` the checkout the server runs in.
# Values taken from tests/test_inspector_args.py.
STEPS: list[tuple[str, dict[str, Any]]] = [
    ("server_status", {}),
    (
        "remember",
        {
            "content": "Alpha uses Beta for its message queue",
            "memory_type": "decision",
            "importance": 0.5,
            "scopes": SCOPES,
            "entities": ["Alpha", {"name": "Beta", "kind": "service"}],
            "relations": [
                {
                    "source": "Alpha",
                    "relation": "uses",
                    "target": "Beta",
                    "metadata": {"why": "queue"},
                }
            ],
        },
    ),
    ("recall", {"query": "message queue", "scopes": SCOPES, "limit": 5, "use_embeddings": False}),
    ("stats", {}),
    ("list_scopes", {}),
    (
        "relate",
        {
            "source": "Alpha",
            "relation": "depends_on",
            "target": "Gamma",
            "target_kind": "library",
            "scopes": SCOPES,
        },
    ),
    ("graph", {"entity": "Alpha", "direction": "outgoing", "max_depth": 2, "scopes": SCOPES}),
    ("inspect", {"id": "{id}", "scopes": SCOPES}),
    ("update", {"id": "{id}", "importance": 0.75, "scopes": SCOPES}),
    ("review_stale", {"limit": 5}),
    (
        "create_entities",
        {
            "entities": [
                {"name": "Ada", "entityType": "person", "observations": ["wrote notes"]},
                {"name": "Babbage", "entityType": "person", "observations": []},
                {"name": "Engine", "entityType": "machine", "observations": []},
                {"name": "Old", "entityType": "machine", "observations": []},
            ]
        },
    ),
    (
        "create_relations",
        {
            "relations": [
                {"from": "Ada", "to": "Engine", "relationType": "programs"},
                {"from": "Babbage", "to": "Engine", "relationType": "designed"},
                {"from": "Ada", "to": "Babbage", "relationType": "knows"},
            ]
        },
    ),
    (
        "add_observations",
        {"observations": [{"entityName": "Ada", "contents": ["first programmer"]}]},
    ),
    (
        "upsert_entities",
        {
            "entities": [
                {"name": "Ada", "entityType": "person", "observations": ["mathematician"]},
                {"name": "Analyst", "entityType": "machine", "observations": []},
            ]
        },
    ),
    ("vector_upsert_embedding", {"entityName": "Ada", "embedding": VEC_ADA, "model": "example"}),
    (
        "vector_batch_upsert",
        {
            "items": [
                {"entityName": "Babbage", "embedding": [0.9, 0.1, 0.0, 0.0]},
                {"entityName": "Engine", "embedding": [0.0, 1.0, 0.0, 0.0]},
                {"entityName": "Old", "embedding": [0.0, 0.0, 1.0, 0.0]},
                {"entityName": "Nobody", "embedding": [0.5, 0.5, 0.5, 0.5]},
            ]
        },
    ),
    ("vector_get_embedding", {"entityName": "Ada"}),
    ("vector_search_entities", {"embedding": VEC_QUERY, "topK": 3, "entityType": "person"}),
    ("vector_search_by_entity", {"entityName": "Ada", "topK": 3}),
    ("vector_recommend", {"positive": ["Ada"], "negative": ["Engine"], "topK": 3}),
    ("vector_mmr_search", {"embedding": VEC_QUERY, "topK": 2, "lambda": 0.5}),
    (
        "hybrid_search",
        {"queryText": "programmer", "queryEmbedding": VEC_QUERY, "topK": 3, "centralityBoost": 0.5},
    ),
    ("vector_refresh_graph_cache", {}),
    ("vector_reindex", {}),
    ("vector_store_stats", {}),
    ("vector_delete_embedding", {"entityName": "Old"}),
    ("read_graph", {"limit": 10, "mode": "summary"}),
    ("search_nodes", {"query": "Ada", "limit": 10}),
    ("open_nodes", {"names": ["Ada"]}),
    ("batch_get_entities", {"names": ["Ada", "Engine"], "mode": "names"}),
    ("get_entity", {"name": "Ada"}),
    ("entity_exists", {"names": ["Ada", "Nobody"]}),
    ("graph_stats", {}),
    ("search_relations", {"from": "Ada", "relationType": "programs"}),
    ("describe_entity", {"name": "Ada"}),
    ("degree", {"name": "Ada"}),
    ("find_path", {"from": "Ada", "to": "Engine", "maxDepth": 3}),
    ("find_all_paths", {"from": "Ada", "to": "Engine", "maxDepth": 3, "limit": 5}),
    ("extract_subgraph", {"names": ["Ada"], "depth": 1, "mode": "names"}),
    ("get_neighbors", {"name": "Ada", "direction": "outgoing", "mode": "summary"}),
    ("list_entity_types", {}),
    ("list_relation_types", {}),
    ("export_graph", {"limit": 100}),
    (
        "delete_observations",
        {"deletions": [{"entityName": "Ada", "observations": ["wrote notes"]}]},
    ),
    (
        "delete_relations",
        {"relations": [{"from": "Ada", "to": "Babbage", "relationType": "knows"}]},
    ),
    ("merge_entities", {"sources": ["Analyst"], "target": "Engine"}),
    ("delete_entities", {"entityNames": ["Old"]}),
    ("compact", {}),
    ("code_outline", {"path": "app/service.py", "root": "{repo}"}),
    ("code_imports", {"path": "app/service.py", "root": "{repo}"}),
    ("find_symbol", {"query": "load", "kind": "function", "limit": 5, "root": "{repo}"}),
    ("code_diff", {"base": "main", "head": "HEAD", "root": "{repo}"}),
    ("forget", {"id": "{id}", "scopes": SCOPES}),
]


@contextlib.contextmanager
def served(home: Path, cwd: Path, args: tuple[str, ...] = ()) -> Iterator[BlockingClient]:
    """An initialized ``memtrio mcp ARGS`` child (embedded: no owner outlives the tool) with
    the vector tools and each tool's output schema, to document each result's fields."""
    env = {**VECTORS_ENV, "MEMTRIO_SERVER_OUTPUT_SCHEMA": "true"}
    client = BlockingClient.memtrio(home, env, cwd, args, timeout=READ_TIMEOUT)
    try:
        client.initialize("gen_tools_doc")
        yield client
    finally:
        client.close(10)


def make_repo(path: Path) -> Path:
    """A checkout on branch feature, one commit ahead of main (fixed dates: stable hashes)."""
    path.mkdir(parents=True)
    env = {**os.environ, "GIT_AUTHOR_DATE": GIT_DATE, "GIT_COMMITTER_DATE": GIT_DATE}

    def git(*args: str) -> None:
        subprocess.run([*GIT, "-C", str(path), *args], check=True, capture_output=True, env=env)

    git("init", "-q", "-b", "main")
    (path / "app").mkdir()
    (path / "app" / "service.py").write_text(SERVICE)
    git("add", "-A")
    git("commit", "-qm", "init")
    git("checkout", "-q", "-b", "feature")
    (path / "app" / "service.py").write_text(SERVICE + "\n\ndef added(x):\n    return x\n")
    git("commit", "-qam", "feature")
    return path.resolve()


def list_tools(client: BlockingClient) -> list[dict[str, Any]]:
    return list(client.request("tools/list")["result"]["tools"])


def tool_groups(tmp: Path, repo: Path) -> dict[str, str]:
    """Each tool's group, from one server per group started with ``--tools GROUP``."""
    seen: dict[str, list[str]] = {}
    for group in GROUPS:
        home = tmp / f"home-{group}"
        home.mkdir()
        with served(home, repo, ("--tools", group)) as client:
            for tool in list_tools(client):
                seen.setdefault(tool["name"], []).append(group)
    return {
        name: "core (always listed)" if len(groups) == len(GROUPS) else ", ".join(groups)
        for name, groups in seen.items()
    }


def fill(value: Any, memory_id: int, repo: Path) -> Any:
    if value == "{id}":
        return memory_id
    if value == "{repo}":
        return str(repo)
    return value


def run_examples(client: BlockingClient, repo: Path) -> dict[str, tuple[dict[str, Any], Any]]:
    """Every step called in order: tool -> (arguments, structured answer)."""
    examples: dict[str, tuple[dict[str, Any], Any]] = {}
    memory_id = 0
    for name, raw in STEPS:
        args = {key: fill(value, memory_id, repo) for key, value in raw.items()}
        result = client.tool(name, args)
        answer = result.get("structuredContent")
        if answer is None:
            text = "\n".join(c.get("text", "") for c in result.get("content", []))
            try:
                answer = json.loads(text)
            except ValueError:
                answer = text  # a plain-text answer (no structuredContent)
        if name == "remember":
            memory_id = answer["id"]
        examples[name] = (args, answer)
    return examples


ISO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$")
EPOCH_MIN, EPOCH_MAX = 1.0e9, 4.0e9


class Stabilizer:
    """Replaces what varies between runs (temporary paths, times, versions) by placeholders."""

    def __init__(self, paths: dict[str, str]) -> None:
        # Longest first, so a path inside another is replaced as a whole.
        self.paths = sorted(paths.items(), key=lambda item: -len(item[0]))

    def text(self, value: str) -> str:
        for path, placeholder in self.paths:
            value = value.replace(path, placeholder)
        if ISO_TIME.match(value):
            return "<time>"
        return value

    def value(self, value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            return {k: self.value(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v, key) for v in value]
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, float) and EPOCH_MIN < value < EPOCH_MAX:
            return "<time>"
        if isinstance(value, float) and key in VARYING_FLOATS:
            return f"<{key}>"
        if isinstance(value, int) and not isinstance(value, bool) and key in VARYING_INTS:
            return f"<{key}>"
        return value


VARYING_FLOATS = {"seconds"}  # elapsed times (vector_reindex)
# Integer fields that differ between runs (process ids, elapsed milliseconds, sizes on disk).
VARYING_INTS = {"pid", "uptime_ms", "elapsed_ms", "bytes", "db_bytes", "size_bytes", "rss_bytes"}


def shorten(value: Any) -> Any:
    """``value`` with long strings cut and long lists trimmed, for reading."""
    if isinstance(value, dict):
        return {k: shorten(v) for k, v in value.items()}
    if isinstance(value, list):
        head = [shorten(v) for v in value[:MAX_ITEMS]]
        if len(value) > MAX_ITEMS:
            head.append(f"... {len(value) - MAX_ITEMS} more")
        return head
    if isinstance(value, str) and len(value) > MAX_STRING:
        return value[:MAX_STRING] + f"... ({len(value)} chars)"
    return value


def json_type(value: Any) -> str:
    """The JSON type of ``value``, an array with the types of its items."""
    if isinstance(value, list):
        inner = sorted({json_type(v) for v in value})
        return "array of " + " or ".join(inner) if inner else "array"
    return value_type(value)


def cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def schema_type(prop: dict[str, Any]) -> str:
    if "$ref" in prop:
        return f"`{prop['$ref'].rsplit('/', 1)[-1]}`"
    if "anyOf" in prop:
        return " or ".join(schema_type(p) for p in prop["anyOf"])
    if prop.get("format") == "date-time":
        return "string (ISO 8601 time)"
    if "enum" in prop and "type" not in prop:
        return "string"
    kind = prop.get("type", "any")
    if kind == "array" and "items" in prop:
        return f"array of {schema_type(prop['items'])}"
    return str(kind)


CONSTRAINTS = (
    ("minLength", "min length"),
    ("maxLength", "max length"),
    ("minimum", "min"),
    ("maximum", "max"),
    ("minItems", "min items"),
    ("maxItems", "max items"),
    ("pattern", "pattern"),
)


def constraints(prop: dict[str, Any]) -> str:
    parts = [f"{label} {prop[key]}" for key, label in CONSTRAINTS if key in prop]
    if "enum" in prop:
        parts.append("one of " + ", ".join(f"`{v}`" for v in prop["enum"]))
    return "; ".join(parts)


def properties_table(schema: dict[str, Any]) -> list[str]:
    props = schema.get("properties", {})
    if not props:
        return ["No arguments.", ""]
    required = set(schema.get("required", []))
    lines = [
        "| Argument | Type | Required / default | Constraints | Description |",
        "|---|---|---|---|---|",
    ]
    for name, prop in props.items():
        if name in required:
            need = "required"
        elif "default" in prop:
            need = f"default `{json.dumps(prop['default'])}`"
        else:
            need = "optional"
        lines.append(
            f"| `{name}` | {cell(schema_type(prop))} | {cell(need)} "
            f"| {cell(constraints(prop))} | {cell(prop.get('description', ''))} |"
        )
    return [*lines, ""]


def result_table(schema: dict[str, Any]) -> list[str]:
    """The fields of an ``outputSchema`` object: name, type, when present, meaning."""
    required = set(schema.get("required", []))
    lines = ["| Field | Type | Present | Description |", "|---|---|---|---|"]
    for name, prop in schema.get("properties", {}).items():
        notes = [prop.get("description", "")]
        if "enum" in prop:
            notes.append("one of " + ", ".join(f"`{v}`" for v in prop["enum"]))
        present = "always" if name in required else "when it applies"
        lines.append(
            f"| `{name}` | {cell(schema_type(prop))} | {present} "
            f"| {cell('; '.join(n for n in notes if n))} |"
        )
    return [*lines, ""]


def result_section(tool: dict[str, Any], answer: Any) -> list[str]:
    """What a call answers: the ``outputSchema`` fields, or that the answer is plain text."""
    schema = tool.get("outputSchema")
    if schema is None:
        if not isinstance(answer, str):
            raise SystemExit(
                f"gen_tools_doc: {tool['name']} answers JSON but declares no outputSchema"
            )
        return [
            "Plain text (one text content item, no `structuredContent`, no `outputSchema`).",
            "",
        ]
    lines = [
        f"`outputSchema` (generated from the result struct `{schema.get('title', '?')}`; "
        "listed with `[server] output_schema = true` to sessions on protocol 2025-06-18 and later, "
        "which get `structuredContent` either way):",
        "",
        *result_table(schema),
    ]
    for def_name, definition in schema.get("$defs", {}).items():
        lines += [f"`{def_name}`:", "", *result_table(definition)]
    return lines


def render_tool(tool: dict[str, Any], group: str, example: tuple[dict[str, Any], Any]) -> list[str]:
    notes = tool.get("annotations", {})
    # A hint left out has MCP's default: readOnlyHint false, destructiveHint true,
    # idempotentHint false (the last two only mean something for a tool that writes).
    if notes.get("readOnlyHint", False):
        hints = ["read-only"]
    else:
        hints = [
            "writes",
            "destructive" if notes.get("destructiveHint", True) else "not destructive",
            "idempotent" if notes.get("idempotentHint", False) else "not idempotent",
        ]
    schema = tool["inputSchema"]
    lines = [
        f"### `{tool['name']}`",
        "",
        f"**{tool.get('title') or notes.get('title') or tool['name']}**. Group: {group}. "
        f"Annotations: {', '.join(hints)}.",
        "",
        tool["description"],
        "",
        "#### Arguments",
        "",
        *properties_table(schema),
    ]
    for def_name, definition in schema.get("$defs", {}).items():
        lines += [f"`{def_name}`:", "", *properties_table(definition)]
    args, answer = example
    lines += ["#### Result", "", *result_section(tool, answer)[:-1]]
    lines += [
        "",
        "#### Example",
        "",
        "```json",
        json.dumps({"name": tool["name"], "arguments": args}, indent=2, ensure_ascii=False),
        "```",
        "",
    ]
    if isinstance(answer, str):
        lines += ["```text", answer.rstrip("\n"), "```", ""]
    else:
        lines += ["```json", json.dumps(shorten(answer), indent=2, ensure_ascii=False), "```", ""]
    return lines


HEADER = """# Tools

<!-- Generated by tools/gen_tools_doc.py from the live registry; do not edit by hand.
     Regenerate: python tools/gen_tools_doc.py (tests/test_tools_doc.py fails when stale). -->

Every tool `memtrio mcp` lists, in `tools/list` order, with its arguments (from
its `inputSchema`), the fields of its answer (from its `outputSchema`, which `tools/list` carries
only with `[server] output_schema = true`) and one real call. The examples
come from one run of a server with embeddings off, in a fresh home and a
checkout with one Python file (`<repo>`), called in the order of this page:
a memory is remembered, entities and relations created, then read, then
deleted. Answers are the `structuredContent` (the code tools answer plain
text); times read `<time>`, long strings
and lists are cut. Groups are the names `[tools] enabled` / `--tools` takes
(see [configuration.md](configuration.md)).
"""


def generate() -> str:
    """The text of docs/tools.md, from a fresh server."""
    with tempfile.TemporaryDirectory(prefix="memtrio-docs-") as name:
        tmp = Path(name).resolve()
        repo = make_repo(tmp / "repo")
        home = tmp / "home"
        home.mkdir()
        # One parser worker, whatever the machine's CPUs: server_status lists them.
        (home / "config.toml").write_text("[code]\nindex_threads = 1\n")
        groups = tool_groups(tmp, repo)
        with served(home, repo) as client:
            tools = list_tools(client)
            missing = {t["name"] for t in tools} ^ {name for name, _ in STEPS}
            if missing:
                raise SystemExit(f"gen_tools_doc: STEPS and tools/list differ: {sorted(missing)}")
            examples = run_examples(client, repo)
        stable = Stabilizer({str(repo): "<repo>", str(home): "<home>", str(tmp): "<tmp>"})
        lines = [HEADER, "## Contents", ""]
        lines += [f"- [`{t['name']}`](#{t['name']}): {t.get('title', '')}" for t in tools]
        lines += ["", "## Tools", ""]
        for tool in tools:
            args, answer = examples[tool["name"]]
            example = (stable.value(args), stable.value(answer))
            lines += render_tool(tool, groups.get(tool["name"], "?"), example)
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/tools.md is stale")
    parser.add_argument("--output", type=Path, default=DOC)
    options = parser.parse_args(argv)
    text = generate()
    if options.check:
        current = options.output.read_text() if options.output.exists() else ""
        if current != text:
            print(
                f"{options.output} is stale: regenerate it with python tools/gen_tools_doc.py",
                file=sys.stderr,
            )
            return 1
        print(f"{options.output} is up to date")
        return 0
    options.output.write_text(text)
    print(f"wrote {options.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
