"""What a newcomer's first mistakes get back (issue 32, items 6-8).

- A typo in a ``MEMTRIO_*`` environment variable is warned about once, on every
  command, with the closest known name; the known names are declared in one place
  (`supervisors.environment`) and a test checks the tree against it.
- A value outside an enum names the argument and lists the allowed values, in
  tool results (through the official MCP client) and on the command line.
- Counts are printed with the right plural ("1 memory", "2 memories").
"""

from __future__ import annotations

import ast
import enum
import re
from pathlib import Path
from typing import Annotated, Literal

import msgspec
import pytest
import test_ui_api as ui_api
from mcp_client import fails, open_client, run_cli
from memtrio.actors.memory.args import GraphArgs
from memtrio.protocol.plural import plural, singular_of
from memtrio.protocol.validation import describe_validation_error
from memtrio.supervisors import config, environment
from memtrio.supervisors.commands import cli_flag
from serve_helpers import serve_process

ROOT = Path(__file__).resolve().parent.parent
NAME = re.compile(r"MEMTRIO_[A-Z0-9_]*[A-Z0-9](?![\w<])")  # not MEMTRIO_<SECTION>_<KEY>
# Deliberately unknown names: the typos these tests and tests/test_config.py make.
TYPOS = {
    "MEMTRIO_RETREIVAL_DAMPING",
    "MEMTRIO_EMBEDING",
    "MEMTRIO_RETRIEVAL_DAMPNG",
    "MEMTRIO_SOMETHING_ELSE",
    "MEMTRIO_ZZZQQQ",
    "MEMTRIO_CODE_MAX_FILE",
    "MEMTRIO_SERVE_AUTH_TOKEN",  # tests/test_reference_env.py: a token under a wrong name  # tests/test_reference_rows.py: a typo of a [code] key
}


def warnings_in(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "unknown environment variable" in line]


# -- item 6: unknown MEMTRIO_* names ----------------------------------------------------


def test_a_misspelt_section_variable_warns_once_with_the_closest_name(home: Path) -> None:
    done = run_cli("stats", home=home, env={"MEMTRIO_RETREIVAL_DAMPING": "0.6"})
    assert done.returncode == 0, done.stderr
    assert warnings_in(done.stderr) == [
        "memtrio: warning: unknown environment variable MEMTRIO_RETREIVAL_DAMPING is ignored "
        "(did you mean MEMTRIO_RETRIEVAL_DAMPING?)"
    ], done.stderr
    log = (home / "logs" / "memtrio.log").read_text()
    assert '"event":"unknown_environment_variable","variable":"MEMTRIO_RETREIVAL_DAMPING"' in log


def test_a_misspelt_alias_warns_once_on_mcp_with_the_closest_name(home: Path) -> None:
    done = run_cli("mcp", "--no-attach", home=home, env={"MEMTRIO_EMBEDING": "off"}, input="")
    assert done.returncode == 0, done.stderr
    assert warnings_in(done.stderr) == [
        "memtrio: warning: unknown environment variable MEMTRIO_EMBEDING is ignored "
        "(did you mean MEMTRIO_EMBEDDINGS?)"
    ], done.stderr


async def test_serve_warns_about_an_unknown_variable_before_it_listens(home: Path) -> None:
    env = {"MEMTRIO_EMBEDING": "off"}
    async with serve_process(home, ["--bind", "127.0.0.1:0"], env=env) as served:
        assert warnings_in(served.stderr_text()) == [
            "memtrio: warning: unknown environment variable MEMTRIO_EMBEDING is ignored "
            "(did you mean MEMTRIO_EMBEDDINGS?)"
        ], served.stderr_text()


def test_known_names_give_no_warning(home: Path) -> None:
    env = {
        "MEMTRIO_RETRIEVAL_DAMPING": "0.6",
        "MEMTRIO_EMBEDDINGS": "off",
        "MEMTRIO_LOG_STDERR_LEVEL": "warning",
        "MEMTRIO_TEST_STORES": "sqlite",
        "MEMTRIO_FAULTS": "",
    }
    done = run_cli("stats", home=home, env=env)
    assert done.returncode == 0 and done.stderr == "", done.stderr


def test_a_name_nothing_is_close_to_points_at_the_docs() -> None:
    found = environment.unknown_env({"MEMTRIO_ZZZQQQ": "1", "PATH": "/bin", "MEMTRIO_UI": "1"})
    assert found == [("MEMTRIO_ZZZQQQ", None)]
    assert "docs/configuration.md" in environment.unknown_env_warning("MEMTRIO_ZZZQQQ", None)


