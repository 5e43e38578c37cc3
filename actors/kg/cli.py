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
from typing import Any, BinaryIO

from ...protocol.plural import plural
from ...protocol.secrets import SecretsMode
from ...supervisors.commands import emit
from ...supervisors.context import AppContext, AppRunner
from ...supervisors.progress import Progress
from ..embedder.unembedded import unembedded, unembedded_line
from ..store.interfaces import ReadTx, StoreTx
from ..store.tooling.import_file import ImportRefused, count_lines, numbered_lines
from ..store.tooling.runner import (
    check_export_target,
    export_output,
    refused,
    run_store_command,
    say,
)
from ..store.tooling.services import store_of
from ..store.writer import Written
from . import jsonl
from .transactions import view_of
from .view import Scoped
from .writer import Writer


def export_jsonl(args: argparse.Namespace, run: AppRunner) -> int:

    async def body(app: AppContext) -> int:
        store = store_of(app)
        view = view_of(store.policy)

        def write(tx: ReadTx, out: BinaryIO) -> int:
            count = 0
            with Progress("export", None, "lines") as bar:  # the total is not known ahead
                for line in bar.track(jsonl.iter_lines(tx, Scoped(tx, view))):
                    out.write((b"\n" if count else b"") + line.encode("utf-8"))
                    count += 1
            return count

        with export_output(args.file) as out:
            count = await store.read(lambda tx: write(tx, out), name="kg.export_jsonl")
        if args.file not in (None, "-"):
            say(f"exported {plural(count, 'line')} (reference memory.jsonl format) to {args.file}")
        return 0

    if args.file not in (None, "-"):
        check_export_target(args.file)
    return run_store_command(args, run, body)


def import_jsonl(
    args: argparse.Namespace, run: AppRunner, file: BinaryIO, secrets: SecretsMode = "allow"
) -> int:
    """Import an open reference-format file: every line checked (and screened for secrets by
    ``secrets``) first, then one transaction."""
    screened: list[str] = []
    total = count_lines(file)
    try:
        with Progress("import: check", total, "lines") as bar:
            jsonl.check(lambda: bar.track(numbered_lines(file)), secrets, screened)
    except ImportRefused as exc:
        raise refused(args, exc) from None

    async def body(app: AppContext) -> int:
        store = store_of(app)
        view = view_of(store.policy)

        def op(tx: StoreTx) -> Written:
            # The Writer applies the ownership rule (store.domain.ownership): rows shared
            # with another repository are linked, never changed.
            w = Writer(tx, view, None)
            with Progress("import: write", total, "lines") as bar:
                lines = lambda: bar.track(numbered_lines(file))  # noqa: E731
                counts: dict[str, Any] = dict(jsonl.import_graph(w, lines, secrets))
            if w.warnings or screened:
                counts["warnings"] = [*screened, *w.warnings]
            return Written(counts, w.changes)

        try:
            result: dict[str, Any] = await store.write(op, name="kg.import_jsonl")
        except ImportRefused as exc:  # the file changed since it was checked
            raise refused(args, exc) from None
        result["scope"] = view.current
        missing = await unembedded(app)
        if missing is not None:
            result["unembedded"] = missing

        def human(r: dict[str, Any]) -> str:
            text = (
                f"imported {plural(r['entities'], 'entity')} ({r['existingEntities']} already present), "
                f"{plural(r['observations'], 'observation')}, {plural(r['relations'], 'relation')} "
                f"({r['existingRelations']} already present) into {r['scope']}"
            )
            if r["createdEndpoints"]:
                text += (
                    f"\nwarning: {plural(r['createdEndpoints'], 'relation endpoint')} "
                    f"{'was not an entity' if r['createdEndpoints'] == 1 else 'were not entities'} "
                    "in the file and created with type `entity`"
                )
            text += "".join(f"\nwarning: {w}" for w in r.get("warnings", []))
            line = unembedded_line(r.get("unembedded", {}))
            return text if line is None else f"{text}\n{line}"

        emit(args, result, human)
        return 0

    return run_store_command(args, run, body)
