"""The command line as a user meets it: flags every command takes, errors in CLI words,
quiet switches, stdin, grouped search, import reports, and docs that match the code."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from mcp_client import run_cli
from memtrio.actors.chaos.cli import _kept_base
from memtrio.supervisors import config as config_mod
from memtrio.supervisors.cli import build_parser, main
from memtrio.supervisors.commands import cli_words

ROOT = Path(__file__).resolve().parent.parent


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def commands(
    parser: argparse.ArgumentParser | None = None, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every runnable command: (its words, its parser)."""
    parser = parser or build_parser()
    children = _subparsers(parser)
    if not children and path:
        yield path, parser
    for name, child in children.items():
        yield from commands(child, (*path, name))


# -- every command takes --home; --help is complete and matches the README ------------


def test_every_command_takes_home() -> None:
    found = dict(commands())
    assert ("chaos",) in found and ("export",) in found and ("code", "index") in found
    missing = [
        " ".join(p) for p, parser in found.items() if "--home" not in parser._option_string_actions
    ]
    assert missing == []


@pytest.mark.parametrize("words", [p for p, _ in commands()], ids=" ".join)
def test_every_help_exits_0(words: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main([*words, "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: memtrio {' '.join(words)}") and "--home" in out


def test_every_command_in_the_readme_table_exists() -> None:
    table = (ROOT / "README.md").read_text().split("## Command line", 1)[1].split("\n## ", 1)[0]
    known = {p for p, _ in commands()}
    named = 0
    for row in table.splitlines():
        if not row.startswith("| `memtrio"):
            continue
        for cell in re.findall(r"`([^`]+)`", row.split(" | ")[0]):
            words = [w for w in cell.split() if w != "memtrio"]
            parser, path = build_parser(), ()
            for word in words:
                children = _subparsers(parser)
                if word not in children:
                    break
                parser, path = children[word], (*path, word)
            assert path in known, f"README names `{cell}`, which is not a command"
            named += 1
    assert named >= 15


def test_chaos_home_is_where_its_servers_homes_go(tmp_path: Path) -> None:
    args = build_parser().parse_args(["chaos", "--home", str(tmp_path)])
    assert _kept_base(args) == tmp_path
    assert _kept_base(build_parser().parse_args(["chaos"])) is None


# -- export -o ----------------------------------------------------------------------------------


def test_export_takes_output_flag_and_file(
    cli_checkout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "remember", "exported fact")[0] == 0
    for argv in (["-o", "a.jsonl"], ["--output", "b.jsonl"], ["c.jsonl"]):
        code, out, err = run(capsys, "export", *argv)
        name = argv[-1]
        assert code == 0 and out == "" and "exported 1 memory" in err, err
        lines = (cli_checkout / name).read_text().splitlines()
        assert json.loads(lines[0])["type"] == "header" and len(lines) > 1
    code, _, err = run(capsys, "export", "x.jsonl", "-o", "y.jsonl")
    assert code == 1 and "once" in err and not (cli_checkout / "y.jsonl").exists()


# -- errors in CLI words -----------------------------------------------------------------------


def test_forget_in_another_repository_speaks_cli(
    cli_checkout: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    monkeypatch.chdir(other)
    made = run_json(capsys, "remember", "a fact of the other repository")
    monkeypatch.chdir(cli_checkout)
    code, _, err = run(capsys, "forget", str(made["id"]))
    assert code == 1 and "not found" in err
    assert "`--scope SCOPE`" in err and "`memtrio scopes`" in err
    assert "list_scopes" not in err and "`scopes`" not in err
    code, _, err = run(capsys, "forget", str(made["id"]), "--scope", made["scopes"][0])
    assert code == 1 and "run memtrio in that repository" in err and "restart" not in err
    code, _, err = run(capsys, "show", str(made["id"]), "--scope", made["scopes"][0])
    assert code == 0, err


def test_tool_wording_is_translated_at_the_cli_boundary() -> None:
    assert cli_words("pass root as an absolute directory inside one") == (
        "run it inside one or pass `--root DIR`"
    )
    assert cli_words("root '/x' is not inside") == "--root '/x' is not inside"
    assert cli_words("`memory_type` must not be empty (for example `observation`)") == (
        "`--type` must not be empty (for example `observation`)"
    )
    assert cli_words("Expected `array` - at `$.scopes[0]`") == "Expected `array` - at `--scope`"


def test_invalid_flag_value_names_the_flag(
    cli_checkout: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "remember", "x", "--type", " ")
    assert code == 1 and "`--type`" in err and "memory_type" not in err


def test_code_index_outside_a_checkout_says_root(
    outside_checkout: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "code", "index")
    assert code == 1 and "not inside a Git checkout" in err, err
    assert "`--root DIR`" in err and "the current directory" in err
    assert "server's directory" not in err and "pass root" not in err


# -- a feature switched off on purpose is quiet --------------------------------------------


@pytest.mark.parametrize(
    ("args", "env"),
    [(["--tools", "memory"], {}), ([], {"MEMTRIO_CODE": "off"})],
    ids=["tools-memory", "code-off"],
)
def test_turning_a_tool_group_off_prints_no_warning(
    args: list[str], env: dict[str, str], tmp_path: Path
) -> None:
    env = {**env, "MEMTRIO_LOG_STDERR_LEVEL": "warning"}
    done = run_cli("mcp", *args, home=tmp_path / "home", cwd=tmp_path, env=env, input="")
    assert done.returncode == 0, done.stderr
    assert "feature_unavailable" not in done.stderr and "warning" not in done.stderr.lower()
    log = (tmp_path / "home" / "logs" / "memtrio.log").read_text()
    assert "feature_disabled" in log


# -- stdin, search groups, import reports -------------------------------------------------------


def test_remember_stdin_drops_the_trailing_newline(
    cli_checkout: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"line one\nline two\n")))
    made = run_json(capsys, "remember", "-")
    shown = run_json(capsys, "show", str(made["id"]))
    assert shown["content"] == "line one\nline two"


def test_search_groups_repository_and_global_results(
    cli_checkout: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scope = f"repo:{cli_checkout / '.git'}"
    run_json(capsys, "remember", "global tea note", "--scope", "global")
    run_json(capsys, "remember", "tea tea tea repository note")
    run_json(capsys, "remember", "tea repository aside, with many other words in it")
    run_json(capsys, "remember", "tea tea global favourite", "--scope", "global")
    ranked = run_json(capsys, "search", "tea", "--lexical")
    scores = {m["id"]: m["score"] for m in ranked["memories"]}
    code, out, _ = run(capsys, "search", "tea", "--lexical")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"{scope} (2):" and lines[5] == "global (2):", out
    repo_ids = [int(line[1:].split()[0]) for line in lines[1:5:2]]
    global_ids = [int(line[1:].split()[0]) for line in lines[6:10:2]]
    assert set(repo_ids) == {2, 3} and set(global_ids) == {1, 4}
    for ids in (repo_ids, global_ids):
        assert [scores[i] for i in ids] == sorted((scores[i] for i in ids), reverse=True)


def test_reimport_reports_what_was_added(
    cli_checkout: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run_json(capsys, "remember", "fact one", "--entity", "alpha", "--relation", "a:uses:b")
    run_json(capsys, "remember", "fact two")
    export = tmp_path / "store.jsonl"
    assert run(capsys, "export", "-o", str(export))[0] == 0
    monkeypatch.setenv("MEMTRIO_HOME", str(tmp_path / "fresh"))
    first = run_json(capsys, "import", str(export))
    assert first["memories"] == 2 and first["entities"] == 3 and first["relations"] == 1
    again = run_json(capsys, "import", str(export))
    assert {k: again[k] for k in ("memories", "entities", "relations", "vectors")} == dict.fromkeys(
        ("memories", "entities", "relations", "vectors"), 0
    )
    code, out, _ = run(capsys, "import", str(export))
    assert code == 0 and out.strip() == (
        "added 0 memories, 0 entities, 0 relations, 0 vectors (2 memories were already present)"
    )


def test_reimport_counts_no_vector_already_there(
    cli_checkout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import sqlite3

    run_json(capsys, "remember", "fact with a vector")
    conn = sqlite3.connect(tmp_path / "home" / "memtrio.sqlite")
    conn.execute(
        "INSERT INTO vectors VALUES ('memory', 1, 'm', 'r1', 2, ?)",
        (b"\x00\x00\x80?\x00\x00\x00\x00",),
    )
    conn.commit()
    conn.close()
    export = tmp_path / "v.jsonl"
    assert run(capsys, "export", str(export))[0] == 0
    again = run_json(capsys, "import", str(export))
    assert again["vectors"] == 0 and again["skipped_memories"] == 1


# -- docs/configuration.md matches the config schema -------------------------------------------


def test_configuration_doc_lists_every_key_with_its_default() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text()
    block = text.split("## All keys, with their defaults", 1)[1].split("```toml\n", 1)[1]
    documented = tomllib.loads(block.split("\n```", 1)[0])
    sections = config_mod._sections()  # not `Config.invalid`, which is no section
    defaults = {k: v for k, v in msgspec.to_builtins(config_mod.Config()).items() if k in sections}
    assert set(documented) == set(defaults), "sections"
    for section, values in defaults.items():
        missing = sorted(set(values) - set(documented[section]))
        unknown = sorted(set(documented[section]) - set(values))
        assert (missing, unknown) == ([], []), f"[{section}] missing {missing}, unknown {unknown}"
        for key, value in values.items():
            assert documented[section][key] == value, f"[{section}] {key}"


# -- options before the command, as git and pip take them ------------------------------------


def test_options_before_the_command_are_the_commands_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``memtrio --home X list`` used to answer ``invalid choice: 'X'``."""
    monkeypatch.setenv("MEMTRIO_EMBEDDINGS", "off")
    monkeypatch.setenv("MEMTRIO_CODE", "off")
    monkeypatch.delenv("MEMTRIO_HOME", raising=False)
    home = tmp_path / "home"
    code, _, err = run(capsys, "--home", str(home), "remember", "--scope", "global", "a note")
    assert code == 0, err
    code, out, err = run(capsys, "--home", str(home), "--log-level", "off", "list", "--json")
    assert code == 0, err
    assert [m["content"] for m in json.loads(out)] == ["a note"]
    code, out, err = run(capsys, f"--home={home}", "stats", "--json")
    assert code == 0 and json.loads(out)["memories"] == 1, err
    # A word that names a command can be an option's value: the home called "list".
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "--home", "list", "list")
    assert code == 0 and (tmp_path / "list").is_dir(), err


def test_options_before_a_command_group_reach_the_subcommand(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for argv in (
        ["--embedding-batch-size", "4", "mcp", "--help"],
        ["--log-level", "off", "code", "index", "--help"],
    ):
        with pytest.raises(SystemExit) as done:
            main(argv)
        assert done.value.code == 0, capsys.readouterr().err
        command = " ".join(w for w in argv if w in ("mcp", "code", "index"))
        assert f"usage: memtrio {command}" in capsys.readouterr().out


def test_an_option_no_command_takes_is_still_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--bogus", "list"])
    assert done.value.code == 2
    assert "--bogus" in capsys.readouterr().err


# -- outside a checkout, a message that says what the user can still do ----------------------


@pytest.fixture
def outside_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    outside = tmp_path / "plain"
    outside.mkdir()
    monkeypatch.chdir(outside)
    monkeypatch.setenv("MEMTRIO_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MEMTRIO_EMBEDDINGS", "off")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    monkeypatch.delenv("MEMTRIO_CODE", raising=False)
    monkeypatch.delenv("MEMTRIO_FAULTS", raising=False)
    return outside


def test_code_index_root_outside_a_checkout_does_not_ask_for_root(
    outside_checkout: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--root DIR`` on a plain directory used to answer "run it inside one or pass
    `--root DIR`", which is what the user had just done."""
    code, _, err = run(capsys, "code", "index", "--root", str(outside_checkout))
    assert code == 1 and "is not inside a Git checkout" in err, err
    assert "pass `--root DIR`" not in err
    assert "point `--root` at a directory of a checkout" in err and "git init" in err


def test_stale_outside_a_checkout_names_no_argument_it_lacks(
    outside_checkout: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``memtrio stale`` has no ``code`` argument; its refusal used to say "leave `code` out"."""
    code, _, err = run(capsys, "stale")
    assert code == 1, err
    assert "`code`" not in err and "review_stale" not in err, err
    assert "memtrio stale lists" in err and "run it inside a Git checkout" in err
