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
import json
import os
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

from ...supervisors import private
from ...supervisors.commands import CliError, add_common, emit, load_config
from ...supervisors.config import log_path
from ...supervisors.context import AppContext, AppRunner
from ...supervisors.errors import UserError
from ...supervisors.git import git_output
from ..kg import cli as kg_cli
from ..kg import jsonl
from . import db, limits, schema, tools, transfer
from .import_file import ImportRefused, numbered_lines, open_import, printable
from .memories import counts, list_memories
from .runner import (
    check_export_target,
    check_text,
    export_output,
    refused,
    run_store_command,
    say,
    tool_context,
)
from .writer import Change, Written


def _args(struct: type[msgspec.Struct], **values: Any) -> Any:
    given = {k: v for k, v in values.items() if v is not None}
    check_text(given, "")
    try:
        return msgspec.convert(given, struct)
    except msgspec.ValidationError as exc:
        raise CliError(f"invalid arguments: {printable(str(exc))}") from None


def _read_stdin_text() -> str:
    """The memory text on stdin: UTF-8, read no further than the longest text a tool accepts."""
    if sys.stdin is None:
        raise CliError("cannot read stdin: it is closed")
    most = 4 * limits.MAX_CONTENT  # bytes of the longest text (4 bytes a character at most)
    data = sys.stdin.buffer.read(most + 1)
    if len(data) > most:
        raise CliError(
            f"the memory text on stdin is longer than {limits.MAX_CONTENT:,} characters, the limit"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CliError(
            f"the memory text on stdin is not UTF-8 (byte 0x{data[exc.start]:02x} at byte {exc.start + 1:,})"
        ) from None


def _when(ts: float | None) -> str:
    if ts is None:
        return "never"
    return dt.datetime.fromtimestamp(ts).astimezone().strftime("%Y-%m-%d %H:%M")


def _one_line(text: str, width: int = 100) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _memory_line(m: dict[str, Any]) -> str:
    extra = f" score={m['score']:.3g}" if "score" in m else ""
    return f"#{m['id']} [{m['memory_type']}] imp={m['importance']:g}{extra} {', '.join(m['scopes']) or '(unscoped)'}\n    {_one_line(m['content'])}"


def _memory_block(m: dict[str, Any]) -> str:
    lines = [
        f"memory #{m['id']}  [{m['memory_type']}]  importance {m['importance']:g}",
        f"scopes:   {', '.join(m['scopes']) or '(unscoped)'}",
        f"created:  {_when(m['created_at'])}   updated: {_when(m['updated_at'])}",
        f"accessed: {m['access_count']} times, last {_when(m['last_accessed_at'])}",
    ]
    if m.get("entities"):
        lines.append("entities: " + ", ".join(f"{e['name']} ({e['kind']})" for e in m["entities"]))
    for r in m.get("relations", []):
        lines.append(f"relation: {r['source']} -[{r['relation']}]-> {r['target']}")
    lines += ["", m["content"]]
    return "\n".join(lines)


def _scopes(args: argparse.Namespace) -> list[str] | None:
    return args.scope or None


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
    )  # fmt: skip

    async def body(app: AppContext) -> int:
        result = await tools.remember(tool_context(app), targs)
        emit(
            args,
            result,
            lambda r: (
                f"remembered #{r['id']} in {', '.join(r['scopes'])}"
                + "".join(f"\nwarning: {w}" for w in r["warnings"])
            ),
        )
        return 0

    return run_store_command(args, run, body, full=True)


def cmd_list(args: argparse.Namespace, run: AppRunner) -> int:
    if args.limit < 1 or args.offset < 0:
        raise CliError("--limit must be >= 1 and --offset >= 0")

    async def body(app: AppContext) -> int:
        store = tools.store_of(app)
        selection = store.policy.select(_scopes(args))
        rows = await store.read(
            lambda conn: list_memories(conn, selection, args.type, args.limit, args.offset)
        )
        emit(
            args,
            rows,
            lambda rs: (
                "\n".join(_memory_line(m) for m in rs) or f"no memories in {', '.join(selection)}"
            ),
        )
        return 0

    return run_store_command(args, run, body)


def cmd_show(args: argparse.Namespace, run: AppRunner) -> int:
    targs = _args(tools.InspectArgs, id=args.id, scopes=_scopes(args))

    async def body(app: AppContext) -> int:
        emit(args, await tools.inspect(tool_context(app), targs), _memory_block)
        return 0

    return run_store_command(args, run, body)


