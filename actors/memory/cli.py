"""``memtrio`` subcommands of the memory store.

remember, list, show, search, graph, forget, flush, scopes, stats, doctor,
export, import. They run the same actor tree and the same tool handlers as the
MCP server, in the current directory, so they follow the same scope rules.
Output is human-readable by default and JSON with ``--json``.

``export``, ``import`` and ``flush --all`` are maintenance commands over the
whole store (every scope), for backups and restores.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec

from ...protocol.plural import plural
from ...protocol.validation import describe_validation_error
from ...supervisors.commands import (
    CliError,
    add_common,
    add_ranking_options,
    add_secrets_option,
    cli_flag,
    cli_words,
    emit,
)
from ...supervisors.context import AppContext, AppRunner
from ..anchors.anchoring import code_states
from ..code.anchors import split_path
from ..screening import run_tool
from ..store.domain import limits
from ..store.domain.memories import list_memories
from ..store.interfaces import StoreTx
from ..store.tooling.import_file import printable
from ..store.tooling.runner import check_text, run_store_command, tool_context
from ..store.writer import Written
from . import migrate, stale_cli, tools, transfer
from .doctor import cmd_doctor
from .records import MAX_ROW_ID
from .results import Memory, memory_result
from .transfer_cli import cmd_export, cmd_import
from .transfer_cli import counts_line as _counts

ArgsT = TypeVar("ArgsT", bound=msgspec.Struct)
SubParsers = argparse._SubParsersAction  # what ``add_subparsers`` returns


def _args(struct: type[ArgsT], **values: object) -> ArgsT:
    given = {k: v for k, v in values.items() if v is not None}
    check_text(given, "")
    try:
        return msgspec.convert(given, struct)
    except msgspec.ValidationError as exc:
        text = describe_validation_error(exc, struct, name=cli_flag)
        raise CliError(f"invalid arguments: {cli_words(printable(text))}") from None


def _read_stdin_text() -> str:
    """The memory text on stdin: UTF-8, read no further than the longest text a tool accepts.

    The trailing line breaks are dropped, as ``$(...)`` drops them in a shell:
    ``echo text | memtrio remember -`` stores ``text``.
    """
    if sys.stdin is None:
        raise CliError("cannot read stdin: it is closed")
    most = 4 * limits.MAX_CONTENT  # bytes of the longest text (4 bytes a character at most)
    data = sys.stdin.buffer.read(most + 1)
    if len(data) > most:
        raise CliError(
            f"the memory text on stdin is longer than {limits.MAX_CONTENT:,} characters, the limit"
        )
    try:
        return data.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError as exc:
        raise CliError(
            f"the memory text on stdin is not UTF-8 (byte 0x{data[exc.start]:02x} at byte {exc.start + 1:,})"
        ) from None


def _when(iso: str | None) -> str:
    """A result's ISO 8601 UTC time in the local time zone, to the minute."""
    if iso is None:
        return "never"
    return dt.datetime.fromisoformat(iso).astimezone().strftime("%Y-%m-%d %H:%M")


def _one_line(text: str, width: int = 100) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _memory_line(m: dict[str, Any]) -> str:
    extra = f" score={m['score']:.3g}" if "score" in m else ""
    extra += " STALE" if m.get("stale") else ""
    # A search's observation names its entity ("runs on port 8080": of which service?).
    about = ", ".join(e["name"] for e in m.get("entities") or [])
    tail = f" · about {about}" if about else ""
    return f"#{m['id']} [{m['memory_type']}] imp={m['importance']:g}{extra} {', '.join(m['scopes']) or '(unscoped)'}{tail}\n    {_one_line(m['content'])}"


def _memory_block(m: dict[str, Any]) -> str:
    lines = [
        f"memory #{m['id']}  [{m['memory_type']}]  importance {m['importance']:g}",
        f"scopes:   {', '.join(m['scopes']) or '(unscoped)'}",
        f"created:  {_when(m['created_at'])}   updated: {_when(m['updated_at'])}",
        f"accessed: {plural(m['access_count'], 'time')}, last {_when(m['last_accessed_at'])}",
    ]
    if m.get("entities"):
        lines.append("entities: " + ", ".join(f"{e['name']} ({e['kind']})" for e in m["entities"]))
    for r in m.get("relations", []):
        lines.append(f"relation: {r['source']} -[{r['relation']}]-> {r['target']}")
    lines += [stale_cli.anchor_line(a) for a in m.get("code", [])]
    lines += ["", m["content"]]
    return "\n".join(lines)


def _scopes(args: argparse.Namespace) -> list[str] | None:
    return args.scope or None


