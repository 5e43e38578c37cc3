"""The session digest, without an LLM: at ``pre-compact`` and ``session-end`` (with
``[hooks] digest = true``), one memory per session saying which files were edited and
which commands ran and how they ended, anchored to the edited files (so it turns stale
when they change).

The transcript the hook names (Claude Code's JSONL: ``assistant`` messages with
``tool_use`` blocks, ``user`` messages with their ``tool_result``) is read, never
stored: only the file paths and the commands go into the digest. The memory goes
through the ``remember`` and ``update`` tools as a tool call does (`run_tool`), so every
rule of the store's write path applies to it (scopes, limits, the ``[store] secrets``
screen: a credential in a command is redacted, or the digest refused). A second hook of the same session
(``pre-compact`` then ``session-end``) updates the session's digest instead of adding
one. No model loads: the memory is stored without a vector, recalled lexically until
the next ``memtrio reembed`` (or a server that embeds it).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...supervisors.context import AppContext, AppRunner
from ...supervisors.git import git_output
from ..anchors.args import CodeArg
from ..memory import tools
from ..memory.args import RememberArgs, UpdateArgs
from ..screening import run_tool
from ..store.domain.memories import list_memories
from ..store.tooling.runner import STORE_ONLY, tool_context
from ..store.tooling.services import store_of

DIGEST_TYPE = "session"
EDIT_TOOLS = {"Edit", "Write", "MultiEdit", "NotebookEdit"}
SHELL_TOOLS = {"Bash"}
MAX_TRANSCRIPT = 64 * 1024 * 1024  # bytes of transcript read, at most
MAX_FILES = 30
MAX_COMMANDS = 20
MAX_COMMAND = 160  # characters of one command shown
MAX_ANCHORS = 20
# Digests of the repository looked through for this session's (newest first).
LOOKBACK = 200


@dataclass
class Digest:
    edited: list[str] = field(default_factory=list)  # paths, first edit first
    commands: list[tuple[str, str]] = field(default_factory=list)  # (command, how it ended)


def read_transcript(path: Path) -> Digest:  # noqa: C901
    """The files edited and the commands run in the transcript at ``path``."""
    digest = Digest()
    pending: dict[str, str] = {}  # tool_use id -> command
    ended: dict[str, bool] = {}  # tool_use id -> failed
    with path.open("rb") as f:
        data = f.read(MAX_TRANSCRIPT)
    for raw in data.splitlines():
        try:
            entry = json.loads(raw)
        except ValueError:
            continue  # a partial last line, or not JSON
        message = entry.get("message") if isinstance(entry, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                name, args = block.get("name"), block.get("input") or {}
                if name in EDIT_TOOLS and isinstance(args, dict):
                    where = args.get("file_path") or args.get("notebook_path")
                    if isinstance(where, str) and where not in digest.edited:
                        digest.edited.append(where)
                elif name in SHELL_TOOLS and isinstance(args, dict):
                    command = args.get("command")
                    if isinstance(command, str) and block.get("id"):
                        pending[str(block["id"])] = command
            elif block.get("type") == "tool_result" and block.get("tool_use_id") in pending:
                ended[str(block["tool_use_id"])] = bool(block.get("is_error"))
    for use_id, command in pending.items():
        status = "no result" if use_id not in ended else ("failed" if ended[use_id] else "ok")
        digest.commands.append((command, status))
    return digest


def _shown(command: str) -> str:
    flat = " ".join(command.split())
    return flat if len(flat) <= MAX_COMMAND else flat[: MAX_COMMAND - 1] + "…"


def digest_text(session: str, digest: Digest, root: Path | None) -> str:
    """The memory's text: one line saying what the session did."""
    day = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    files = [_relative(p, root) or p for p in digest.edited[:MAX_FILES]]
    more = len(digest.edited) - len(files)
    parts = [f"Session digest ({day}, session {session})."]
    if files:
        parts.append(
            "Edited: " + ", ".join(files) + (f" and {more} more" if more > 0 else "") + "."
        )
    if digest.commands:
        ran = [f"`{_shown(c)}` ({status})" for c, status in digest.commands[-MAX_COMMANDS:]]
        parts.append("Ran: " + "; ".join(ran) + ".")
    return " ".join(parts)


def _relative(path: str, root: Path | None) -> str | None:
    """``path`` relative to the repository ``root``, or None when it is outside it."""
    if root is None:
        return None
    try:
        return Path(path).resolve().relative_to(root.resolve()).as_posix()
    except (ValueError, OSError):
        return None


def toplevel(cwd: Path) -> Path | None:
    """The top of the Git checkout ``cwd`` is in, or None."""
    top = git_output(["rev-parse", "--path-format=absolute", "--show-toplevel"], cwd)
    return Path(top) if top else None


def store_digest(
    args: argparse.Namespace, run: AppRunner, session_id: str, transcript_path: str
) -> None:
    """Store (or update) the digest of session ``session_id`` from its transcript.

    Error handling: a transcript that cannot be read raises `OSError`; the hook
    records it and prints nothing. A session that edited nothing and ran nothing
    stores nothing.
    """
    if not transcript_path or not session_id:
        return
    digest = read_transcript(Path(transcript_path))
    if not digest.edited and not digest.commands:
        return
    root = toplevel(Path.cwd())
    text = digest_text(session_id, digest, root)
    anchors = [
        CodeArg(path=rel) for rel in (_relative(p, root) for p in digest.edited) if rel is not None
    ][:MAX_ANCHORS]
    marker = f"session {session_id})"

    async def body(app: AppContext) -> int:
        ctx = tool_context(app)
        store = store_of(app)
        selection = store.policy.select(None)
        rows: list[dict[str, Any]] = await store.read(
            lambda tx: list_memories(tx, selection, DIGEST_TYPE, LOOKBACK), name="digest.find"
        )
        mine = next((m for m in rows if marker in m["content"]), None)
        if mine is None:
            made = RememberArgs(content=text, memory_type=DIGEST_TYPE, code=anchors)
            await run_tool(tools.tool_named("remember"), ctx, made)
        elif mine["content"] != text:
            changed = UpdateArgs(id=int(mine["id"]), content=text, code=anchors)
            await run_tool(tools.tool_named("update"), ctx, changed)
        return 0

    run(args, body, features=STORE_ONLY | {"code"}, extra_config={"log": {"stderr_level": "off"}})
