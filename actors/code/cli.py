"""``memtrio code index`` and ``memtrio code diff``.

``index`` builds or refreshes the code index of a checkout ahead of time (with
progress on stderr: supervisors/progress.py) and lists the files that could not be
indexed; ``diff`` prints what the ``code_diff`` tool returns. Both say so and
exit non-zero when code navigation is disabled.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from ...protocol.errors import DomainError
from ...protocol.plural import plural
from ...supervisors.commands import CliError, add_common, cli_words, load_config
from ...supervisors.config import ConfigError
from ...supervisors.context import AppContext, AppRunner
from ...supervisors.progress import Progress
from .checkout import checkout_root, show_path
from .diff import structural_diff
from .feature import DISABLED
from .service import CODE, CodeService


def _require_enabled(args: argparse.Namespace) -> None:
    """Refuse early: ``[code]`` invalid (exit 2, as any configuration error) or off."""
    cfg, _ = load_config(args)
    invalid = cfg.invalid.get("code")
    if invalid is not None:
        raise ConfigError(invalid)
    if not cfg.code.enabled:
        raise CliError(DISABLED)


def _service(app: AppContext) -> CodeService:
    service = app.find(CODE)
    if service is None or "code" not in app.features:
        why = app.unavailable.get("code", "it did not start; see the trace log")
        raise CliError(f"code navigation is not available: {why}")
    return service


async def _root(args: argparse.Namespace, app: AppContext) -> Path:
    root = os.path.abspath(args.root) if args.root else None
    try:
        return await checkout_root(root, app.cwd)
    except DomainError as exc:
        raise CliError(cli_words(str(exc))) from None


def cmd_index(args: argparse.Namespace, run: AppRunner) -> int:
    _require_enabled(args)

    async def body(app: AppContext) -> int:
        service = _service(app)
        root = await _root(args, app)
        with Progress("code index", None, "files") as bar:

            def step(done: int, total: int) -> None:
                bar.set_total(total)
                bar.advance(done - bar.done)

            report = await service.refresh(root, progress=step, want_skipped=True)
        if args.json:
            print(
                json.dumps(
                    {
                        "root": str(root),
                        "source_files": report.source_files,
                        "indexed": report.indexed,
                        "parsed": report.parsed,
                        "seconds": round(report.seconds, 3),
                        "truncated": report.truncated,
                        "not_indexed": [{"path": p, "reason": r} for p, r in report.skipped],
                    }
                )
            )
            return 0
        print(
            f"indexed {plural(report.indexed, 'source file')} of {root} ({report.parsed} parsed) in {report.seconds:.2f} s"
        )
        if report.truncated:
            print(
                f"truncated: the checkout has {plural(report.source_files, 'source file')}; [code] max_files = "
                f"{service.max_files} (raise it, or set MEMTRIO_CODE_MAX_FILES)"
            )
        if report.skipped:
            print(f"not indexed ({len(report.skipped)}):")
            for path, reason in report.skipped:
                print(f"  {show_path(path)}\t{reason}")
        return 0

    return run(args, body, features={"code"})


def cmd_diff(args: argparse.Namespace, run: AppRunner) -> int:
    _require_enabled(args)

    async def body(app: AppContext) -> int:
        service = _service(app)
        root = await _root(args, app)
        try:
            text = await structural_diff(service.pool, root, args.base, args.head, args.limit)
        except DomainError as exc:
            raise CliError(cli_words(str(exc))) from None
        print(text)
        return 0

    return run(args, body, features={"code"})


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    code = subparsers.add_parser("code", help="code index and structural diff (tree-sitter)")
    sub = code.add_subparsers(dest="code_command", metavar="SUBCOMMAND")
    sub.required = True
    index = sub.add_parser(
        "index", help="build or refresh the code index of a checkout; list files not indexed"
    )
    add_common(index)
    index.add_argument(
        "--root", help="a directory inside the checkout (default: the current directory)"
    )
    index.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    index.set_defaults(func=cmd_index)
    diff = sub.add_parser(
        "diff", help="symbols added, removed or modified between BASE's merge base and HEAD"
    )
    add_common(diff)
    diff.add_argument("base", metavar="BASE", help="base revision")
    diff.add_argument(
        "head", metavar="HEAD", nargs="?", default="HEAD", help="head revision (default: HEAD)"
    )
    diff.add_argument(
        "--root", help="a directory inside the checkout (default: the current directory)"
    )
    diff.add_argument(
        "--limit", type=int, default=200, help="changed files to report (1-1000, default 200)"
    )
    diff.set_defaults(func=cmd_diff)
