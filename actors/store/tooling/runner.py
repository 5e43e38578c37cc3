"""Running a memory-store command: the plumbing the memory and graph CLIs share.

`run_store_command` starts the store (alone, or with what ranking needs),
runs a command's body against it and turns every failure into one line;
`export_output` and `refused` give exports and imports their one-line errors.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, cast

from ....protocol.errors import DomainError
from ....supervisors import private
from ....supervisors.commands import CliError, cli_words, load_config
from ....supervisors.context import AppContext, AppRunner, CallContext
from ....supervisors.supervisor import Escalation, root_cause
from ..interfaces.errors import StoreError
from ..sqlite import db
from .import_file import ImportRefused, printable

# The features a command starts: the store alone, or with what embeddings and ranking need.
STORE_ONLY = frozenset({"store", "memory"})
WITH_RANKING = frozenset({"status", "store", "memory", "kg", "embedder", "ranker"})


def check_text(value: object, where: str) -> None:
    """Refuse a string that is not text (bytes of a non-UTF-8 argument arrive as lone surrogates)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise CliError(f"invalid arguments: `{where}` is not valid UTF-8 text") from None
    elif isinstance(value, dict):
        for key, item in value.items():
            check_text(item, f"{where}.{key}" if where else key)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            check_text(item, f"{where}[{i}]")


def run_store_command(
    args: argparse.Namespace,
    run: AppRunner,
    body: Callable[[AppContext], Awaitable[Any]],
    full: bool = False,
) -> int:
    """Run ``body`` with the store (``full``: every feature but code, for embeddings and ranking).

    Error handling: every failure ends as a `CliError` or `UserError` (one line):
    a tool's refusal (in the command line's words: `cli_words`), a database that cannot be opened or written (damaged,
    read-only, full: `connections.StoreUnavailable`), a store that could not start.
    """
    # Every value given on the command line is text, except paths (any bytes).
    check_text(
        {
            k: v
            for k, v in vars(args).items()
            if k not in ("file", "output", "home", "memory_file", "func")
        },
        "",
    )
    features = WITH_RANKING if full else STORE_ONLY
    cfg, home = load_config(args)
    path = db.db_path(home, cfg.store.file)

    async def main(app: AppContext) -> int:
        try:
            return int(await body(app) or 0)
        except (DomainError, CliError, BrokenPipeError) as exc:
            # Raised outside the actor tree, so it is not wrapped in a nursery's group.
            failure.append(exc)
            return 1
        except StoreError as exc:  # the database refused the command (read-only, full, damaged)
            failure.append(db.unavailable(exc, path))
            return 1
        except Exception as exc:  # noqa: BLE001 - the command failed, not the store's start
            failure.append(exc)
            return 1

    failure: list[Exception] = []
    try:
        code = run(args, main, features=features)
    except (Escalation, BaseExceptionGroup) as exc:
        cause = root_cause(exc)
        if isinstance(cause, KeyboardInterrupt):
            raise cause from None
        if isinstance(cause, StoreError):
            raise db.unavailable(cause, path) from None
        raise CliError(
            f"the memory store could not start ({type(cause).__name__}: {cause}); "
            "run memtrio doctor"
        ) from None
    if failure:
        if isinstance(failure[0], BrokenPipeError):
            raise failure[0]
        if isinstance(failure[0], DomainError):
            raise CliError(cli_words(str(failure[0]))) from None
        raise failure[0]  # a UserError, or unexpected: `memtrio` prints it in one line
    return code


def tool_context(app: AppContext) -> CallContext:
    """The ``ctx`` a tool handler receives when the CLI calls it (no MCP session)."""
    return CallContext(app)


@contextmanager
def export_output(file: str | None) -> Iterator[BinaryIO]:
    """Where an export goes: stdout (``None`` or ``-``) or ``file``, written as UTF-8 bytes.

    Error handling: a file that cannot be opened or written raises `CliError`
    ("cannot write ..."); a closed stdout stays a `BrokenPipeError`.
    """
    shown = printable(file or "-")
    try:
        if file in (None, "-"):
            yield sys.stdout.buffer
            sys.stdout.buffer.flush()
        else:
            # A new private (0600) file, renamed over FILE once complete.
            with private.replace_file(Path(file), binary=True) as out:
                yield cast(BinaryIO, out)  # opened "wb": a binary file
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise CliError(f"cannot write {shown}: {exc.strerror or exc}") from None


def say(text: str) -> None:
    print(text, file=sys.stderr)


def check_export_target(file: str) -> None:
    """Fail at once, in one line, when FILE cannot be written (before the store starts)."""
    path = Path(file)
    shown, folder = printable(file), printable(str(path.parent))
    if path.is_dir():
        raise CliError(f"cannot write the export to {shown}: it is a directory; name a file")
    if not path.parent.is_dir():
        raise CliError(f"cannot write the export to {shown}: {folder} is not an existing directory")
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise CliError(f"cannot write the export to {shown}: {folder} is not writable")


def refused(args: argparse.Namespace, exc: ImportRefused) -> CliError:
    """The one line of a refused import."""
    shown = "stdin" if args.file == "-" else printable(args.file)
    return CliError(f"import {shown}: {exc}; nothing was imported")
