"""``memtrio export`` and ``memtrio import`` of a whole store (the memtrio format; the
reference ``memory.jsonl`` format is `kg.cli`'s).

Both show their progress on stderr (`supervisors.progress`). An import with
embeddings on ends with one line saying what it left without a vector of the
current model and to run ``memtrio reembed`` (`embedder.unembedded`).
"""

from __future__ import annotations

import argparse
import json
from typing import Any, BinaryIO

from ...protocol.plural import plural
from ...supervisors.commands import CliError, emit, load_config
from ...supervisors.context import AppContext, AppRunner
from ...supervisors.progress import Progress
from ..embedder.unembedded import unembedded, unembedded_line
from ..kg import cli as kg_cli
from ..kg import jsonl
from ..store.interfaces import ReadTx, StoreTx
from ..store.tooling.import_file import ImportRefused, count_lines, numbered_lines, open_import
from ..store.tooling.runner import (
    check_export_target,
    export_output,
    refused,
    run_store_command,
    say,
)
from ..store.writer import Change, Written
from . import migrate, tools, transfer


def counts_line(memories: int, entities: int, relations: int) -> str:
    """``1 memory, 0 entities, 2 relations``."""
    return ", ".join(
        (plural(memories, "memory"), plural(entities, "entity"), plural(relations, "relation"))
    )


def cmd_export(args: argparse.Namespace, run: AppRunner) -> int:
    if args.output is not None:
        if args.file is not None and args.file != args.output:
            raise CliError(
                f"export: give the output file once (FILE or -o/--output), not {args.file!r} and {args.output!r}"
            )
        args.file = args.output
    if args.format == "jsonl":
        return kg_cli.export_jsonl(args, run)

    def write(tx: ReadTx, out: BinaryIO) -> dict[str, int]:
        counts = dict.fromkeys(("memory", "entity", "relation", "vector"), 0)
        with Progress("export", migrate.record_count(tx), "records") as bar:
            for rec in bar.track(transfer.export_lines(tx)):
                line = json.dumps(rec, ensure_ascii=False, sort_keys=True).encode("utf-8")
                out.write(line + b"\n")
                if rec["type"] in counts:
                    counts[rec["type"]] += 1
        return counts

    async def body(app: AppContext) -> int:
        store = tools.store_of(app)
        with export_output(args.file) as out:
            counts = await store.read(lambda tx: write(tx, out), name="memory.export")
        if args.file not in (None, "-"):
            say(
                f"exported {counts_line(counts['memory'], counts['entity'], counts['relation'])}, "
                f"{plural(counts['vector'], 'vector')} to {args.file}"
            )
        return 0

    if args.file not in (None, "-"):
        check_export_target(args.file)
    return run_store_command(args, run, body)


def cmd_import(args: argparse.Namespace, run: AppRunner) -> int:
    """Check the whole file (both formats), then write it in one transaction; or refuse it all.

    Secrets in the file are screened by ``[store] secrets`` while it is checked (refused,
    naming the line and field, or replaced by a marker with a warning line each)."""
    secrets = load_config(args)[0].store.secrets
    try:
        with open_import(args.file) as file:
            if args.format is None:
                first = next(numbered_lines(file), None)
                reference = first is not None and jsonl.is_reference_format(*first)
            else:
                reference = args.format == "jsonl"
            if reference:
                return kg_cli.import_jsonl(args, run, file, secrets)
            lines = count_lines(file)
            with Progress("import: check", lines, "lines") as bar:
                checked = transfer.check_file(file, secrets, bar)
            return _import_memtrio(args, run, checked, lines)
    except ImportRefused as exc:
        raise refused(args, exc) from None


def _import_memtrio(
    args: argparse.Namespace, run: AppRunner, checked: transfer.Checked, lines: int
) -> int:
    async def body(app: AppContext) -> int:
        store = tools.store_of(app)

        def op(tx: StoreTx) -> Written[dict[str, int]]:
            with Progress("import: write", lines, "lines") as bar:
                added = transfer.import_records(tx, checked, bar)
            return Written(added, [Change(kind="reset")])

        try:
            result: dict[str, Any] = await store.write(op, name="memory.import")
        except ImportRefused as exc:  # the file changed since it was checked
            raise refused(args, exc) from None
        if checked.warnings:
            result["warnings"] = checked.warnings
        missing = await unembedded(app)
        if missing is not None:
            result["unembedded"] = missing
        emit(
            args, result,
            lambda r: f"added {counts_line(r['memories'], r['entities'], r['relations'])}, "
            f"{plural(r['vectors'], 'vector')} ({plural(r['skipped_memories'], 'memory')} "
            f"{'was' if r['skipped_memories'] == 1 else 'were'} already present)"
            + "".join(f"\nwarning: {w}" for w in r.get("warnings", []))
            + "".join(f"\n{line}" for line in [unembedded_line(r.get("unembedded", {}))] if line),
        )  # fmt: skip
        return 0

    return run_store_command(args, run, body)