def cmd_search(args: argparse.Namespace, run: AppRunner) -> int:
    targs = _args(
        tools.RecallArgs, query=args.query, scopes=_scopes(args), limit=args.limit,
        use_embeddings=not args.lexical, memory_type=args.type,
    )  # fmt: skip

    async def body(app: AppContext) -> int:
        result = await tools.recall(tool_context(app), targs)

        def human(r: dict[str, Any]) -> str:
            lines = [_memory_line(m) for m in r["memories"]] or ["no matching memories"]
            return "\n".join(lines + [f"warning: {w}" for w in r["warnings"]])

        emit(args, result, human)
        return 0

    return run_store_command(args, run, body, full=not args.lexical)


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

        def op(conn: sqlite3.Connection) -> Written:
            result, changes = transfer.flush(conn, store.policy, args.all)
            return Written(result, changes)

        result = await store.write(op, name="flush")
        result["scopes"] = "all" if args.all else store.policy.writable
        emit(
            args,
            result,
            lambda r: (
                f"deleted {r['deleted_memories']} memories, {r['deleted_entities']} entities, {r['deleted_relations']} relations"
            ),
        )
        return 0

    return run_store_command(args, run, body)


def cmd_scopes(args: argparse.Namespace, run: AppRunner) -> int:
    async def body(app: AppContext) -> int:
        result = await tools.list_scopes(tool_context(app), tools.ListScopesArgs())

        def human(r: dict[str, Any]) -> str:
            return "\n".join(
                f"{'*' if s['is_current'] else ' '} {s['name']}  {s['memories']} memories{'  (writable)' if s['writable'] else ''}"
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


def _permissions(home: Path, log: Path, fix: bool) -> dict[str, Any]:
    """Paths of the home (and of a log kept elsewhere) that group or others can access.

    With ``fix``, their group and other permissions are removed. Symbolic links
    are listed, never followed or changed.
    """
    tops = [home] if os.path.isdir(home) else []
    inside = log.is_relative_to(home) or log.is_relative_to(os.path.realpath(home))
    if os.path.lexists(log) and not inside:
        tops.append(log)
    paths: list[dict[str, Any]] = []
    links: list[dict[str, str]] = []
    for finding in private.audit(tops):
        if finding.is_link:
            links.append({"path": str(finding.path), "target": finding.target})
            continue
        row: dict[str, Any] = {
            "path": str(finding.path),
            "mode": f"{finding.mode:04o}",
            "expected": f"{finding.expected:04o}",
        }
        if fix:
            try:
                row["now"] = f"{private.tighten(finding):04o}"
            except OSError as exc:
                row["error"] = exc.strerror or str(exc)
        paths.append(row)
    if not paths:
        status = "ok"
    elif fix and not any("error" in p for p in paths):
        status = "fixed"
    else:
        status = "loose"
    return {"status": status, "paths": paths, "links": links}


def _permission_lines(perms: dict[str, Any]) -> list[str]:
    paths, links = perms["paths"], perms["links"]
    if perms["status"] == "ok":
        lines = ["permissions: ok (directories 0700, files 0600)"]
    elif perms["status"] == "fixed":
        lines = [f"permissions: fixed {len(paths)} path(s) that group or others could access"]
    else:
        lines = [
            f"permissions: {len(paths)} path(s) that group or others can access "
            "(memtrio doctor --fix removes their group and other permissions)"
        ]
    for p in paths:
        if "now" in p:
            lines.append(f"  {p['path']}: mode {p['mode']} -> {p['now']}")
        elif "error" in p:
            lines.append(
                f"  {p['path']}: mode {p['mode']}, expected {p['expected']} (not changed: {p['error']})"
            )
        else:
            lines.append(f"  {p['path']}: mode {p['mode']}, expected {p['expected']}")
    for link in links:
        lines.append(
            f"  {link['path']}: a symbolic link to {link['target']} (not followed, not changed)"
        )
    return lines


def _doctor_remedy(exc: BaseException) -> str:
    """The line doctor prints when the store cannot open: for a damaged one, how to recover."""
    if isinstance(exc, db.StoreUnavailable) and exc.damaged:
        return (
            f"{exc.problem}: move {exc.path} and its -wal and -shm files aside (memtrio then "
            "starts an empty store) and load your last export with `memtrio import FILE`; "
            f"`sqlite3 {exc.path} .recover` may salvage what is left"
        )
    return str(exc)


def cmd_doctor(args: argparse.Namespace, run: AppRunner) -> int:
    cfg, home = load_config(args)
    perms = _permissions(home, log_path(cfg, home), args.fix)

    async def body(app: AppContext) -> int:
        store = tools.store_of(app)

        def check(conn: sqlite3.Connection) -> dict[str, Any]:
            integrity = [r[0] for r in conn.execute("PRAGMA integrity_check").fetchall()]
            problems = []
            fts_tables = [
                r[0]
                for r in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%USING fts5%'"
                )
            ]
            for table in fts_tables:  # each external-content index agrees with its table
                try:
                    conn.execute(f"INSERT INTO {table} ({table}) VALUES ('integrity-check')")
                except sqlite3.DatabaseError as exc:
                    problems.append(f"{table}: {exc}")
            fts = "ok" if not problems else "failed: " + "; ".join(problems)
            return {
                "schema_version": transfer.schema_version(conn),
                "journal_mode": conn.execute("PRAGMA journal_mode").fetchone()[0],
                "integrity": "ok" if integrity == ["ok"] else "; ".join(integrity[:5]),
                "fts_integrity": fts,
                "counts": counts(conn),
            }

        report = await store.write(check, name="doctor")
        size = sum(
            p.stat().st_size for p in store.path.parent.glob(store.path.name + "*") if p.is_file()
        )
        result = {
            "home": str(app.home),
            "database": str(store.path),
            "database_bytes": size,
            "log": str(log_path(app.config, app.home)),
            "cwd": str(app.cwd),
            "current_scope": store.default_scope,
            "git": git_output(["--version"], app.cwd) or "not found",
            "sqlite": sqlite3.sqlite_version,
            "latest_schema_version": schema.LATEST,
            "embeddings": "on" if app.config.embedding.enabled else "off",
            "durability": app.config.store.durability,
            **report,
            "permissions": perms,
        }
        healthy = (
            result["integrity"] == "ok"
            and result["fts_integrity"] == "ok"
            and result["schema_version"] == schema.LATEST
            and perms["status"] != "loose"
        )

        def human(r: dict[str, Any]) -> str:
            skip = ("counts", "permissions")
            lines = [f"{k}: {v}" for k, v in r.items() if k not in skip]
            lines.append("counts: " + ", ".join(f"{k} {v}" for k, v in r["counts"].items()))
            lines += _permission_lines(perms)
            lines.append("status: ok" if healthy else "status: PROBLEMS FOUND")
            return "\n".join(lines)

        emit(args, result, human)
        return 0 if healthy else 1

    try:
        return run_store_command(args, run, body)
    except UserError as exc:
        # The store did not open: still report where everything is and why, and say
        # what to do in one line on stderr.
        message = _doctor_remedy(exc)
        result = {
            "home": str(home),
            "database": str(db.db_path(home)),
            "cwd": os.getcwd(),
            "error": message,
            "permissions": perms,
        }
        emit(
            args,
            result,
            lambda r: "\n".join(
                [f"{k}: {v}" for k, v in r.items() if k != "permissions"]
                + _permission_lines(perms)
                + ["status: PROBLEMS FOUND"]
            ),
        )
        print(f"memtrio: {message}", file=sys.stderr)
        return 1


