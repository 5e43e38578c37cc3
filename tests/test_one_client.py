"""Tests, tools and the chaos harness speak JSON-RPC to a server through one client and start
it in one environment: ``actors/chaos/client.py`` (its blocking twin: ``blocking.py``).

A copy drifts: the four line clients and two ``server_env`` copies this replaced had
diverged (which variables pass through, whether the code index runs, how a reply is read),
so a fix reached one driver and not the others. These checks fail when a copy comes back.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Where the one client and the one environment live; tests/launch.py points the
# environment at the running test's store.
CLIENT = "actors/chaos/client.py"
SERVER_ENV = {CLIENT, "tests/launch.py"}


def sources() -> Iterator[tuple[str, str]]:
    for folder in ("actors", "protocol", "supervisors", "tests", "tools"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            yield str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")


def test_one_server_env() -> None:
    defined = {name for name, text in sources() if re.search(r"^def server_env\(", text, re.M)}
    assert defined == SERVER_ENV, f"a server_env copy: use {CLIENT}'s (or tests/launch.py's)"


def test_no_driver_spells_out_its_own_initialize() -> None:
    """An ``initialize`` request's parameters are built by `client.initialize_params`."""
    spelled = re.compile(r'"clientInfo": \{')
    copies = [name for name, text in sources() if spelled.search(text) and name != CLIENT]
    assert copies == [], f"use client.initialize_params / request_message in {copies}"


def test_no_tool_reads_a_server_s_replies_by_itself() -> None:
    """A tool reads a server's stdout through ``blocking.BlockingClient`` (stderr is its own)."""
    readers = [
        name
        for name, text in sources()
        if name.startswith("tools/") and re.search(r"stdout\.(readline|read)\(", text)
    ]
    assert readers == [], f"use memtrio.actors.chaos.blocking.BlockingClient in {readers}"
