"""``memtrio export --format jsonl`` and ``memtrio import`` of the reference server's memory.jsonl.

The memory CLI (``store.cli``) owns the ``export`` and ``import`` commands and
hands the reference format to these functions: ``import`` detects it (the
first line is an ``entity`` or ``relation`` record, not a memtrio header) or
takes ``--format jsonl``. Both run in the current directory's scope, like the
graph tools: the import writes the current scope, the export reads the current
scope plus ``global``.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from typing import Any

from ...supervisors.app import AppContext
from ...supervisors.cli import CliError
from ..store.writer import Written
from . import jsonl
from .graph import Scoped, Writer
from .tools import view_of


def export_jsonl(args: argparse.Namespace) -> int:
    from ..store import cli as store_cli
    from ..store import tools as store_tools

    async def body(app: AppContext) -> int:
        store = store_tools.store_of(app)
        view = view_of(app)
        lines = await store.read(lambda conn: jsonl.export_lines(conn, Scoped(conn, view)))
        data = "\n".join(lines).encode("utf-8")
        if args.file in (None, "-"):
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        else:
            with store_cli.open_export(args.file, binary=True) as out:  # private (0600)
                out.write(data)
            print(
                f"exported {len(lines)} lines (reference memory.jsonl format) to {args.file}",
                file=sys.stderr,
            )
        return 0

    if args.file not in (None, "-"):
        store_cli.check_export_target(args.file)
    return store_cli._run(args, body)


def import_jsonl(args: argparse.Namespace, lines: list[str]) -> int:
    from ..store import cli as store_cli
    from ..store import tools as store_tools

    try:
        parsed = jsonl.parse(lines)
    except jsonl.JsonlError as exc:
        raise CliError(f"{args.file}: {exc}") from None

    async def body(app: AppContext) -> int:
        store = store_tools.store_of(app)
        view = view_of(app)

        def op(conn: sqlite3.Connection) -> Written:
            # The Writer applies the ownership rule (store.ownership): rows shared
            # with another repository are linked, never changed.
            w = Writer(conn, view, None)
            counts = jsonl.import_graph(w, parsed)
            if w.warnings:
                counts["warnings"] = w.warnings
            return Written(counts, w.changes)

        result: dict[str, Any] = await store.write(op, name="import_jsonl")
        result["scope"] = view.current

        def human(r: dict[str, Any]) -> str:
            text = (
                f"imported {r['entities']} entities ({r['existingEntities']} already present), "
                f"{r['observations']} observations, {r['relations']} relations "
                f"({r['existingRelations']} already present) into {r['scope']}"
            )
            if r["createdEndpoints"]:
                text += (
                    f"\nwarning: {r['createdEndpoints']} relation endpoints were not entities in the file "
                    "and were created with type `entity`"
                )
            return text + "".join(f"\nwarning: {w}" for w in r.get("warnings", []))

        store_cli._emit(args, result, human)
        return 0

    return store_cli._run(args, body)