def cmd_export(args: argparse.Namespace, run: AppRunner) -> int:
    if args.format == "jsonl":
        return kg_cli.export_jsonl(args, run)

    def write(conn: sqlite3.Connection, out: BinaryIO) -> dict[str, int]:
        counts = dict.fromkeys(("memory", "entity", "relation", "vector"), 0)
        for rec in transfer.export_lines(conn):
            out.write(json.dumps(rec, ensure_ascii=False, sort_keys=True).encode("utf-8") + b"\n")
            if rec["type"] in counts:
                counts[rec["type"]] += 1
        return counts

    async def body(app: AppContext) -> int:
        store = tools.store_of(app)
        with export_output(args.file) as out:
            counts = await store.read(lambda conn: write(conn, out))
        if args.file not in (None, "-"):
            say(
                f"exported {counts['memory']} memories, {counts['entity']} entities, {counts['relation']} relations, "
                f"{counts['vector']} vectors to {args.file}"
            )
        return 0

    if args.file not in (None, "-"):
        check_export_target(args.file)
    return run_store_command(args, run, body)


def cmd_import(args: argparse.Namespace, run: AppRunner) -> int:
    """Check the whole file (both formats), then write it in one transaction; or refuse it all."""
    try:
        with open_import(args.file) as file:
            if args.format is None:
                first = next(numbered_lines(file), None)
                reference = first is not None and jsonl.is_reference_format(*first)
            else:
                reference = args.format == "jsonl"
            if reference:
                return kg_cli.import_jsonl(args, run, file)
            return _import_memtrio(args, run, transfer.check_file(file))
    except ImportRefused as exc:
        raise refused(args, exc) from None


