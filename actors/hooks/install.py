"""``memtrio install CLIENT``: the MCP server entry and, where the client has them, the
hooks, written into the client's own configuration files.

Each client's files (`targets`) are edited in place: parsed, merged, written back
(atomically, the file's mode kept) with the previous content kept beside it as
``FILE.memtrio-backup``. An install is idempotent (a second one changes nothing),
``--dry-run`` prints the diff it would make and writes nothing, ``--uninstall``
removes what it wrote (and the containers left empty, and a file left empty).
memtrio's entries are recognised by what they are: the server named ``memtrio``
with memtrio's command, hooks whose command is ``COMMAND hook ...``. A setting it
did not write is never changed: an ``memtrio`` server entry with another command
is left as it is (and said so), and so is every other key.

Error handling: a file that is not the client's JSON (comments, a syntax error)
or TOML is refused with the path and the reason, before anything is written.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import shlex
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...supervisors.commands import CliError, resolve_home
from ...supervisors.context import AppRunner
from .digest import toplevel

CLIENTS = ("claude-code", "claude-desktop", "codex", "cursor", "vscode")
SERVER = "memtrio"
BACKUP_SUFFIX = ".memtrio-backup"
# Seconds the client lets a hook run before it abandons it (the hook's own limit,
# [hooks] timeout, is shorter).
CLIENT_TIMEOUT = 10
# Claude Code's hooks: event -> (matcher, memtrio's event).
CLAUDE_HOOKS = {
    "SessionStart": ("startup|resume|clear|compact", "session-start"),
    "UserPromptSubmit": ("", "user-prompt-submit"),
    "PreCompact": ("", "pre-compact"),
    "SessionEnd": ("", "session-end"),
}
# Codex's hooks (its hooks.json has Claude Code's shape; it has no SessionEnd).
CODEX_HOOKS = {k: v for k, v in CLAUDE_HOOKS.items() if k != "SessionEnd"}
TOML_BEGIN = "# memtrio install: begin (memtrio install codex --uninstall removes this block)"
TOML_END = "# memtrio install: end"


@dataclass
class Target:
    """One file of a client's configuration and how memtrio's part is merged into it."""

    path: Path
    kind: str  # "json" or "toml"
    edit: Callable[[Any, bool], Any]  # (parsed content, uninstall) -> new content


def _project_root() -> Path:
    """The Git repository of the current directory (its top), else the directory itself."""
    return toplevel(Path.cwd()) or Path.cwd()


def _app_config_dir(app: str) -> Path:
    """The per-user configuration directory of a desktop app (Claude, Code)."""
    home = Path.home()
    if sys.platform == "darwin":
        return home / "Library" / "Application Support" / app
    if sys.platform == "win32":
        return Path(os.environ.get("APPDATA") or home / "AppData" / "Roaming") / app
    return Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config") / app


def server_entry(command: str, vscode: bool = False, home: str = "") -> dict[str, Any]:
    """The MCP server entry ``memtrio install`` writes (``--home``: that home's server)."""
    entry: dict[str, Any] = {
        "command": command,
        "args": ["mcp", *(["--home", home] if home else [])],
    }
    return {"type": "stdio", **entry} if vscode else entry


def _is_ours_server(entry: Any, command: str, vscode: bool) -> bool:
    """An entry ``memtrio install`` wrote: memtrio's command and arguments, for any home."""
    if not isinstance(entry, dict) or not isinstance(entry.get("args"), list):
        return False
    args = entry["args"]
    home = args[2] if len(args) == 3 and args[1] == "--home" else ""
    return entry == server_entry(command, vscode, str(home))


def _is_ours_hook(hook: Any, command: str) -> bool:
    return isinstance(hook, dict) and str(hook.get("command", "")).startswith(f"{command} hook ")


class Merge:
    """The edits of one install: what they changed, what they left (``notes``)."""

    def __init__(self, command: str, home: str = "") -> None:
        self.command = command
        self.home = home
        # What each hook's command ends with: the home, when one was given.
        self.suffix = f" --home {shlex.quote(home)}" if home else ""
        self.notes: list[str] = []

    def servers(self, key: str, vscode: bool = False) -> Callable[[Any, bool], Any]:
        """Edit ``{key: {"memtrio": entry}}``."""
        wanted = server_entry(self.command, vscode, self.home)

        def edit(doc: dict[str, Any], uninstall: bool) -> dict[str, Any]:
            servers = doc.get(key)
            if servers is not None and not isinstance(servers, dict):
                raise CliError(f'"{key}" is not an object: left for you to fix')
            current = (servers or {}).get(SERVER)
            if current is not None and not _is_ours_server(current, self.command, vscode):
                self.notes.append(
                    f'a "{SERVER}" server memtrio did not write is in "{key}": left as it is'
                )
                return doc
            if uninstall:
                if current is not None:
                    del doc[key][SERVER]
                    if not doc[key]:
                        del doc[key]
                return doc
            doc.setdefault(key, {})[SERVER] = wanted
            return doc

        return edit

    def claude_hooks(
        self, events: dict[str, tuple[str, str]], client: str
    ) -> Callable[[Any, bool], Any]:
        """Edit Claude Code's (and Codex's) ``{"hooks": {Event: [{matcher, hooks}]}}``."""
        flag = "" if client == "claude-code" else f" --client {client}"

        def edit(doc: dict[str, Any], uninstall: bool) -> dict[str, Any]:
            hooks = doc.get("hooks")
            if hooks is not None and not isinstance(hooks, dict):
                raise CliError('"hooks" is not an object: left for you to fix')
            hooks = hooks if hooks is not None else {}
            for event, (matcher, ours) in events.items():
                groups = hooks.get(event, [])
                if not isinstance(groups, list):
                    raise CliError(f'"hooks.{event}" is not a list: left for you to fix')
                kept = []
                for group in groups:
                    if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                        rest = [h for h in group["hooks"] if not _is_ours_hook(h, self.command)]
                        if not rest and group["hooks"]:
                            continue  # a group of memtrio's hooks only: memtrio's
                        group = (
                            {**group, "hooks": rest} if len(rest) != len(group["hooks"]) else group
                        )
                    kept.append(group)
                if not uninstall:
                    handler = {
                        "type": "command",
                        "command": f"{self.command} hook {ours}{flag}{self.suffix}",
                        "timeout": CLIENT_TIMEOUT,
                    }
                    kept.append(
                        {"matcher": matcher, "hooks": [handler]}
                        if matcher
                        else {"hooks": [handler]}
                    )
                if kept:
                    hooks[event] = kept
                else:
                    hooks.pop(event, None)
            if hooks:
                doc["hooks"] = hooks
            else:
                doc.pop("hooks", None)
            return doc

        return edit

    def cursor_hooks(self) -> Callable[[Any, bool], Any]:
        """Edit Cursor's ``{"version": 1, "hooks": {"sessionStart": [{"command": ...}]}}``."""

        def edit(doc: dict[str, Any], uninstall: bool) -> dict[str, Any]:
            hooks = doc.get("hooks")
            if hooks is not None and not isinstance(hooks, dict):
                raise CliError('"hooks" is not an object: left for you to fix')
            hooks = hooks if hooks is not None else {}
            entries = [
                h for h in hooks.get("sessionStart", []) if not _is_ours_hook(h, self.command)
            ]
            if not uninstall:
                entries.append(
                    {"command": f"{self.command} hook session-start --client cursor{self.suffix}"}
                )
            if entries:
                hooks["sessionStart"] = entries
            else:
                hooks.pop("sessionStart", None)
            if hooks:
                doc.setdefault("version", 1)
                doc["hooks"] = hooks
            else:
                doc.pop("hooks", None)
                if set(doc) == {"version"}:
                    doc.clear()
            return doc

        return edit

    def codex_toml(self) -> Callable[[Any, bool], Any]:
        """Edit ``config.toml`` as text: memtrio's ``[mcp_servers.memtrio]`` block, between
        markers, appended or removed; the rest of the file is kept byte for byte."""
        block = "\n".join(
            [
                TOML_BEGIN,
                f"[mcp_servers.{SERVER}]",
                f"command = {json.dumps(self.command)}",
                f"args = {json.dumps(server_entry(self.command, home=self.home)['args'])}",
                TOML_END,
            ]
        )
        pattern = re.compile(rf"\n?{re.escape(TOML_BEGIN)}\n.*?{re.escape(TOML_END)}\n?", re.DOTALL)

        def edit(text: str, uninstall: bool) -> str:
            found = pattern.search(text)
            without = pattern.sub("", text) if found else text
            if SERVER in tomllib.loads(without).get("mcp_servers", {}):
                self.notes.append(
                    f"a [mcp_servers.{SERVER}] memtrio did not write is there: left as it is"
                )
                return text
            if uninstall:
                return without
            if found:  # memtrio's block, brought up to date where it is
                was = found.group()
                now = (
                    ("\n" if was.startswith("\n") else "")
                    + block
                    + ("\n" if was.endswith("\n") else "")
                )
                return text[: found.start()] + now + text[found.end() :]
            sep = "" if not without else ("\n" if without.endswith("\n") else "\n\n")
            return f"{without}{sep}{block}\n"

        return edit


def targets(client: str, scope: str, merge: Merge) -> list[Target]:
    """The files ``memtrio install CLIENT --scope SCOPE`` edits."""
    home = Path.home()
    if client == "claude-desktop":
        if scope == "project":
            raise CliError("claude-desktop has no project configuration: use --scope user")
        path = _app_config_dir("Claude") / "claude_desktop_config.json"
        return [Target(path, "json", merge.servers("mcpServers"))]
    root = _project_root() if scope == "project" else home
    if client == "claude-code":
        servers = root / ".mcp.json" if scope == "project" else home / ".claude.json"
        return [
            Target(servers, "json", merge.servers("mcpServers")),
            Target(
                root / ".claude" / "settings.json", "json", merge.claude_hooks(CLAUDE_HOOKS, client)
            ),
        ]
    if client == "codex":
        base = (
            root / ".codex"
            if scope == "project"
            else Path(os.environ.get("CODEX_HOME") or home / ".codex")
        )
        return [
            Target(base / "config.toml", "toml", merge.codex_toml()),
            Target(base / "hooks.json", "json", merge.claude_hooks(CODEX_HOOKS, client)),
        ]
    if client == "cursor":
        return [
            Target(root / ".cursor" / "mcp.json", "json", merge.servers("mcpServers")),
            Target(root / ".cursor" / "hooks.json", "json", merge.cursor_hooks()),
        ]
    path = (
        root / ".vscode" / "mcp.json"
        if scope == "project"
        else _app_config_dir("Code") / "User" / "mcp.json"
    )
    return [Target(path, "json", merge.servers("servers", vscode=True))]


def _render(kind: str, value: Any) -> str:
    if kind == "toml":
        return str(value)
    return "" if not value else json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def planned(target: Target, uninstall: bool) -> tuple[str, str]:
    """(the file's text now, its text after the edit); "" for a file that is not there."""
    try:
        before = target.path.read_text(encoding="utf-8")
    except FileNotFoundError:
        before = ""
    except OSError as exc:
        raise CliError(f"cannot read {target.path}: {exc.strerror}") from None
    if target.kind == "toml":
        try:
            tomllib.loads(before)
        except tomllib.TOMLDecodeError as exc:
            raise CliError(
                f"{target.path} is not valid TOML ({exc}): nothing was written"
            ) from None
        return before, target.edit(before, uninstall)
    try:
        doc = json.loads(before) if before.strip() else {}
    except json.JSONDecodeError as exc:
        raise CliError(
            f"{target.path} is not plain JSON ({exc.msg}, line {exc.lineno}; comments?): "
            "nothing was written; add memtrio's entry by hand (see README)"
        ) from None
    if not isinstance(doc, dict):
        raise CliError(f"{target.path} is not a JSON object: nothing was written")
    after = target.edit(json.loads(json.dumps(doc)), uninstall)
    if after == doc:
        return before, before
    return before, _kept_text(target.path, after) or _render("json", after)


def _kept_text(path: Path, doc: dict[str, Any]) -> str | None:
    """The backup's text when it holds ``doc`` (an uninstall after an install gives the file
    back as it was, its layout too)."""
    try:
        text = path.with_name(path.name + BACKUP_SUFFIX).read_text(encoding="utf-8")
        return text if doc and json.loads(text) == doc else None
    except (OSError, ValueError):
        return None


def write(path: Path, before: str, after: str) -> str | None:
    """Write ``after`` to ``path`` (atomically, mode kept), the old content to the backup;
    remove the file when ``after`` is empty. Returns the backup's path, if any."""
    backup = None
    if not after:  # the file held memtrio's entries only: memtrio created it
        path.unlink(missing_ok=True)
        path.with_name(path.name + BACKUP_SUFFIX).unlink(missing_ok=True)
        return None
    if before:
        backup = path.with_name(path.name + BACKUP_SUFFIX)
        backup.write_text(before, encoding="utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.memtrio-tmp")
    tmp.write_text(after, encoding="utf-8")
    if path.exists():
        os.chmod(tmp, path.stat().st_mode & 0o7777)
    os.replace(tmp, path)
    return str(backup) if backup else None


def cmd_install(args: argparse.Namespace, run: AppRunner) -> int:
    home = str(resolve_home(args)) if args.home else ""
    merge = Merge(args.command_path, home)
    plans = [(t, *planned(t, args.uninstall)) for t in targets(args.client, args.scope, merge)]
    for target, before, after in plans:
        shown = str(target.path)
        if before == after:
            print(f"{shown}: unchanged")
        elif args.dry_run:
            diff = difflib.unified_diff(
                before.splitlines(keepends=True),
                after.splitlines(keepends=True),
                fromfile=shown,
                tofile=f"{shown} (after)",
            )
            print(f"{shown}: would change")
            sys.stdout.writelines(diff)
        else:
            backup = write(target.path, before, after)
            verb = "removed" if not after else "wrote"
            print(f"{shown}: {verb}" + (f" (the previous content: {backup})" if backup else ""))
    for note in merge.notes:
        print(f"note: {note}")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    help_text = (
        "write memtrio's MCP server entry and hooks into an agent client's configuration "
        "(merged, with a backup, idempotent; --uninstall removes them)"
    )
    p = sub.add_parser("install", help=help_text, description=help_text)
    p.add_argument("client", choices=CLIENTS, help="the agent client to configure")
    p.add_argument(
        "--scope",
        choices=("project", "user"),
        default=None,
        help="project: the files of the current repository (default; claude-desktop: user "
        "only); user: the client's files for every project",
    )
    p.add_argument(
        "--home",
        help="the memtrio home the client's server and hooks use (written into the entries "
        "as --home; default: none written, so $MEMTRIO_HOME or ~/.memtrio)",
    )
    p.add_argument("--dry-run", action="store_true", help="print the changes, write nothing")
    p.add_argument("--uninstall", action="store_true", help="remove what install wrote")
    p.add_argument(
        "--command",
        dest="command_path",
        default="memtrio",
        metavar="PATH",
        help="the memtrio command the client runs (default: memtrio, found on its PATH)",
    )
    p.set_defaults(func=_with_default_scope)


def _with_default_scope(args: argparse.Namespace, run: AppRunner) -> int:
    if args.scope is None:
        args.scope = "user" if args.client == "claude-desktop" else "project"
    return cmd_install(args, run)