def _grouped(memories: list[dict[str, Any]], selection: list[str]) -> list[str]:
    """Found memories as one labelled group per scope searched (repository first, then
    ``global``), each in score order; a memory in several scopes is listed under the first."""
    groups: dict[str, list[str]] = {scope: [] for scope in selection}
    for m in memories:
        label = next((s for s in selection if s in m["scopes"]), "(unscoped)")
        groups.setdefault(label, []).append(_memory_line(m))
    return [
        line
        for label, found in groups.items()
        if found
        for line in (f"{label} ({len(found)}):", *found)
    ]


# -- commands ------------------------------------------------------------------


def cmd_remember(args: argparse.Namespace, run: AppRunner) -> int:
    content = _read_stdin_text() if args.content == "-" else args.content
    relations = []
    for text in args.relation or []:
        parts = text.split(":")
        if len(parts) != 3 or not all(p.strip() for p in parts):
            raise CliError(f"--relation {text!r}: expected SOURCE:RELATION:TARGET")
        relations.append({"source": parts[0], "relation": parts[1], "target": parts[2]})
    targs = _args(
        tools.RememberArgs, content=content, memory_type=args.type, importance=args.importance,
        scopes=_scopes(args), entities=args.entity, relations=relations or None,
        code=_code_anchors(args.code),
    )  # fmt: skip

    async def body(app: AppContext) -> int:
        result = await run_tool(tools.tool_named("remember"), tool_context(app), targs)
        emit(
            args,
            result,
            lambda r: (
                f"remembered #{r['id']} in {', '.join(r['scopes'])}"
                + "".join(f"\n{stale_cli.anchor_line(a)}" for a in r.get("code", []))
                + "".join(f"\nwarning: {w}" for w in r.get("warnings", []))
            ),
        )
        return 0

    # The code feature runs as it does for the tool: anchors are found or checked.
    return run_store_command(args, stale_cli.with_code(run), body, full=True)


def _code_anchors(given: list[str] | None) -> list[dict[str, str]] | None:
    """``--code PATH[:SYMBOL]`` values as the tools' ``code`` argument (None: find them in the
    text, as the tool does without ``code``; ``--code ''`` alone: anchor nothing)."""
    if given is None:
        return None
    anchors = []
    for text in given:
        if not text:
            continue
        path, symbol = split_path(text)
        anchors.append({"path": path, "symbol": symbol})
    return anchors


def cmd_list(args: argparse.Namespace, run: AppRunner) -> int:
    if not (1 <= args.limit <= MAX_ROW_ID and 0 <= args.offset <= MAX_ROW_ID):
        raise CliError(f"--limit must be 1 to {MAX_ROW_ID} and --offset 0 to {MAX_ROW_ID}")

    async def body(app: AppContext) -> int:
        store = tools.store_of(app)
        selection = store.policy.select(_scopes(args))
        rows = await store.read(
            lambda tx: list_memories(tx, selection, args.type, args.limit, args.offset),
            name="memory.list",
        )
        await code_states(tool_context(app), store.policy, rows, [])
        memories = msgspec.to_builtins([memory_result(row, Memory) for row in rows])
        emit(
            args,
            memories,
            lambda rs: (
                "\n".join(_memory_line(m) for m in rs) or f"no memories in {', '.join(selection)}"
            ),
        )
        return 0

    return run_store_command(args, stale_cli.with_code(run), body)


def cmd_show(args: argparse.Namespace, run: AppRunner) -> int:
    targs = _args(tools.InspectArgs, id=args.id, scopes=_scopes(args))

    async def body(app: AppContext) -> int:
        emit(args, await tools.inspect(tool_context(app), targs), _memory_block)
        return 0

    return run_store_command(args, stale_cli.with_code(run), body)


def cmd_search(args: argparse.Namespace, run: AppRunner) -> int:
    targs = _args(
        tools.RecallArgs, query=args.query, scopes=_scopes(args), limit=args.limit,
        use_embeddings=not args.lexical, memory_type=args.type, code=args.code,
    )  # fmt: skip

    async def body(app: AppContext) -> int:
        result = await tools.recall(tool_context(app), targs)

        def human(r: dict[str, Any]) -> str:
            lines = _grouped(r["memories"], r["scopes"]) or ["no matching memories"]
            return "\n".join(lines + [f"warning: {w}" for w in r.get("warnings", [])])

        emit(args, result, human)
        return 0

    return run_store_command(args, stale_cli.with_code(run), body, full=not args.lexical)


