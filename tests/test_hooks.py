"""The agent-lifecycle hooks end to end: ``memtrio hook EVENT`` run as the client runs it,
its documented JSON on stdin, its output checked against the documented schema; and
``memtrio context``.

Claude Code's hook output for SessionStart and UserPromptSubmit:
``{"hookSpecificOutput": {"hookEventName": EVENT, "additionalContext": TEXT}}``; a hook
that has nothing to add prints nothing. A hook never breaks the agent: exit 0 and
nothing on stdout or stderr on any error, the reason in the trace log.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import zygote
from gitrepo import git, make_repo
from memtrio.supervisors.cli import main

SOURCES = ("startup", "resume", "clear", "compact")
CONVENTION = "We format Python with ruff, line length 100, and never use black"
DECISION = "Decision: every store write goes through the single writer actor"


def env_for(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMTRIO_")}
    env.update({"MEMTRIO_HOME": str(home), "MEMTRIO_EMBEDDINGS": "off"}, **extra)
    return env


def hook(
    home: Path, event: str, payload: bytes | dict[str, Any], *argv: str, **env: str
) -> subprocess.CompletedProcess[bytes]:
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return subprocess.run(
        zygote.command(["hook", event, *argv]),
        input=data,
        capture_output=True,
        env=env_for(home, **env),
        timeout=120,
    )


def additional_context(proc: subprocess.CompletedProcess[bytes], event: str) -> str:
    """The injected text, after checking the output against Claude Code's schema."""
    assert proc.returncode == 0 and proc.stderr == b""
    out = json.loads(proc.stdout)
    assert set(out) == {"hookSpecificOutput"}
    assert set(out["hookSpecificOutput"]) == {"hookEventName", "additionalContext"}
    assert out["hookSpecificOutput"]["hookEventName"] == event
    text = out["hookSpecificOutput"]["additionalContext"]
    assert isinstance(text, str) and text
    return text


def silent(proc: subprocess.CompletedProcess[bytes]) -> None:
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")


def trace_events(home: Path) -> list[dict[str, Any]]:
    lines = (home / "logs" / "memtrio.log").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e.get("actor") == "hooks"]


@pytest.fixture
def seeded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """(home, repository) with a convention, a decision, an observation and a global memory."""
    repo = make_repo(tmp_path / "proj", {"app.py": "def run():\n    return 1\n"})
    home = tmp_path / "home"
    monkeypatch.chdir(repo)
    monkeypatch.setenv("MEMTRIO_HOME", str(home))
    monkeypatch.setenv("MEMTRIO_EMBEDDINGS", "off")
    monkeypatch.setenv("MEMTRIO_CODE", "off")
    for argv in (
        [CONVENTION, "--type", "convention", "--importance", "0.9"],
        [DECISION, "--type", "decision", "--importance", "0.5"],
        ["The flaky test was a race in the relay, fixed by draining first"],
        ["Prefer pathlib over os.path everywhere", "--scope", "global"],
    ):
        assert main(["remember", *argv]) == 0
    return home, repo


def test_session_start_injects_context_for_every_source(seeded: tuple[Path, Path]) -> None:
    home, repo = seeded
    for source in SOURCES:
        proc = hook(
            home,
            "session-start",
            {
                "session_id": "abc123",
                "transcript_path": str(home / "none.jsonl"),
                "cwd": str(repo),
                "hook_event_name": "SessionStart",
                "source": source,
            },
        )
        text = additional_context(proc, "SessionStart")
        # Conventions and decisions first (by importance), then recent, then global.
        assert text.index(CONVENTION) < text.index(DECISION) < text.index("flaky test")
        assert text.index("flaky test") < text.index("Prefer pathlib")
    answered = [e for e in trace_events(home) if e["event"] == "answered"]
    assert len(answered) == len(SOURCES) and all(e["injected"] for e in answered)
    assert not (home / "run").exists()  # no server was started


def test_user_prompt_submit_injects_only_memories_that_bear_on_the_prompt(
    seeded: tuple[Path, Path],
) -> None:
    home, repo = seeded
    asked = {"session_id": "s", "cwd": str(repo), "hook_event_name": "UserPromptSubmit"}
    proc = hook(home, "user-prompt-submit", {**asked, "prompt": "which line length does ruff use?"})
    text = additional_context(proc, "UserPromptSubmit")
    assert CONVENTION in text and DECISION not in text and "pathlib" not in text
    # A prompt memory cannot help with: nothing at all (no noise).
    silent(hook(home, "user-prompt-submit", {**asked, "prompt": "write a haiku about autumn"}))
    silent(hook(home, "user-prompt-submit", {**asked, "prompt": "   "}))


