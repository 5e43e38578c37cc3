"""The code tools end to end: the official MCP client against `memtrio mcp` on
a Git repository built in a temporary directory, and the `memtrio code` CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import waits
from gitrepo import git, make_repo, write
from mcp_client import call, every_transport, fails, ok, open_client, run_cli, stdio_only

pytestmark = every_transport

BILLING = """\
defmodule Billing do
  alias Billing.Repo

  def charge(amount), do: amount

  def refund(amount) do
    -amount
  end
end
"""

SERVICE = """\
import os
from app import models


def load_config(path):
    return path


class Loader:
    def run(self):
        pass
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = make_repo(
        tmp_path / "repo",
        {
            "lib/billing.ex": BILLING,
            "app/service.py": SERVICE,
            "app/broken.py": "def fine():\n    pass\n\ndef bad(:\n",
            "lib/old_name.rb": "module Tools\n  def self.run(x)\n    x\n  end\nend\n",
        },
    )
    git(root, "checkout", "-q", "-b", "feature")
    write(
        root,
        {
            "lib/billing.ex": BILLING.replace("-amount", "0 - amount").replace(
                "def charge", "def bill"
            ),
            "app/service.py": SERVICE + "\n\ndef added(x: int) -> int:\n    return x\n",
        },
    )
    git(root, "rm", "-q", "app/broken.py")
    git(root, "mv", "lib/old_name.rb", "lib/tools.rb")
    git(root, "commit", "-qam", "feature")
    return root


async def test_code_tools_over_mcp(repo: Path, home: Path, tmp_path: Path) -> None:
    other = make_repo(tmp_path / "other", {"x.rs": "fn other_fn(a: u8) -> u8 { a }\n"})
    outside = tmp_path / "outside.py"
    outside.write_text("def secret():\n    pass\n")
    (repo / "link.py").symlink_to(outside)
    write(
        repo, {"app/partial.py": "def fine():\n    pass\n\ndef bad(:\n"}
    )  # untracked files are indexed too
    async with open_client(home, cwd=repo) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert {"code_outline", "code_imports", "find_symbol", "code_diff"} <= set(listed)
        assert listed["code_outline"].input_schema["properties"]["limit"]["maximum"] == 500
        assert listed["find_symbol"].input_schema["properties"]["limit"]["maximum"] == 100
        assert listed["code_diff"].input_schema["properties"]["limit"]["maximum"] == 1000

        outline = await ok(client, "code_outline", path="lib/billing.ex")
        assert outline == (
            "lib/billing.ex\telixir\tcomplete\n"
            "1-9\tmodule Billing\n"
            "2-2\t  import Billing.Repo\n"
            "4-4\t  function bill/1\tdef bill(amount), do: amount\n"
            "6-8\t  function refund/1\tdef refund(amount) do"
        )
        page = await ok(client, "code_outline", path=str(repo / "lib/billing.ex"), limit=2)
        assert page.split("\n")[1:] == [
            "1-9\tmodule Billing",
            "2-2\t  import Billing.Repo",
            "next_offset 2 of 4",
        ]
        rest = await ok(client, "code_outline", path="lib/billing.ex", offset=2, limit=2)
        assert rest.split("\n")[1:] == [
            "4-4\t  function bill/1\tdef bill(amount), do: amount",
            "6-8\t  function refund/1\tdef refund(amount) do",
        ]
        top = await ok(client, "code_outline", path="lib/billing.ex", depth=0)
        assert top == "lib/billing.ex\telixir\tcomplete\n1-9\tmodule Billing"

        imports = await ok(client, "code_imports", path="app/service.py", limit=1)
        assert imports == "app/service.py\tpython\tcomplete\n1-1\tos\nnext_offset 1 of 2"

        broken = await ok(client, "code_outline", path="app/partial.py")
        assert broken.split("\n")[0] == "app/partial.py\tpython\tpartial: syntax error at line 4"
        assert "1-2\tfunction fine" in broken.split("\n")

        found = await ok(client, "find_symbol", query="bill")
        assert found.split("\n") == [  # the exact name (with arity) first, then prefixes
            "lib/billing.ex:4-4\tfunction bill/1\tin Billing\tdef bill(amount), do: amount",
            "lib/billing.ex:1-9\tmodule Billing",
        ]
        methods = await ok(client, "find_symbol", query="run", kind="method")
        assert methods.split("\n") == [  # exact names, then names ending in ".run"
            "app/service.py:10-11\tmethod run\tin Loader\tdef run(self):",
            "lib/tools.rb:2-4\tmethod self.run\tin Tools\tdef self.run(x)",
        ]
        assert await ok(client, "find_symbol", query="no_such_symbol_anywhere") == ""
        many = await ok(client, "find_symbol", query="l", limit=1)
        assert many.split("\n")[-1].endswith("matches; raise limit for more")
        assert await ok(client, "find_symbol", query="other_fn", root=str(other)) == (
            "x.rs:1-1\tfunction other_fn\tfn other_fn(a: u8) -> u8 { a }"
        )

        assert "contains '..'" in await fails(client, "code_outline", path="lib/../lib/billing.ex")
        assert "symlink" in await fails(client, "code_outline", path="link.py")
        assert "outside the checkout" in await fails(client, "code_imports", path=str(outside))
        assert "absolute" in await fails(client, "find_symbol", query="x", root="relative/dir")
        assert "not inside a Git checkout" in await fails(
            client, "find_symbol", query="x", root=str(tmp_path)
        )
        assert "limit" in await fails(client, "code_outline", path="lib/billing.ex", limit=501)
        assert "starts with '-'" in await fails(client, "code_diff", base="--output=/tmp/pwned")
        assert "starts with '-'" in await fails(client, "code_diff", base="main", head="-p")

        diff = await ok(client, "code_diff", base="main")
        lines = diff.split("\n")
        assert lines[0].startswith("merge base ") and " head " in lines[0]
        assert lines[1:] == [
            "app/broken.py\tdeleted\tpartial: syntax error at line 4",
            "  - 1-2\tfunction fine",
            "  - 4-4\tfunction bad",
            "app/service.py\tmodified",
            "  + 14-15\tfunction added\tdef added(x: int) -> int:",
            "lib/billing.ex\tmodified",
            "  - 4-4\tfunction charge/1",
            "  + 4-4\tfunction bill/1\tdef bill(amount), do: amount",
            "  ~ 6-8\tfunction refund/1\tdef refund(amount) do",
            "lib/tools.rb\trenamed from lib/old_name.rb",
        ]
        one = await ok(client, "code_diff", base="main", limit=1)
        assert one.split("\n")[-1] == "1 of 4 changed files"
        is_error, _ = await call(client, "code_diff", base="main", head="no-such-rev")
        assert is_error