def test_a_misspelt_setting_is_refused_naming_the_closest_one(home: Path) -> None:
    cases = {
        "[retreival]\ndamping = 0.6\n": "unknown section [retreival] (did you mean [retrieval]?",
        "[retrieval]\ndampng = 0.6\n": "unknown key retrieval.dampng (did you mean damping?",
    }
    for text, expected in cases.items():
        (home / "config.toml").write_text(text)
        with pytest.raises(config.ConfigError, match=re.escape(expected)):
            config.load(home, env={})
    (home / "config.toml").unlink()
    with pytest.raises(config.ConfigError, match=r"did you mean MEMTRIO_RETRIEVAL_DAMPING\?"):
        config.load(home, env={"MEMTRIO_RETRIEVAL_DAMPNG": "0.6"})


def test_hostile_variable_names_are_warned_about_bounded_and_escaped(home: Path) -> None:
    env = {f"MEMTRIO_JUNK_{i:03}": "1" for i in range(30)}
    env["MEMTRIO_\x1b[2J" + "X" * 100_000] = "1"  # a terminal escape, and very long
    done = run_cli("stats", home=home, env=env)
    assert done.returncode == 0, done.stderr[:500]
    lines = warnings_in(done.stderr)
    assert len(lines) == environment.MAX_WARNINGS, lines
    assert (
        "memtrio: warning: and 11 more unknown MEMTRIO_* environment variables, ignored"
        in done.stderr.splitlines()
    )
    assert "\x1b" not in done.stderr and max(map(len, lines)) < 200
    assert "'MEMTRIO_\\x1b[2JXXX" in lines[0]


