"""Start-up cost: `memtrio mcp` answers ``initialize`` and the model-free commands run
without loading what they do not need.

Importing numpy, igraph, onnxruntime, tokenizers or tree-sitter costs tens of milliseconds
each, hypercorn and the dashboard as much again; `memtrio list` and friends must
not pay for them (issue #16), and neither may ``memtrio mcp`` before its first
reply (issue #32: it answered ``initialize`` 2.6 times later than the reference
server). Each case runs in a fresh interpreter, which then reports what it had
imported.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from memtrio.actors.chaos.client import initialize_params, request_message
from memtrio.actors.net import spawn
from memtrio.supervisors import cli

# Imported by neither `memtrio mcp` before its first reply nor a model-free command:
# the model, ranking, vector-index and parser libraries (loaded when first needed,
# after `initialize`), the network transports and the dashboard (`memtrio serve`,
# `memtrio ui`) and the PostgreSQL driver (a postgresql:// store only).
PACKAGES = frozenset(
    {
        "numpy",
        "igraph",
        "onnxruntime",
        "tokenizers",
        "tree_sitter",
        "usearch",
        "hypercorn",
        "h11",
        "h2",
        "wsproto",
        "trio_websocket",
        "psycopg",
        "tqdm",  # progress bars: imported when a long job starts (supervisors/progress.py)
    }
)
PREFIXES = ("memtrio.actors.ui", "memtrio.actors.net.http", "memtrio.actors.net.ws")

INITIALIZE = request_message("initialize", initialize_params("lean-startup", "2025-06-18"), 0)
# `memtrio mcp` in a fresh interpreter; the modules it had imported when it wrote its
# first reply (the protocol stream is written with os.write, by trio's FdStream).
MCP_PROBE = """
import json, os, sys
write, seen = os.write, []
def spy(fd, data):
    if not seen and b'"protocolVersion"' in bytes(data):
        seen.append(sorted(sys.modules))
    return write(fd, data)
os.write = spy
from memtrio.supervisors.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "modules": seen[0] if seen else None}), file=sys.stderr)
"""
# A command in a fresh interpreter; the modules it had imported when it ended.
CLI_PROBE = """
import json, sys
from memtrio.supervisors.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def unwanted(modules: list[str]) -> list[str]:
    return [m for m in modules if m.split(".")[0] in PACKAGES or m.startswith(PREFIXES)]


def probe(
    source: str,
    argv: list[str],
    home: Path,
    embeddings: str,
    stdin: str = "",
    env_extra: dict[str, str] | None = None,
) -> list[str]:
    """Run ``source`` with ``argv`` in a fresh interpreter; the modules it reports."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMTRIO_")}
    env["MEMTRIO_EMBEDDINGS"] = embeddings
    env.update(env_extra or {})
    done = subprocess.run(
        [sys.executable, "-c", source, *argv, "--home", str(home)],
        env=env,
        cwd=home,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    assert report["code"] == 0, done.stderr
    assert report["modules"] is not None, f"no reply was written: {done.stdout!r} {done.stderr}"
    return report["modules"]


def loaded_by(argv: list[str], home: Path) -> list[str]:
    """The unwanted modules a fresh interpreter imported to run ``memtrio ARGV``."""
    return unwanted(probe(CLI_PROBE, argv, home, "off"))


def test_importing_the_cli_loads_no_heavy_library(tmp_path: Path) -> None:
    assert loaded_by(["stats"], tmp_path) == []


@pytest.mark.parametrize(
    "argv",
    [["list"], ["show", "1"], ["scopes"], ["search", "--lexical", "memory"]],
)
def test_model_free_commands_load_no_heavy_library(tmp_path: Path, argv: list[str]) -> None:
    loaded_by(["remember", "a memory about start-up"], tmp_path)  # the memory to show
    assert loaded_by(argv, tmp_path) == []


def test_mcp_answers_initialize_before_loading_the_model_ranker_network_or_dashboard(
    tmp_path: Path,
) -> None:
    """Embeddings on (the default): the model and the ranker load after the reply."""
    home = tmp_path / "home"
    home.mkdir()
    modules = probe(MCP_PROBE, ["mcp", "--no-attach"], home, "on", json.dumps(INITIALIZE) + "\n")
    assert unwanted(modules) == []
    # It did start the features whose tools it lists (the check above is not vacuous).
    assert "memtrio.actors.ranker.feature" in modules
    assert "memtrio.actors.embedder.feature" in modules


def test_mcp_children_answer_initialize_before_loading_the_model_ranker_network_or_dashboard(
    tmp_path: Path,
) -> None:
    """The attach model (the default): the first child, which starts the owner and answers
    ``initialize`` itself meanwhile, and a child attached to that owner."""
    home = tmp_path / "home"
    home.mkdir()
    attach = {"MEMTRIO_SERVE_ATTACH": "auto"}
    hello = json.dumps(INITIALIZE) + "\n"
    try:
        first = probe(MCP_PROBE, ["mcp"], home, "on", hello, attach)
        assert spawn.owner_pids(home), "the first child started the owner"
        attached = probe(MCP_PROBE, ["mcp"], home, "on", hello, attach)
    finally:
        spawn.kill_owners(home)
    assert unwanted(first) == [] and unwanted(attached) == []
    # The first child answered from the features it set up; the attached one relayed.
    assert "memtrio.actors.embedder.feature" in first
    assert "memtrio.actors.net.relay" in attached
    assert "memtrio.actors.embedder.feature" not in attached  # no feature set up


def test_each_command_module_registers_the_commands_it_is_listed_with() -> None:
    """`memtrio X` imports only X's module (`cli.COMMAND_MODULES`): the list must be true."""
    for name, listed in cli.COMMAND_MODULES.items():
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(name, cli.__package__).register(sub)
        assert tuple(sub.choices) == listed, name


def test_a_command_parses_alike_with_its_module_alone() -> None:
    argv = ["search", "--lexical", "--limit", "3", "a query"]
    assert vars(cli.build_parser("search").parse_args(argv)) == vars(
        cli.build_parser().parse_args(argv)
    )


def test_help_before_a_command_still_lists_every_command() -> None:
    """`memtrio -h mcp`: an option before the command gets the full parser."""
    shown = cli.build_parser(cli.command_of(["-h", "mcp"])).format_help()
    assert all(name in shown for names in cli.COMMAND_MODULES.values() for name in names)
