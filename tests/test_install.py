"""``memtrio install CLIENT``: merged into the client's own files, idempotent, a backup,
--dry-run writes nothing, --uninstall gives the file back as it was, and a setting
memtrio did not write is never changed."""

from __future__ import annotations

import json
import shlex
import subprocess
import tomllib
from pathlib import Path

import pytest
from memtrio.supervisors.cli import main

CLAUDE_SETTINGS = """{
  "permissions": {"allow": ["Bash(ls)"]},
  "env": {"FOO": "1"},
  "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "echo hi"}]}]}
}
"""
CODEX_TOML = 'model = "o3"\n\n[mcp_servers.other]\ncommand = "other"\nargs = ["serve"]\n'
MCP_JSON = '{"mcpServers": {"other": {"command": "other"}}, "inputs": []}\n'
VSCODE_JSON = '{"servers": {"other": {"type": "stdio", "command": "other"}}}\n'


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git checkout as the current directory, and a user home of its own."""
    root = (tmp_path / "proj").resolve()
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "sub").mkdir()
    monkeypatch.chdir(root / "sub")  # install finds the repository's top
    user = tmp_path / "user"
    user.mkdir()
    monkeypatch.setenv("HOME", str(user))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(user / ".config"))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    monkeypatch.delenv("APPDATA", raising=False)
    return root


def install(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["install", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


def cycle(
    capsys: pytest.CaptureFixture[str], root: Path, client: str, *extra: str
) -> dict[str, bytes]:
    """dry-run (nothing written), install, install again (unchanged), the installed files."""
    before = snapshot(root)
    code, out, _ = install(capsys, client, "--dry-run", *extra)
    assert code == 0 and "would change" in out and "+" in out
    assert snapshot(root) == before
    code, out, _ = install(capsys, client, *extra)
    assert code == 0 and "wrote" in out
    installed = snapshot(root)
    code, out, _ = install(capsys, client, *extra)
    assert code == 0 and out.count("unchanged") == out.count("\n")
    assert snapshot(root) == installed
    return installed


def test_claude_code_hooks_call_memtrio_and_other_settings_are_unchanged(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(CLAUDE_SETTINGS)
    cycle(capsys, project, "claude-code")
    after = json.loads(settings.read_text())
    original = json.loads(CLAUDE_SETTINGS)
    assert after["permissions"] == original["permissions"] and after["env"] == original["env"]
    assert after["hooks"]["PreToolUse"] == original["hooks"]["PreToolUse"]
    start = after["hooks"]["SessionStart"]
    assert start == [
        {
            "matcher": "startup|resume|clear|compact",
            "hooks": [{"type": "command", "command": "memtrio hook session-start", "timeout": 10}],
        }
    ]
    for event, ours in (
        ("UserPromptSubmit", "user-prompt-submit"),
        ("PreCompact", "pre-compact"),
        ("SessionEnd", "session-end"),
    ):
        assert after["hooks"][event][0]["hooks"][0]["command"] == f"memtrio hook {ours}"
    assert json.loads((project / ".mcp.json").read_text()) == {
        "mcpServers": {"memtrio": {"command": "memtrio", "args": ["mcp"]}}
    }
    assert (project / ".claude" / "settings.json.memtrio-backup").read_text() == CLAUDE_SETTINGS

    code, out, _ = install(capsys, "claude-code", "--uninstall")
    assert code == 0
    assert settings.read_text() == CLAUDE_SETTINGS  # byte for byte
    assert not (project / ".mcp.json").exists()  # memtrio created it


def test_codex_toml_keeps_the_rest_byte_for_byte(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = project / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(CODEX_TOML)
    cycle(capsys, project, "codex")
    parsed = tomllib.loads(config.read_text())
    assert parsed["model"] == "o3" and parsed["mcp_servers"]["other"]["command"] == "other"
    assert parsed["mcp_servers"]["memtrio"] == {"command": "memtrio", "args": ["mcp"]}
    assert config.read_text().startswith(CODEX_TOML)
    hooks = json.loads((project / ".codex" / "hooks.json").read_text())["hooks"]
    assert set(hooks) == {"SessionStart", "UserPromptSubmit", "PreCompact"}
    assert hooks["SessionStart"][0]["hooks"][0]["command"] == (
        "memtrio hook session-start --client codex"
    )
    install(capsys, "codex", "--uninstall")
    assert config.read_text() == CODEX_TOML
    assert not (project / ".codex" / "hooks.json").exists()


def test_codex_user_scope_follows_codex_home(
    project: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    code, _, _ = install(capsys, "codex", "--scope", "user")
    assert code == 0
    text = (tmp_path / "codex-home" / "config.toml").read_text()
    assert tomllib.loads(text)["mcp_servers"]["memtrio"]["args"] == ["mcp"]
    assert not (project / ".codex").exists()


def test_cursor_mcp_and_session_start_hook(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mcp = project / ".cursor" / "mcp.json"
    mcp.parent.mkdir()
    mcp.write_text(MCP_JSON)
    cycle(capsys, project, "cursor")
    servers = json.loads(mcp.read_text())["mcpServers"]
    assert servers["other"] == {"command": "other"}
    assert servers["memtrio"] == {"command": "memtrio", "args": ["mcp"]}
    hooks = json.loads((project / ".cursor" / "hooks.json").read_text())
    assert hooks == {
        "version": 1,
        "hooks": {"sessionStart": [{"command": "memtrio hook session-start --client cursor"}]},
    }
    install(capsys, "cursor", "--uninstall")
    assert mcp.read_text() == MCP_JSON
    assert not (project / ".cursor" / "hooks.json").exists()


def test_vscode_servers_key(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mcp = project / ".vscode" / "mcp.json"
    mcp.parent.mkdir()
    mcp.write_text(VSCODE_JSON)
    cycle(capsys, project, "vscode")
    assert json.loads(mcp.read_text())["servers"]["memtrio"] == {
        "type": "stdio",
        "command": "memtrio",
        "args": ["mcp"],
    }
    install(capsys, "vscode", "--uninstall")
    assert mcp.read_text() == VSCODE_JSON


def test_claude_desktop_is_user_level(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "user" / ".config" / "Claude" / "claude_desktop_config.json"
    config.parent.mkdir(parents=True)
    config.write_text('{"globalShortcut": "Ctrl+Space"}\n')
    code, out, _ = install(capsys, "claude-desktop")
    assert code == 0 and str(config) in out
    assert json.loads(config.read_text()) == {
        "globalShortcut": "Ctrl+Space",
        "mcpServers": {"memtrio": {"command": "memtrio", "args": ["mcp"]}},
    }
    code, _, err = install(capsys, "claude-desktop", "--scope", "project")
    assert code != 0 and "--scope user" in err
    install(capsys, "claude-desktop", "--uninstall")
    assert config.read_text() == '{"globalShortcut": "Ctrl+Space"}\n'


def test_a_memtrio_entry_it_did_not_write_is_left_as_it_is(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = (
        '{"mcpServers": {"memtrio": {"command": "/opt/memtrio", "args": ["mcp", "--no-attach"]}}}\n'
    )
    (project / ".mcp.json").write_text(mine)
    config = project / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text('[mcp_servers.memtrio]\ncommand = "/opt/memtrio"\n')
    for client in ("claude-code", "codex"):
        code, out, _ = install(capsys, client)
        assert code == 0 and "did not write" in out
        code, out, _ = install(capsys, client, "--uninstall")
        assert code == 0 and "did not write" in out
    assert (project / ".mcp.json").read_text() == mine
    assert config.read_text() == '[mcp_servers.memtrio]\ncommand = "/opt/memtrio"\n'


def test_a_file_that_is_not_plain_json_is_refused_untouched(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mcp = project / ".vscode" / "mcp.json"
    mcp.parent.mkdir()
    jsonc = '{\n  // my servers\n  "servers": {}\n}\n'
    mcp.write_text(jsonc)
    code, _, err = install(capsys, "vscode")
    assert code == 1 and "not plain JSON" in err and str(mcp) in err
    assert mcp.read_text() == jsonc
    assert not mcp.with_name("mcp.json.memtrio-backup").exists()


def test_the_command_option_names_the_executable(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    install(capsys, "claude-code", "--command", "/usr/local/bin/memtrio")
    settings = json.loads((project / ".claude" / "settings.json").read_text())
    command = settings["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"]
    assert command == "/usr/local/bin/memtrio hook user-prompt-submit"
    install(capsys, "claude-code", "--command", "/usr/local/bin/memtrio", "--uninstall")
    assert not (project / ".claude" / "settings.json").exists()


def test_home_is_written_into_every_entry_and_a_new_home_replaces_it(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = project / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(CODEX_TOML)
    for home in ("/srv/a home", "/srv/b"):
        assert install(capsys, "codex", "--home", home)[0] == 0
        parsed = tomllib.loads(config.read_text())
        assert parsed["mcp_servers"]["memtrio"]["args"] == ["mcp", "--home", home]
        hooks = json.loads((project / ".codex" / "hooks.json").read_text())["hooks"]
        assert [len(groups) for groups in hooks.values()] == [1, 1, 1]
        assert hooks["PreCompact"][0]["hooks"][0]["command"].endswith(f"--home {shlex.quote(home)}")
    assert config.read_text().count("[mcp_servers.memtrio]") == 1
    install(capsys, "codex", "--uninstall")
    assert config.read_text() == CODEX_TOML
