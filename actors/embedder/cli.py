"""``memtrio reembed``: recompute every memory, entity and relation vector under the current model.

A text longer than the model's token limit is stored as all of its windows
(up to ``[embedding] max_chunks``), like ``remember`` stores it. Rows that
already have a vector of the current model and revision are skipped, so the command is safe to re-run (and resumes where an interrupted
run stopped). Work goes in batches of ``--batch`` texts; a batch that fails is
retried one record at a time, so one bad record never blocks the rest. Each
failure is printed with its kind and id, and the exit code is 1 if any
occurred. The command refuses to run (exit 2) when embeddings are disabled or
the model cannot load, instead of silently doing nothing.

A running server loads vectors written by another process on its next
structural change or restart (see docs/recall.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from functools import partial
from typing import Any

from ...protocol.plural import plural
from ...supervisors.commands import CliError, add_common, load_config
from ...supervisors.context import AppContext, AppRunner
from ...supervisors.progress import Progress
from ..store.interfaces import StoreTx
from ..store.writer import STORE, Written
from .documents import count_stale, read_documents, stale_items, vector_writer
from .handle import EMBEDDER, EmbedderUnavailable, EmbeddingError

KINDS = ("memory", "entity", "relation")


def _stale(tx: StoreTx, kind: str, model: str, revision: str, after: int, limit: int) -> list[int]:
    return stale_items(tx, kind, model, revision, after, limit)


def _documents(tx: StoreTx, ids: dict[str, list[int]]) -> list[tuple[str, int, str]]:
    return read_documents(tx, dict(ids))


async def reembed(app: AppContext, batch: int, show_progress: bool) -> dict[str, Any]:
    """Embed every row lacking a vector of the current model. Returns counts and failures."""
    embedder = app.find(EMBEDDER)
    if embedder is None:
        raise CliError(
            "embeddings are disabled ([embedding] enabled = false or MEMTRIO_EMBEDDINGS=off); enable them to reembed",
            2,
        )
    try:
        await embedder.load()
    except EmbedderUnavailable as exc:
        raise CliError(f"{exc}; nothing was changed", 2) from None
    store = app.service(STORE)
    model, revision = embedder.model, embedder.revision
    stale = await store.read(
        lambda tx: count_stale(tx, model, revision), name="reembed.count_stale"
    )
    # One unit for the whole job (texts: memories, entities and relations alike).
    progress = Progress("reembed", sum(stale.values()), "texts", enabled=show_progress)
    done = dict.fromkeys(KINDS, 0)
    failures: list[dict[str, Any]] = []

    async def save(docs: list[tuple[str, int, str]]) -> None:
        result = await embedder.embed(
            [text for _, _, text in docs], max_chunks=app.config.embedding.max_chunks
        )
        write: Callable[[StoreTx], Written[int]] = vector_writer(
            [(k, i) for k, i, _ in docs], result
        )
        saved: int = await store.write(write, name="reembed.save_vectors")
        done[docs[0][0]] += saved

    try:
        for kind in KINDS:
            after = 0
            while True:
                ids = await store.read(
                    partial(
                        _stale, kind=kind, model=model, revision=revision, after=after, limit=batch
                    ),
                    name="reembed.stale_items",
                )
                if not ids:
                    break
                after = ids[-1]
                docs = await store.read(
                    partial(_documents, ids={kind: ids}), name="reembed.documents"
                )
                try:
                    await save(docs)
                except Exception:  # noqa: BLE001 - retried record by record below
                    for doc in docs:
                        try:
                            await save([doc])
                        except Exception as exc:  # noqa: BLE001 - reported, the rest goes on
                            message = (
                                str(exc)
                                if isinstance(exc, EmbeddingError)
                                else f"{type(exc).__name__}: {exc}"
                            )
                            failures.append({"kind": doc[0], "id": doc[1], "error": message})
                progress.advance(len(ids))
    finally:
        progress.close()
    return {
        "model": model,
        "revision": revision,
        "stale_before": stale,
        "reembedded": done,
        "failed": failures,
    }


def cmd_reembed(args: argparse.Namespace, run: AppRunner) -> int:
    cfg, _home = load_config(args)
    if not cfg.embedding.enabled:
        raise CliError(
            "embeddings are disabled ([embedding] enabled = false or MEMTRIO_EMBEDDINGS=off); enable them to reembed",
            2,
        )

    outcome: dict[str, Any] = {}

    async def body(app: AppContext) -> int:
        # A CliError raised in here would surface wrapped in an exception group: carry it out.
        try:
            outcome.update(await reembed(app, args.batch, show_progress=True))
        except CliError as exc:
            outcome["error"] = exc
        return 0

    run(args, body, features={"store", "memory", "embedder"})
    if "error" in outcome:
        raise outcome["error"]
    failures = outcome["failed"]
    if args.json:
        print(json.dumps(outcome, indent=2))
    else:
        for failure in failures:
            print(
                f"failed: {failure['kind']} #{failure['id']}: {failure['error']}", file=sys.stderr
            )
        counts = ", ".join(plural(outcome["reembedded"][k], k) for k in KINDS)
        print(
            f"reembedded {counts} with {outcome['model']} (revision {outcome['revision']}); {len(failures)} failed"
        )
    return 1 if failures else 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "reembed",
        help="recompute every memory, entity and relation vector under the current embedding model",
        description=(
            "Embed every memory, entity and relation (all scopes) that has no vector of the current "
            "model and revision. Safe to re-run: current rows are skipped. Failures are printed with "
            "their kind and id and make the exit code 1; the rest still migrates. Progress (texts "
            "of every kind) goes to stderr."
        ),
    )
    add_common(parser)
    parser.add_argument(
        "--batch", type=int, default=64, help="texts per embedding call and per write (default 64)"
    )
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON")
    parser.set_defaults(func=cmd_reembed)
