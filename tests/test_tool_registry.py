"""A tool is declared once, in its feature's ``tools`` module; every list of tools elsewhere
(docs/tools.md, the doc generator's example calls, the Inspector table, the README's counts,
the ``--tools`` groups) follows from that declaration or is checked against it here."""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

import test_inspector_args as inspector
from memtrio.actors.features import declared_tools
from memtrio.protocol.tools import GROUPS

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import gen_tools_doc  # noqa: E402 - tools/ is not a package

TOOLS = declared_tools()
NAMES = {tool.name for tool in TOOLS}


def test_each_tool_is_declared_once_in_a_known_group() -> None:
    twice = [name for name, n in Counter(t.name for t in TOOLS).items() if n > 1]
    assert not twice, f"declared more than once: {twice}"
    assert {t.group for t in TOOLS} <= set(GROUPS)
    assert set(gen_tools_doc.GROUPS) == set(GROUPS) - {"core"}


def test_the_doc_generator_calls_every_declared_tool() -> None:
    called = [name for name, _ in gen_tools_doc.STEPS]
    assert set(called) == NAMES, (
        f"add an example call to STEPS in tools/gen_tools_doc.py for {sorted(NAMES - set(called))}; "
        f"remove {sorted(set(called) - NAMES)}"
    )


def test_docs_tools_md_documents_every_declared_tool() -> None:
    text = (ROOT / "docs" / "tools.md").read_text()
    documented = set(re.findall(r"^### `([a-z_]+)`", text, re.MULTILINE))
    assert documented == NAMES, "regenerate it: python tools/gen_tools_doc.py"


def test_the_inspector_table_sends_every_tool_a_default_server_lists() -> None:
    # The vector tools are off by default (`--vectors`): the Inspector runs meet the rest.
    listed = {t.name for t in TOOLS if t.group != "vectors"}
    assert {name for name, _ in inspector.STEPS} == listed


def test_the_readme_counts_match_the_declarations() -> None:
    readme = (ROOT / "README.md").read_text()
    groups = Counter(t.group for t in TOOLS)
    graph = groups["graph-read"] + groups["graph-write"]
    more = re.search(r"the same 9 with the same arguments, plus (\d+) more", readme)
    assert more is not None and int(more[1]) == graph - 9
    memory = re.search(r"(\d+) memory tools \(.*`server_status`\)", readme)
    assert memory is not None and int(memory[1]) == groups["memory"] + groups["core"]
    code = re.search(r"(\d+) code tools", readme)
    assert code is not None and int(code[1]) == groups["code"]
