"""``memtrio migrate``: copy a whole store between SQLite and PostgreSQL, or between two
SQLite homes, and prove the copy.

``memtrio migrate --to WHERE`` copies the configured store (the home's SQLite
file by default, or ``--store``) into WHERE; ``--from WHERE`` copies WHERE
into the configured store. WHERE is a ``postgresql://`` URL, a memtrio home
(a directory: its ``memtrio.sqlite``, created with the directory when missing)
or a SQLite file (``*.sqlite``, ``*.sqlite3``, ``*.db``).
The copy is the export and import of ``memtrio export``/``import``: the
source is read in one snapshot and written to a private temporary file, the
file is checked, and the target is written in one transaction, so a failed
copy leaves the target as it was. The target must be empty (a copy is not a
merge: ``memtrio import`` merges).

Check: after the commit both stores are exported again and compared, table
by table: the number of records of each type and the SHA-256 of their lines
(ids, contents, times, links, vectors and the recall log; not the header's
export time). Any difference fails the command (exit code 1) and names the
types that differ.

Progress: each phase (export, check, import, and the two exports of the check)
shows its progress on stderr (`supervisors.progress`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from ...protocol.plural import plural
from ...supervisors import private
from ...supervisors.commands import CliError, add_common, emit, load_config
from ...supervisors.context import AppRunner
from ...supervisors.progress import Progress
from ..store import backends
from ..store.backend import Backend
from ..store.direct import Direct
from ..store.interfaces import ReadTx
from ..store.sqlite import db
from . import transfer

Digest = dict[str, dict[str, Any]]
# A store: its backend (`backends.load`).
Location = Backend
SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db")
WHERE = "a postgresql:// URL, a memtrio home (a directory) or a SQLite file (*.sqlite, *.db)"


def _path_like(text: str) -> bool:
    """Whether ``text`` names a file or a directory rather than a database URL (a libpq
    ``key=value`` string is a URL here: it is checked, never created as a directory)."""
    if os.path.lexists(os.path.expanduser(text)):
        return True
    if "://" in text or "=" in text:
        return False
    return os.sep in text or text.startswith(("~", ".")) or text.lower().endswith(SQLITE_SUFFIXES)


def location(text: str, flag: str) -> Location:
    """Where ``--to``/``--from`` ``text`` points (see the module's docstring).

    Error handling: `CliError` (exit 2) for a missing source; `DriverMissing` or
    `ConfigError` (exit 2) for a database URL memtrio cannot use."""
    if not _path_like(text):
        if "://" not in text and "=" not in text:  # a bare word: not a URL, nor a path
            raise CliError(
                f"migrate {flag}: {text!r} is neither a URL nor a path; give {WHERE} "
                f"(./{text} for a home of that name here)",
                2,
            )
        return backends.check_url(text, f"the URL of migrate {flag}")
    path = Path(os.path.abspath(Path(text).expanduser()))
    if path.is_dir() or (not path.exists() and path.suffix.lower() not in SQLITE_SUFFIXES):
        if flag == "--from" and not path.is_dir():
            raise CliError(f"migrate {flag}: {text} does not exist; give {WHERE}", 2)
        if flag == "--to":
            private.make_dir(path)  # a new home, private like every home
        return backends.load(None, db.db_path(path))
    if flag == "--from" and not path.is_file():
        raise CliError(f"migrate {flag}: {text} does not exist; give {WHERE}", 2)
    return backends.load(None, path)


def _open(where: Location, busy_timeout_ms: int) -> Direct:
    """The store at ``where``, schema migrated."""
    return Direct(backend=where, busy_timeout_ms=busy_timeout_ms, durability="sync")


def record_count(tx: ReadTx) -> int:
    """About how many records `transfer.export_lines` writes (the progress's total)."""
    c = tx.upkeep.counts()
    return 1 + c.scopes + c.entities + c.edges + c.memories + c.vectors + c.recall_log


def _digest_of(tx: ReadTx, label: str) -> Digest:
    out: dict[str, tuple[int, Any]] = {}
    with Progress(label, record_count(tx), "records") as bar:
        for rec in bar.track(transfer.export_lines(tx)):
            if rec["type"] == "header":
                continue
            n, h = out.setdefault(rec["type"], (0, hashlib.sha256()))
            h.update(json.dumps(rec, ensure_ascii=False, sort_keys=True).encode("utf-8") + b"\n")
            out[rec["type"]] = (n + 1, h)
    return {t: {"count": n, "sha256": h.hexdigest()} for t, (n, h) in sorted(out.items())}


def digest(store: Direct, label: str = "migrate: check") -> Digest:
    """Per record type: how many, and the SHA-256 of their export lines in order (one snapshot)."""
    return store.read(lambda tx: _digest_of(tx, label))


def copy(source: Direct, target: Direct) -> dict[str, int]:
    """Export ``source`` and import it into the empty ``target`` in one transaction."""
    present = target.read(lambda tx: tx.upkeep.counts())
    if present.memories or present.entities or present.edges or present.scopes:
        raise CliError(
            "migrate: the target store is not empty "
            f"({plural(present.memories, 'memory')}, {plural(present.entities, 'entity')}); "
            "copy into an empty database, or merge with memtrio export and memtrio import"
        )
    with tempfile.TemporaryFile() as spool:

        def export(tx: ReadTx) -> int:
            with Progress("migrate: export", record_count(tx), "records") as bar:
                for rec in bar.track(transfer.export_lines(tx)):
                    line = json.dumps(rec, ensure_ascii=False, sort_keys=True).encode() + b"\n"
                    spool.write(line)
            return bar.done

        records = source.read(export)
        spool.seek(0)
        with Progress("migrate: read back", records, "records") as bar:
            checked = transfer.check_file(spool, progress=bar)
        with Progress("migrate: import", records, "records") as bar:
            added: dict[str, int] = target.write(
                lambda tx: transfer.import_records(tx, checked, progress=bar)
            )
    return added


def migrate(source: Location, target: Location, busy_timeout_ms: int) -> dict[str, Any]:
    """Copy ``source`` into ``target``; the check's report."""
    with _open(source, busy_timeout_ms) as src:
        with _open(target, busy_timeout_ms) as dst:
            added = copy(src, dst)
            before = digest(src, "migrate: check the source")
            after = digest(dst, "migrate: check the copy")
    differ = sorted(t for t in set(before) | set(after) if before.get(t) != after.get(t))
    return {"added": added, "records": after, "differ": differ}


def cmd_migrate(args: argparse.Namespace, run: AppRunner) -> int:
    if (args.to is None) == (args.source is None):
        raise CliError("migrate: give exactly one of --to WHERE or --from WHERE")
    cfg, home = load_config(args)
    configured = backends.load(cfg.store.url, db.db_path(home, cfg.store.file))
    given = location(args.to, "--to") if args.to else location(args.source, "--from")
    source, target = (configured, given) if args.to else (given, configured)
    if source.same_store(target):
        raise CliError("migrate: the source and the target are the same store")
    report = migrate(source, target, cfg.store.busy_timeout_ms)
    report = {"from": _shown(source, configured), "to": _shown(target, configured), **report}

    def human(r: dict[str, Any]) -> str:
        lines = [f"copied {r['from']} to {r['to']}"]
        for kind, d in r["records"].items():
            mark = "DIFFERS" if kind in r["differ"] else "ok"
            lines.append(f"  {kind}: {d['count']} (sha256 {d['sha256'][:16]}) {mark}")
        return "\n".join(lines)

    emit(args, report, human)
    return 1 if report["differ"] else 0


def _shown(where: Location, configured: Location) -> str:
    """Where ``where`` is, for the report (a URL without its passwords)."""
    return where.configured_name if where is configured else where.shown


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "migrate",
        help="copy the whole store to or from PostgreSQL or another SQLite home, checked by counts and hashes",
        description=(
            "Copy the whole configured store into an empty store (--to), or an empty configured "
            "store from another (--from), in one transaction, then check the copy by the counts "
            "and SHA-256 of every record type. WHERE is a postgresql:// URL, a memtrio home (a "
            "directory; --to creates it when missing) or a SQLite file (*.sqlite, *.sqlite3, *.db). "
            "Each phase shows its progress on stderr. To merge into a store that is not empty, use "
            "memtrio export and memtrio import."
        ),
    )
    add_common(parser)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--to", metavar="WHERE", help="copy the configured store into this (empty) store"
    )
    where.add_argument(
        "--from",
        dest="source",
        metavar="WHERE",
        help="copy this store into the configured store (which must be empty)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(func=cmd_migrate)