@stdio_only("the CLI alone: no MCP session")
async def test_code_cli_index_and_diff(repo: Path, home: Path) -> None:
    (repo / "data.py").write_bytes(b"\x00binary")
    done = run_cli("code", "index", "--root", str(repo / "lib"), cwd=home, home=home)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"indexed 4 source files of {repo} (4 parsed) in ")
    assert done.stdout.splitlines()[1:] == ["not indexed (1):", "  data.py\tbinary"]
    again = run_cli("code", "index", "--json", cwd=repo, home=home)
    assert (
        '"parsed": 0' in again.stdout
        and '"not_indexed": [{"path": "data.py", "reason": "binary"}]' in again.stdout
    )
    diff = run_cli("code", "diff", "main", cwd=repo, home=home)
    assert diff.returncode == 0, diff.stderr
    assert "  + 4-4\tfunction bill/1\tdef bill(amount), do: amount" in diff.stdout.splitlines()
    refused = run_cli("code", "diff", "--", "-x", cwd=repo, home=home)
    assert refused.returncode != 0 and "starts with '-'" in refused.stderr


async def test_code_off_hides_tools_and_command(repo: Path, home: Path) -> None:
    async with open_client(home, cwd=repo, env={"MEMTRIO_CODE": "off"}) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert not names & {"code_outline", "code_imports", "find_symbol", "code_diff"}
        assert "remember" in names
    done = run_cli("code", "index", cwd=repo, home=home, env={"MEMTRIO_CODE": "off"})
    assert done.returncode != 0
    assert "code navigation is disabled" in done.stderr
    assert not (home / "code-v2.sqlite").exists()


async def test_parser_crash_over_mcp_is_reported_and_replaced(tmp_path: Path, home: Path) -> None:
    root = make_repo(
        tmp_path / "repo",
        {"crash.py": "def boom():\n    pass\n", "fine.py": "def fine():\n    pass\n"},
    )
    async with open_client(
        home, cwd=root, env={"MEMTRIO_FAULTS": "code.parse:crash.py=exit"}
    ) as client:
        assert await ok(client, "find_symbol", query="fine") == "fine.py:1-2\tfunction fine"
        assert await ok(client, "find_symbol", query="boom") == ""
        message = await fails(client, "code_outline", path="crash.py")
        assert "not indexed: parser worker crashed (exit status 137) and was replaced" in message
        # The replacement is running once its process said it is ready: wait for that.
        parsers: dict[str, Any] = {}

        async def parsers_running() -> bool:
            nonlocal parsers
            status = await ok(client, "server_status")
            (parsers,) = [a for a in status["actors"] if a["id"] == "code.parsers"]
            return all(child["state"] == "running" for child in parsers["children"])

        await waits.until(parsers_running, 30)
        assert parsers["state"] == "running"
        assert sum(child["restarts"] for child in parsers["children"]) == 1
        assert all(child["state"] == "running" for child in parsers["children"])


async def test_server_starts_without_code_tools_when_the_index_cannot_open(
    repo: Path, home: Path
) -> None:
    (home / "code-v2.sqlite").mkdir()
    async with open_client(home, cwd=repo) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert "remember" in names and "find_symbol" not in names
        status = await ok(client, "server_status")
        assert "code" not in status["features"]