def test_malformed_input_prints_nothing_and_says_why_in_the_trace_log(
    seeded: tuple[Path, Path],
) -> None:
    home, repo = seeded
    bad = [
        b"",
        b"{not json",
        b"[1, 2]",
        b'{"cwd": 5}',
        b'{"prompt": "\xff\xfe"}',
        json.dumps({"cwd": str(repo / "gone"), "source": "startup"}).encode(),
    ]
    for payload in bad:
        for event in ("session-start", "user-prompt-submit"):
            silent(hook(home, event, payload))
    failed = [e for e in trace_events(home) if e["event"] == "failed"]
    assert len(failed) == 2 * len(bad)
    assert any("not JSON" in e["error"] for e in failed)
    assert any("not a directory" in e["error"] for e in failed)


def test_a_missing_home_prints_nothing_and_creates_nothing(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "proj", {"a.py": "x = 1\n"})
    home = tmp_path / "no-such-home"
    for source in SOURCES:
        silent(hook(home, "session-start", {"cwd": str(repo), "source": source}))
    silent(hook(home, "user-prompt-submit", {"cwd": str(repo), "prompt": "ruff line length"}))
    silent(hook(home, "session-end", {"cwd": str(repo), "session_id": "s"}))
    assert not home.exists()


def test_a_repository_with_no_memories_gets_nothing(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "proj", {"a.py": "x = 1\n"})
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    for source in SOURCES:
        silent(hook(home, "session-start", {"cwd": str(repo), "source": source}))
    silent(hook(home, "user-prompt-submit", {"cwd": str(repo), "prompt": "ruff line length"}))
    assert [e["injected"] for e in trace_events(home) if e["event"] == "answered"] == [False] * 5


def test_a_hook_over_its_time_prints_nothing_and_exits_0(seeded: tuple[Path, Path]) -> None:
    home, repo = seeded
    (home / "config.toml").write_text("[hooks]\ntimeout = 0.001\n")
    silent(hook(home, "session-start", {"cwd": str(repo), "source": "startup"}))
    assert [e["event"] for e in trace_events(home)] == ["timeout"]


def test_cursor_gets_its_own_output_shape(seeded: tuple[Path, Path]) -> None:
    home, repo = seeded
    proc = hook(
        home,
        "session-start",
        {"conversation_id": "c", "workspace_roots": [str(repo)], "hook_event_name": "sessionStart"},
        "--client",
        "cursor",
    )
    assert proc.returncode == 0 and proc.stderr == b""
    out = json.loads(proc.stdout)
    assert set(out) == {"additional_context"} and CONVENTION in out["additional_context"]


def transcript(path: Path, repo: Path) -> Path:
    """A Claude Code transcript: two edits, a command that failed, one that passed."""
    entries = [
        {"type": "user", "message": {"role": "user", "content": "fix the bug"}},
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Editing."},
                    {
                        "type": "tool_use",
                        "id": "t1",
                        "name": "Edit",
                        "input": {"file_path": str(repo / "app.py"), "old_string": "1"},
                    },
                    {
                        "type": "tool_use",
                        "id": "t2",
                        "name": "Bash",
                        "input": {"command": "python -m pytest tests/test_app.py"},
                    },
                ],
            },
        },
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "ok"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "t2",
                        "content": "1 failed",
                        "is_error": True,
                    },
                ],
            },
        },
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "t3",
                        "name": "Write",
                        "input": {"file_path": str(repo / "lib.py")},
                    },
                    {
                        "type": "tool_use",
                        "id": "t4",
                        "name": "Bash",
                        "input": {"command": "ruff check ."},
                    },
                ],
            },
        },
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t4", "content": "All checks passed!"}
                ],
            },
        },
    ]
    path.write_text("".join(json.dumps(e) + "\n" for e in entries) + '{"partial')
    return path


