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
from collections.abc import Awaitable, Callable
from typing import Any

from ...supervisors.commands import CliError, emit
from ...supervisors.context import AppContext
from ..store.tools import store_of
from ..store.writer import Written
from . import jsonl
from .graph import Scoped, Writer
from .tools import view_of

Body = Callable[[AppContext], Awaitable[int]]


def export_jsonl(args: argparse.Namespace) -> Body:
    """The body of ``memtrio export --format jsonl`` (the memory CLI runs it)."""

    async def body(app: AppContext) -> int:
        store = store_of(app)
        view = view_of(app)
        lines = await store.read(lambda conn: jsonl.export_lines(conn, Scoped(conn, view)))
        data = "\n".join(lines).encode("utf-8")
        if args.file in (None, "-"):
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        else:
            with open(args.file, "wb") as out:
                out.write(data)
            print(
                f"exported {len(lines)} lines (reference memory.jsonl format) to {args.file}",
                file=sys.stderr,
            )
        return 0

    return body


def import_jsonl(args: argparse.Namespace, lines: list[str]) -> Body:
    """The body of ``memtrio import`` of a reference-format file (the memory CLI runs it).

    Error handling: a file that does not parse raises `CliError` before anything runs.
    """

    try:
        parsed = jsonl.parse(lines)
    except jsonl.JsonlError as exc:
        raise CliError(f"{args.file}: {exc}") from None

    async def body(app: AppContext) -> int:
        store = store_of(app)
        view = view_of(app)

        def op(conn: sqlite3.Connection) -> Written:
            w = Writer(conn, view, None)
            return Written(jsonl.import_graph(w, parsed), w.changes)

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
            return text

        emit(args, result, human)
        return 0

    return body