def _import_memtrio(args: argparse.Namespace, run: AppRunner, checked: transfer.Checked) -> int:
    async def body(app: AppContext) -> int:
        store = tools.store_of(app)

        def op(conn: sqlite3.Connection) -> Written:
            return Written(transfer.import_records(conn, checked), [Change(kind="reset")])

        try:
            result = await store.write(op, name="import")
        except ImportRefused as exc:  # the file changed since it was checked
            raise refused(args, exc) from None
        emit(
            args, result,
            lambda r: f"imported {r['memories']} memories ({r['skipped_memories']} already present), {r['entities']} entities, "
            f"{r['relations']} relations, {r['vectors']} vectors",
        )  # fmt: skip
        return 0

    return run_store_command(args, run, body)


# -- registration ----------------------------------------------------------------


def _parser(
    sub: Any,
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


def register(sub: Any) -> None:
    read_scope = "`global` or `repo:/abs/path` to read (repeatable; default: current repository), plus `global`"
    p = _parser(
        sub,
        "remember",
        "store a memory in the current repository (or --scope global)",
        cmd_remember,
    )
    p.add_argument("content", help="the memory text ('-' reads stdin)")
    p.add_argument("--type", help="memory type (default observation)")
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

    p = _parser(sub, "list", "list memories, newest first", cmd_list)
    _scope_flag(p, read_scope)
    p.add_argument("--type", help="only this memory type (ignores case)")
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--offset", type=int, default=0)

    p = _parser(sub, "show", "show one memory by id (counts as an access)", cmd_show)
    p.add_argument("id", type=int)
    _scope_flag(p, read_scope)

    p = _parser(sub, "search", "recall memories matching a query", cmd_search)
    p.add_argument("query")
    _scope_flag(p, read_scope)
    p.add_argument("--type", help="only this memory type (ignores case)")
    p.add_argument("--limit", type=int, default=10)
    p.add_argument("--lexical", action="store_true", help="FTS5 ranking only (no embeddings)")

    p = _parser(sub, "graph", "show relation paths around an entity", cmd_graph)
    p.add_argument("entity")
    p.add_argument("--direction", choices=["both", "incoming", "outgoing"], default="both")
    p.add_argument("--depth", type=int, default=2, help="1 to 3 (default 2)")
    p.add_argument("--limit", type=int, default=50, help="1 to 100 paths (default 50)")
    _scope_flag(p, read_scope)

    p = _parser(sub, "forget", "delete a memory by id", cmd_forget)
    p.add_argument("id", type=int)
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
    p = _parser(
        sub,
        "doctor",
        "check paths, permissions, schema version, integrity and counts",
        cmd_doctor,
    )
    p.add_argument(
        "--fix",
        action="store_true",
        help="remove group and other permissions from the home's files and directories",
    )

    p = _parser(sub, "export", "write the whole store as JSON lines", cmd_export, json_flag=False)
    p.add_argument("file", nargs="?", help="output file (default: stdout)")
    p.add_argument(
        "--format",
        choices=["memtrio", "jsonl"],
        default="memtrio",
        help="memtrio: the whole store (default); jsonl: the knowledge graph as the reference memory server's memory.jsonl",
    )
    p = _parser(sub, "import", "read a JSON-lines export into the store", cmd_import)
    p.add_argument("file", help="the export file ('-' reads stdin)")
    p.add_argument(
        "--format",
        choices=["memtrio", "jsonl"],
        help="default: detected (a memtrio export starts with its header; else the reference memory.jsonl)",
    )