def cmd_graph(args: argparse.Namespace, run: AppRunner) -> int:
    targs = _args(
        tools.GraphArgs,
        entity=args.entity,
        direction=args.direction,
        max_depth=args.depth,
        limit=args.limit,
        scopes=_scopes(args),
    )

    async def body(app: AppContext) -> int:
        result = await tools.graph(tool_context(app), targs)

        def human(r: dict[str, Any]) -> str:
            lines = [f"{r['entity']['name']} ({r['entity']['kind']}), {r['direction']}:"]
            for p in r["paths"]:
                lines.append(
                    "  "
                    + "  ".join(
                        f"{e['source']} -[{e['relation']}]-> {e['target']}" for e in p["edges"]
                    )
                )
            if not r["paths"]:
                lines.append("  no relations")
            if r["truncated"]:
                lines.append(f"  (more paths: raise --limit above {len(r['paths'])})")
            return "\n".join(lines)

        emit(args, result, human)
        return 0

    return run_store_command(args, run, body)


def cmd_forget(args: argparse.Namespace, run: AppRunner) -> int:
    targs = _args(tools.ForgetArgs, id=args.id, scopes=_scopes(args))

    async def body(app: AppContext) -> int:
        emit(args, await tools.forget(tool_context(app), targs), lambda r: f"forgot #{r['id']}")
        return 0

    return run_store_command(args, run, body)


def cmd_flush(args: argparse.Namespace, run: AppRunner) -> int:
    if not args.yes:
        what = (
            "every memory, entity and relation in every scope"
            if args.all
            else "the memories of the current repository and `global`"
        )
        raise CliError(f"flush deletes {what}; run again with --yes to confirm")

    async def body(app: AppContext) -> int:
        store = tools.store_of(app)

        def op(tx: StoreTx) -> Written[dict[str, Any]]:
            result, changes = transfer.flush(tx, store.policy, args.all)
            return Written(result, changes)

        result: dict[str, Any] = await store.write(op, name="memory.flush")
        result["scopes"] = "all" if args.all else store.policy.writable
        emit(
            args,
            result,
            lambda r: (
                f"deleted {_counts(r['deleted_memories'], r['deleted_entities'], r['deleted_relations'])}"
            ),
        )
        return 0

    return run_store_command(args, run, body)


def cmd_scopes(args: argparse.Namespace, run: AppRunner) -> int:
    async def body(app: AppContext) -> int:
        result = await tools.list_scopes(tool_context(app), tools.ListScopesArgs())

        def human(r: dict[str, Any]) -> str:
            return "\n".join(
                f"{'*' if s['is_current'] else ' '} {s['name']}  {plural(s['memories'], 'memory')}{'  (writable)' if s['writable'] else ''}"
                for s in r["scopes"]
            )

        emit(args, result, human)
        return 0

    return run_store_command(args, run, body)


def cmd_stats(args: argparse.Namespace, run: AppRunner) -> int:
    async def body(app: AppContext) -> int:
        result = await tools.stats(tool_context(app), tools.StatsArgs())
        emit(args, result, lambda r: "\n".join(f"{k}: {v}" for k, v in r.items()))
        return 0

    return run_store_command(args, run, body)


# -- registration ----------------------------------------------------------------


def _parser(
    sub: SubParsers[argparse.ArgumentParser],
    name: str,
    help_text: str,
    func: Callable[[argparse.Namespace, AppRunner], int],
    json_flag: bool = True,
) -> argparse.ArgumentParser:
    parser = sub.add_parser(name, help=help_text, description=help_text)
    add_common(parser)
    if json_flag:
        parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    parser.set_defaults(func=func)
    return parser


def _scope_flag(parser: argparse.ArgumentParser, help_text: str) -> None:
    parser.add_argument("--scope", action="append", metavar="SCOPE", help=help_text)


def _type_flag(parser: argparse.ArgumentParser, help_text: str) -> None:
    """``--type``, also spelt ``--memory-type``: the tools' ``memory_type`` argument."""
    parser.add_argument(
        "--type",
        "--memory-type",
        dest="type",
        metavar="TYPE",
        help=f"{help_text}; the tools' memory_type argument",
    )


DIRECTIONS = ("both", "incoming", "outgoing")  # of `memtrio graph`: the relations it follows


def _register_remember(sub: SubParsers[argparse.ArgumentParser]) -> None:
    p = _parser(
        sub,
        "remember",
        "store a memory in the current repository (or --scope global)",
        cmd_remember,
    )
    p.add_argument("content", help="the memory text ('-' reads stdin)")
    _type_flag(p, "memory type (default observation)")
    p.add_argument("--importance", type=float, help="0.0 to 1.0 (default 0.0)")
    _scope_flag(p, "`global` or the current repository's scope (repeatable)")
    p.add_argument(
        "--entity",
        action="append",
        metavar="NAME",
        help="an entity the memory mentions (repeatable)",
    )
    p.add_argument(
        "--relation",
        action="append",
        metavar="SRC:REL:TGT",
        help="a relation the memory states (repeatable)",
    )
    add_secrets_option(p)
    p.add_argument(
        "--code",
        action="append",
        metavar="PATH[:SYMBOL]",
        help="anchor the memory to this file (or a symbol in it, as find_symbol names it: "
        "app/retry.py:RetryPolicy.backoff) of the current repository (repeatable; the "
        "file must be indexed, the symbol unique); without --code, the files and symbols "
        "the text names are anchored, as the remember tool does; --code '' anchors nothing",
    )