def test_digest_is_off_by_default_then_one_memory_per_session(
    seeded: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home, repo = seeded
    monkeypatch.setenv("MEMTRIO_CODE", "on")  # `list` shows the anchors' statuses
    (repo / "lib.py").write_text("def helper():\n    return 2\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "lib")
    payload = {
        "session_id": "sess-42",
        "transcript_path": str(transcript(tmp_path / "t.jsonl", repo)),
        "cwd": str(repo),
        "hook_event_name": "PreCompact",
        "trigger": "auto",
    }

    def digests() -> list[dict[str, Any]]:
        assert main(["list", "--type", "session", "--json"]) == 0
        return json.loads(capsys.readouterr().out)

    silent(hook(home, "pre-compact", payload))
    assert digests() == []
    (home / "config.toml").write_text("[hooks]\ndigest = true\n")
    silent(hook(home, "pre-compact", payload))
    silent(hook(home, "session-end", {**payload, "hook_event_name": "SessionEnd"}))
    found = digests()
    assert len(found) == 1, found
    text = found[0]["content"]
    assert "session sess-42" in text and "app.py, lib.py" in text
    assert "`python -m pytest tests/test_app.py` (failed)" in text
    assert "`ruff check .` (ok)" in text and "old_string" not in text
    assert {a["path"] for a in found[0]["code"]} == {"app.py", "lib.py"}
    assert not found[0].get("stale")
    (repo / "app.py").write_text("def run():\n    return 3\n")  # the digest's code changed
    assert digests()[0]["stale"] is True
    assert main(["context"]) == 0
    text = capsys.readouterr().out
    changed = text.split("## Code changed since", 1)[1].split("\n## ", 1)[0]
    assert "session sess-42" in changed and "(code changed: app.py changed)" in changed


def test_context_fits_its_budget_and_ranks_by_query(
    seeded: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["context", "--json"]) == 0
    full = json.loads(capsys.readouterr().out)
    assert len(full["ids"]) == 4 and full["tokens"] <= 1500
    assert main(["context", "--json", "--max-tokens", "30"]) == 0
    small = json.loads(capsys.readouterr().out)
    assert 1 <= len(small["ids"]) < 4 and small["tokens"] <= 30
    assert CONVENTION in small["text"]  # the most important convention comes first
    assert main(["context", "--query", "relay race flaky", "--json"]) == 0
    asked = json.loads(capsys.readouterr().out)
    assert len(asked["ids"]) == 1 and "flaky test" in asked["text"]
    assert main(["context", "--format", "claude-code"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["hookSpecificOutput"]["hookEventName"] == "SessionStart"


def test_the_hooks_install_writes_run_and_answer(
    seeded: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``memtrio install claude-code --home H``: the commands it writes, run as Claude Code
    runs them (no MEMTRIO_HOME), inject the memories of H."""
    home, repo = seeded
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert main(["install", "claude-code", "--home", str(home)]) == 0
    capsys.readouterr()
    settings = json.loads((repo / ".claude" / "settings.json").read_text())
    (group,) = settings["hooks"]["SessionStart"]
    assert group["matcher"] == "startup|resume|clear|compact"
    command = shlex.split(group["hooks"][0]["command"])
    assert command[:3] == ["memtrio", "hook", "session-start"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMTRIO_")}
    proc = subprocess.run(
        [sys.executable, "-m", "memtrio.supervisors.cli", *command[1:]],
        input=json.dumps({"cwd": str(repo), "source": "compact"}).encode(),
        capture_output=True,
        env={**env, "MEMTRIO_EMBEDDINGS": "off"},
        timeout=120,
    )
    assert CONVENTION in additional_context(proc, "SessionStart")
    server = json.loads((repo / ".mcp.json").read_text())["mcpServers"]["memtrio"]
    assert server == {"command": "memtrio", "args": ["mcp", "--home", str(home)]}


def test_a_secret_in_a_command_never_reaches_the_store(
    seeded: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The digest goes through the store's write path: [store] secrets (default: redact)."""
    home, repo = seeded
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    path = tmp_path / "t.jsonl"
    use = {"type": "tool_use", "id": "t1", "name": "Bash"}
    entries = [
        {"type": "assistant", "message": {"content": [{**use, "input": {"command": f"GH_TOKEN={token} gh pr create"}}]}},
        {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}},
    ]  # fmt: skip
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    (home / "config.toml").write_text("[hooks]\ndigest = true\n")
    payload = {"session_id": "s-secret", "transcript_path": str(path), "cwd": str(repo)}
    silent(hook(home, "session-end", payload))
    assert main(["list", "--type", "session", "--json"]) == 0
    (found,) = json.loads(capsys.readouterr().out)
    assert "gh pr create" in found["content"] and token not in found["content"]
    assert token.encode() not in (home / "memtrio.sqlite").read_bytes()


def test_codex_gets_claude_codes_output_shape(seeded: tuple[Path, Path]) -> None:
    home, repo = seeded
    asked = {"session_id": "s", "cwd": str(repo), "hook_event_name": "UserPromptSubmit"}
    proc = hook(
        home,
        "user-prompt-submit",
        {**asked, "prompt": "which line length does ruff use?", "model": "gpt-5"},
        "--client",
        "codex",
    )
    assert CONVENTION in additional_context(proc, "UserPromptSubmit")
