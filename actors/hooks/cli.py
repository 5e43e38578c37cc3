"""``memtrio context``, ``memtrio hook EVENT`` and ``memtrio install CLIENT``."""

from __future__ import annotations

import argparse
from typing import Any

from ...supervisors.commands import CliError, add_common, emit
from ...supervisors.context import AppContext, AppRunner
from ..store.tooling.runner import STORE_ONLY, run_store_command
from . import context as C
from . import hook, install

SubParsers = argparse._SubParsersAction


def cmd_context(args: argparse.Namespace, run: AppRunner) -> int:
    """Print what an agent should know here now (see docs/hooks.md, "memtrio context")."""
    if not 1 <= args.max_tokens <= 1_000_000:
        raise CliError("--max-tokens must be 1 to 1000000")
    if args.threshold is not None and not 0 <= args.threshold <= 1:
        raise CliError("--threshold must be 0 to 1 (a share of the query's words)")

    async def body(app: AppContext) -> int:
        if args.query is not None:
            least = app.config.hooks.prompt_threshold if args.threshold is None else args.threshold
            found, _ = await C.prompt_context(app, args.query, least, args.max_tokens)
            heading = hook.PROMPT_HEADING
        else:
            found = await C.session_context(app, args.max_tokens)
            heading = hook.SESSION_HEADING
        text = found.text(heading)
        if args.format == "text":
            emit(
                args,
                {"text": text, "ids": found.ids, "tokens": found.tokens},
                lambda r: r["text"].rstrip("\n") or "nothing remembered here yet",
            )
        elif text:
            event = "user-prompt-submit" if args.query is not None else "session-start"
            print(hook.answer(args.format, event, text).decode())
        return 0

    features = STORE_ONLY if args.query is not None else STORE_ONLY | {"code"}
    return run_store_command(args, _features(run, features), body)


def _features(run: AppRunner, features: frozenset[str]) -> AppRunner:
    """``run`` starting exactly ``features``."""

    def wrapped(args: argparse.Namespace, body: Any, **kw: Any) -> int:
        kw["features"] = features
        return run(args, body, **kw)

    return wrapped


def register(sub: SubParsers[argparse.ArgumentParser]) -> None:
    help_text = (
        "what an agent should know about this repository now, within a token budget "
        "(conventions and decisions, memories whose code changed, recent ones, the global tier)"
    )
    p = sub.add_parser("context", help=help_text, description=help_text)
    add_common(p)
    p.add_argument(
        "--max-tokens", type=int, default=1500, help="token budget, chars/4 (default: 1500)"
    )
    p.add_argument(
        "--query",
        metavar="TEXT",
        help="the memories relevant to TEXT instead (lexical; those holding at least "
        "--threshold of its words)",
    )
    p.add_argument(
        "--threshold",
        type=float,
        help="with --query: the share of TEXT's words a memory must hold "
        "(default: [hooks] prompt_threshold)",
    )
    p.add_argument(
        "--format",
        choices=("text", *hook.CLIENTS),
        default="text",
        help="text (default), or the hook output JSON of a client (claude-code and codex: "
        "hookSpecificOutput.additionalContext; cursor: additional_context)",
    )
    p.add_argument("--json", action="store_true", help="with --format text: JSON")
    p.set_defaults(func=cmd_context)

    help_text = (
        "run an agent-lifecycle hook (the client's hook JSON on stdin, its answer on stdout); "
        "it never fails the agent (on any error: exit 0, nothing printed)"
    )
    h = sub.add_parser("hook", help=help_text, description=help_text)
    add_common(h)
    h.add_argument("event", choices=tuple(hook.EVENTS), help="the lifecycle event")
    h.add_argument(
        "--client",
        choices=hook.CLIENTS,
        default="claude-code",
        help="whose hook protocol (default: claude-code)",
    )
    h.set_defaults(func=hook.cmd_hook)
    install.register(sub)