def register(sub: SubParsers[argparse.ArgumentParser]) -> None:
    read_scope = "`global` or `repo:/abs/path` to read (repeatable; default: current repository), plus `global`"
    _register_remember(sub)

    p = _parser(sub, "list", "list memories, newest first", cmd_list)
    _scope_flag(p, read_scope)
    _type_flag(p, "only this memory type (ignores case)")
    p.add_argument("--limit", type=int, default=50, help="at most N memories (default 50)")
    p.add_argument("--offset", type=int, default=0, help="skip the first N (default 0)")

    p = _parser(sub, "show", "show one memory by id (counts as an access)", cmd_show)
    p.add_argument("id", type=int, help="the memory's id (as list and search print it)")
    _scope_flag(p, read_scope)

    p = _parser(sub, "search", "recall memories matching a query", cmd_search)
    p.add_argument("query", help="what to recall, in words")
    _scope_flag(p, read_scope)
    _type_flag(p, "only this memory type (ignores case)")
    p.add_argument("--limit", type=int, default=10, help="at most N results (default 10)")
    p.add_argument("--lexical", action="store_true", help="FTS5 ranking only (no embeddings)")
    add_secrets_option(p)
    p.add_argument(
        "--code",
        metavar="PATH|SYMBOL",
        help="memories anchored to this file or symbol (or an import away) first, "
        "as recall's code argument",
    )
    add_ranking_options(p)

    p = _parser(sub, "graph", "show relation paths around an entity", cmd_graph)
    p.add_argument("entity", help="the entity's name (case and spacing ignored)")
    p.add_argument(
        "--direction", choices=DIRECTIONS, default="both", help="relations to follow (default both)"
    )
    p.add_argument("--depth", type=int, default=2, help="1 to 3 (default 2)")
    p.add_argument("--limit", type=int, default=50, help="1 to 100 paths (default 50)")
    _scope_flag(p, read_scope)

    p = _parser(sub, "forget", "delete a memory by id", cmd_forget)
    p.add_argument("id", type=int, help="the memory's id (as list and search print it)")
    _scope_flag(p, "writable scope(s) to look in")

    p = _parser(
        sub,
        "flush",
        "delete the memories of the current repository and global (needs --yes)",
        cmd_flush,
    )
    p.add_argument("--yes", action="store_true", help="confirm the deletion")
    p.add_argument(
        "--all",
        action="store_true",
        help="delete the whole store: every scope, entity, relation, vector and the recall log",
    )

    _parser(sub, "scopes", "list stored scopes, the current one marked *", cmd_scopes)
    _parser(sub, "stats", "count memories, scopes, entities and edges", cmd_stats)
    doctor_help = "check paths, permissions, schema version, integrity and counts"
    p = _parser(sub, "doctor", doctor_help, cmd_doctor)
    p.add_argument(
        "--fix",
        action="store_true",
        help="remove group and other permissions from the home's files and directories",
    )

    p = _parser(sub, "export", "write the whole store as JSON lines", cmd_export, json_flag=False)
    p.add_argument("file", nargs="?", metavar="FILE", help="output file (default: stdout)")
    p.add_argument("-o", "--output", metavar="FILE", help="output file, like FILE ('-': stdout)")
    p.add_argument(
        "--format",
        choices=["memtrio", "jsonl"],
        default="memtrio",
        help="memtrio: the whole store (default); jsonl: the knowledge graph as the reference memory server's memory.jsonl",
    )
    p = _parser(sub, "import", "read a JSON-lines export into the store", cmd_import)
    p.description = (
        "Read a JSON-lines export into the store: every line is checked first, then all are "
        "written in one transaction (progress on stderr). With embeddings on, a last line says "
        "how many memories, entities and relations are left without a vector of the current "
        "model, and to run memtrio reembed."
    )
    p.add_argument("file", help="the export file ('-' reads stdin)")
    p.add_argument(
        "--format",
        choices=["memtrio", "jsonl"],
        help="default: detected (a memtrio export starts with its header; else the reference memory.jsonl)",
    )
    add_secrets_option(p)
    migrate.register(sub)
    _parser(sub, "stale", stale_cli.HELP, stale_cli.cmd_stale)