def test_every_memtrio_variable_in_the_tree_is_declared() -> None:
    """A name the code reads (or sets for a child, or the docs show) that is not a setting,
    an alias or in `environment.OTHER_ENV` would be warned about as a typo: declare it."""
    used: dict[str, str] = {}
    for folder in ("actors", "protocol", "supervisors", "tools", "tests"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    text = node.value
                elif isinstance(node, ast.keyword) and node.arg:
                    text = node.arg  # env.update(MEMTRIO_HOME=...)
                else:
                    continue
                if NAME.fullmatch(text):
                    used.setdefault(text, str(path.relative_to(ROOT)))
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for name in NAME.findall(path.read_text(encoding="utf-8")):
            used.setdefault(name, str(path.relative_to(ROOT)))
    known = set(environment.known_env_names())
    undeclared = {name: where for name, where in used.items() if name not in known | TYPOS}
    assert not undeclared, f"declare these in supervisors/environment.py OTHER_ENV: {undeclared}"
    unread = [name for name in environment.OTHER_ENV if name not in used]
    assert not unread, f"OTHER_ENV names nothing reads any more: {unread}"
    documented = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert [name for name in environment.OTHER_ENV if name not in documented] == []


# -- item 7: enum errors name the argument and list the allowed values ---------------------


async def test_enum_arguments_name_the_field_and_list_the_allowed_values(home: Path) -> None:
    async with open_client(home, args=["--vectors"]) as client:
        text = await fails(client, "get_neighbors", name="Alpha", direction="out")
        assert (
            "get_neighbors: Invalid arguments: direction: 'out' is not one of: both, incoming, outgoing"
            in text
        )
        text = await fails(client, "read_graph", mode="everything")
        assert (
            "read_graph: Invalid arguments: mode: 'everything' is not one of: full, names, summary"
            in text
        )
        text = await fails(client, "graph", entity="Alpha", direction=3)
        assert (
            "graph: Invalid arguments: direction: must be one of: both, incoming, outgoing (got `int`)"
            in text
        )
        # Any other argument error names the argument and says what it must be, in words.
        text = await fails(client, "graph", entity="Alpha", max_depth=9)
        assert "max_depth: expected an integer <= 3" in text


async def test_an_unknown_argument_lists_the_accepted_ones_and_the_one_meant(home: Path) -> None:
    """Issue #39 item 7: ``find_path {source, target}`` answered only ``Object contains
    unknown field `source``` (the arguments are ``from``/``to``)."""
    async with open_client(home) as client:
        text = await fails(client, "find_path", source="A", target="B")
        assert "unknown argument `source` (did you mean `from`?)" in text, text
        assert "accepted: `from`, `to`" in text
        text = await fails(client, "get_neighbors", entity="Alpha")
        assert "unknown argument `entity` (did you mean `name`?)" in text, text
        text = await fails(client, "merge_entities", source=["A"], target="B")
        assert "unknown argument `source` (did you mean `sources`?)" in text, text
        text = await fails(client, "recall", query="x", limt=3)
        assert "unknown argument `limt` (did you mean `limit`?)" in text, text
        text = await fails(client, "recall", query="x", limit="3")
        assert "limit: expected an integer, got a string" in text, text
        text = await fails(client, "recall", query="x", colour="red")
        assert "unknown argument `colour`; accepted: `query`" in text, text


class Kind(enum.Enum):
    A = "a"
    B = "b"


class Item(msgspec.Struct):
    kind: Kind = Kind.A


class Args(msgspec.Struct):
    items: list[Item] = []
    when: Annotated[Literal["now", "later"], msgspec.Meta(description="x")] | None = None


def test_allowed_values_follow_lists_optionals_and_nested_structs() -> None:
    def error(raw: bytes) -> str:
        with pytest.raises(msgspec.ValidationError) as info:
            msgspec.json.decode(raw, type=Args)
        return describe_validation_error(info.value, Args)

    assert error(b'{"items": [{}, {"kind": "c"}]}') == "items[1].kind: 'c' is not one of: a, b"
    assert error(b'{"when": "soon"}') == "when: 'soon' is not one of: later, now"
    assert error(b'{"items": 1}') == "items: expected a list, got an integer"
    long = error(b'{"when": "' + b"x" * 100_000 + b'"}')
    assert long == "when: '" + "x" * 78 + "… is not one of: later, now"


def test_the_cli_lists_the_choices_of_an_enum_option(home: Path) -> None:
    done = run_cli("graph", "Alpha", "--direction", "out", home=home)
    assert done.returncode == 2
    assert "argument --direction: invalid choice: 'out'" in done.stderr
    assert "'both', 'incoming', 'outgoing'" in done.stderr
    done = run_cli("stats", home=home, env={"MEMTRIO_CONTENT": "md"})
    assert done.returncode == 2
    assert 'server.content must be one of "auto", "markdown", "json", not md' in done.stderr


def test_a_cli_argument_refused_by_its_struct_is_named_by_its_flag() -> None:
    with pytest.raises(msgspec.ValidationError) as info:
        msgspec.convert({"entity": "A", "direction": "up"}, GraphArgs)
    text = describe_validation_error(info.value, GraphArgs, name=cli_flag)
    assert text == "`--direction`: 'up' is not one of: both, incoming, outgoing"


# -- item 8: plurals, and --memory-type --------------------------------------------------


def test_a_count_of_one_takes_the_singular() -> None:
    assert [plural(n, "memory") for n in (0, 1, 2)] == ["0 memories", "1 memory", "2 memories"]
    assert [plural(n, "time") for n in (0, 1, 2)] == ["0 times", "1 time", "2 times"]
    assert [plural(n, "match") for n in (0, 1, 2)] == ["0 matches", "1 match", "2 matches"]
    assert plural(1, "entity") == "1 entity" and plural(3, "key") == "3 keys"
    assert [singular_of(w) for w in ("memories", "matches", "paths", "status")] == [
        "memory",
        "match",
        "path",
        "status",
    ]


def test_cli_counts_of_one_are_singular(home: Path, tmp_path: Path) -> None:
    def cli(*args: str, where: Path = home) -> str:
        done = run_cli(*args, home=where)
        assert done.returncode == 0, done.stderr
        return done.stdout + done.stderr

    cli("remember", "Alpha uses Beta", "--scope", "global", "--memory-type", "decision")
    assert "global  1 memory  (writable)" in cli("scopes")
    shown = cli("show", "1", "--scope", "global")
    assert "[decision]" in shown and "accessed: 1 time, last" in shown
    assert "accessed: 2 times, last" in cli("show", "1", "--scope", "global")
    assert "#1 [decision]" in cli("list", "--scope", "global", "--memory-type", "DECISION")
    export = tmp_path / "one.jsonl"
    assert "exported 1 memory, 0 entities, 0 relations, 0 vectors" in cli("export", str(export))
    other = tmp_path / "other"
    other.mkdir()
    assert "added 1 memory, 0 entities, 0 relations, 0 vectors (0 memories were already" in cli(
        "import", str(export), where=other
    )
    assert "(1 memory was already present)" in cli("import", str(export), where=other)


def test_memory_type_is_accepted_on_every_command_that_takes_type(home: Path) -> None:
    for command in ("remember", "list", "search"):
        done = run_cli(command, "--help", home=home)
        assert "--type TYPE, --memory-type TYPE" in done.stdout, (command, done.stdout)
        assert "memory_type" in done.stdout


async def test_a_markdown_summary_of_one_memory_says_memory(home: Path) -> None:
    env = {"MEMTRIO_CONTENT": "markdown"}
    async with open_client(home, env=env) as client:
        await client.call_tool("remember", {"content": "Alpha uses Beta", "scopes": ["global"]})
        result = await client.call_tool(
            "recall", {"query": "Alpha", "scopes": ["global"], "use_embeddings": False}
        )
        summary = result.content[0].text
        assert summary.startswith("**recall** — 1 memory,"), summary


async def test_the_dashboard_api_lists_the_allowed_values_too(tmp_path: Path) -> None:
    async with ui_api.dashboard(tmp_path) as d:
        await ui_api.seed(d)
        bad = await d.get("graph", entity="Alpha", direction="sideways")
        assert bad.status_code == 400
        assert (
            "direction: 'sideways' is not one of: both, incoming, outgoing" in bad.json()["error"]
        )
        bad = await d.get("memories", q="queue", mode="fuzzy")
        assert bad.status_code == 400
        assert bad.json()["error"] == "mode: 'fuzzy' is not one of: lexical, semantic"
