"""``memtrio hook EVENT``: one agent-lifecycle hook, run by the client with its JSON on stdin.

Events (Claude Code's names; Codex uses the same protocol, Cursor its own output):

- ``session-start`` (``SessionStart``, every ``source``: startup, resume, clear,
  compact): prints `session_context` as ``hookSpecificOutput.additionalContext``;
- ``user-prompt-submit`` (``UserPromptSubmit``): prints the memories relevant to
  ``prompt`` (`prompt_context`), only when they clear ``[hooks] prompt_threshold``;
- ``pre-compact`` and ``session-end``: with ``[hooks] digest = true``, store the
  session's digest (``actors.hooks.digest``); they print nothing.

Error handling: a hook never blocks or breaks the agent. Any failure (a
malformed input, a missing home, a store that cannot open, a timeout after
``[hooks] timeout`` seconds) prints nothing on stdout and exits 0; the reason is a
``hooks`` event of the trace log (when the home exists). stderr is closed to the
hook's own output: nothing but the hook's answer is printed. Nothing downloads and
no server or model starts: the store is read in process, lexically.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec

from ...supervisors import trace
from ...supervisors.commands import load_config, resolve_home
from ...supervisors.config import log_path
from ...supervisors.context import AppContext, AppRunner
from ..store.tooling.runner import STORE_ONLY
from . import context as C
from .digest import store_digest

ACTOR = "hooks"
# Bytes of hook input read at most (Claude Code's input is a few hundred bytes; a prompt
# may be long): the rest is not read, and the input is then malformed.
MAX_INPUT = 1024 * 1024

# memtrio's event name -> the client's (Claude Code and Codex) event name.
EVENTS = {
    "session-start": "SessionStart",
    "user-prompt-submit": "UserPromptSubmit",
    "pre-compact": "PreCompact",
    "session-end": "SessionEnd",
}
CLIENTS = ("claude-code", "codex", "cursor")
PROMPT_HEADING = "memtrio: memories of this repository that may bear on this prompt"
QUIET: dict[str, dict[str, Any]] = {"log": {"stderr_level": "off"}}
SESSION_HEADING = "memtrio: what is remembered about this repository (memtrio context)"


class HookInput(msgspec.Struct, kw_only=True):
    """The fields of a client's hook input that memtrio reads (the others are ignored)."""

    session_id: str = ""
    transcript_path: str = ""
    cwd: str = ""
    hook_event_name: str = ""
    source: str = ""
    prompt: str = ""
    # Cursor's names: the workspace roots, the conversation.
    workspace_roots: list[str] = msgspec.field(default_factory=list)
    conversation_id: str = ""


_decode = msgspec.json.Decoder(HookInput)


class HookFailed(Exception):
    """Why a hook printed nothing (the trace log's ``reason``)."""


def read_input(stream: Any) -> HookInput:
    """The hook input on ``stream``; `HookFailed` when it is not the client's JSON object."""
    data = stream.read(MAX_INPUT + 1)
    if len(data) > MAX_INPUT:
        raise HookFailed(f"hook input over {MAX_INPUT} bytes")
    try:
        return _decode.decode(data)
    except msgspec.ValidationError as exc:
        raise HookFailed(f"hook input: {exc}") from None
    except msgspec.DecodeError as exc:
        raise HookFailed(f"hook input is not JSON: {exc}") from None


def answer(client: str, event: str, text: str) -> bytes:
    """The client's JSON output carrying ``text`` for ``event``."""
    if client == "cursor":
        return msgspec.json.encode({"additional_context": text})
    return msgspec.json.encode(
        {"hookSpecificOutput": {"hookEventName": EVENTS[event], "additionalContext": text}}
    )


def _watchdog(seconds: float, event: str, done: threading.Event) -> threading.Thread:
    """A daemon thread that ends the process, printing nothing, after ``seconds``."""

    def run() -> None:
        if not done.wait(seconds):
            trace.record(ACTOR, "timeout", "warning", hook=event, seconds=seconds)
            os._exit(0)

    thread = threading.Thread(target=run, name="hook-watchdog", daemon=True)
    thread.start()
    return thread


def _workdir(hook: HookInput) -> None:
    """Run in the session's directory (its repository is the scope)."""
    where = hook.cwd or (hook.workspace_roots[0] if hook.workspace_roots else "")
    if not where:
        return
    if not Path(where).is_dir():
        raise HookFailed(f"cwd {where!r} is not a directory")
    os.chdir(where)


def _body(args: argparse.Namespace, hook: HookInput) -> Callable[[AppContext], Awaitable[int]]:
    """The body run with the app: sets ``args.out_text``, the text to inject (or "")."""

    async def body(app: AppContext) -> int:
        cfg = app.config.hooks
        if args.event == "session-start":
            found = await C.session_context(app, cfg.context_tokens)
            args.out_text = found.text(SESSION_HEADING)
        elif args.event == "user-prompt-submit" and hook.prompt.strip():
            found, best = await C.prompt_context(
                app, hook.prompt, cfg.prompt_threshold, cfg.prompt_tokens
            )
            args.out_best = best
            args.out_text = found.text(PROMPT_HEADING)
        return 0

    return body


def cmd_hook(args: argparse.Namespace, run: AppRunner) -> int:
    """Run one hook; always exit 0 (see the module's error handling)."""
    started = time.perf_counter()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)  # nothing but the hook's answer is printed
    home = resolve_home(args)
    if not home.is_dir():
        return 0  # no home: nothing remembered, and no trace log to write to
    try:
        cfg, _ = load_config(args)
        trace.LOG.configure(log_path(cfg, home), cfg.log.level, "off")
    except Exception:  # noqa: BLE001 - a hook never fails the agent
        return 0
    done = threading.Event()
    _watchdog(cfg.hooks.timeout, args.event, done)
    try:
        hook = read_input(sys.stdin.buffer)
        _workdir(hook)
        args.out_text, args.out_best = "", None
        if args.event in ("pre-compact", "session-end"):
            if cfg.hooks.digest:
                store_digest(args, run, hook.session_id, hook.transcript_path)
        elif args.event == "session-start" or hook.prompt.strip():
            # Session start shows which memories' code changed: the code feature too.
            features = STORE_ONLY | {"code"} if args.event == "session-start" else STORE_ONLY
            run(args, _body(args, hook), features=features, extra_config=QUIET)
        out = answer(args.client, args.event, args.out_text) if args.out_text else b""
    except BaseException as exc:  # noqa: BLE001 - a hook never fails the agent
        done.set()
        trace.record(
            ACTOR, "failed", "warning", hook=args.event, error=f"{type(exc).__name__}: {exc}"
        )
        return 0
    done.set()
    if out:
        sys.stdout.buffer.write(out + b"\n")
        sys.stdout.buffer.flush()
    trace.record(
        ACTOR,
        "answered",
        hook=args.event,
        client=args.client,
        injected=bool(out),
        best=args.out_best,
        seconds=round(time.perf_counter() - started, 3),
    )
    return 0
