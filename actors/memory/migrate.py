"""``memtrio migrate``: copy a whole store between SQLite and PostgreSQL, and prove the copy.

``memtrio migrate --to postgresql://...`` copies the configured store (the
home's SQLite file by default, or ``--store``) into that PostgreSQL database;
``--from postgresql://...`` copies that database into the configured store.
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
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any

from ...protocol.plural import plural
from ...supervisors.commands import CliError, add_common, emit, load_config
from ...supervisors.context import AppRunner
from ..store import backends, db
from ..store.direct import Direct
from ..store.interfaces import StoreTx
from . import transfer

Digest = dict[str, dict[str, Any]]


def _open(location: str, sqlite_file: Path, busy_timeout_ms: int) -> Direct:
    """The store at ``sqlite`` (``sqlite_file``) or a URL, schema migrated."""
    return Direct(sqlite_file, location, busy_timeout_ms=busy_timeout_ms, durability="sync")


def _digest_of(tx: StoreTx) -> Digest:
    out: dict[str, tuple[int, Any]] = {}
    for rec in transfer.export_lines(tx):
        if rec["type"] == "header":
            continue
        n, h = out.setdefault(rec["type"], (0, hashlib.sha256()))
        h.update(json.dumps(rec, ensure_ascii=False, sort_keys=True).encode("utf-8") + b"\n")
        out[rec["type"]] = (n + 1, h)
    return {t: {"count": n, "sha256": h.hexdigest()} for t, (n, h) in sorted(out.items())}


def digest(store: Direct) -> Digest:
    """Per record type: how many, and the SHA-256 of their export lines in order (one snapshot)."""
    return store.read(_digest_of)


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

        def export(tx: StoreTx) -> None:
            for rec in transfer.export_lines(tx):
                spool.write(json.dumps(rec, ensure_ascii=False, sort_keys=True).encode() + b"\n")

        source.read(export)
        spool.seek(0)
        checked = transfer.check_file(spool)
        added: dict[str, int] = target.write(lambda tx: transfer.import_records(tx, checked))
    return added


def migrate(source: str, target: str, sqlite_file: Path, busy_timeout_ms: int) -> dict[str, Any]:
    """Copy ``source`` into ``target`` (each ``sqlite``, the file ``sqlite_file``, or a URL);
    the check's report."""
    with _open(source, sqlite_file, busy_timeout_ms) as src:
        with _open(target, sqlite_file, busy_timeout_ms) as dst:
            added = copy(src, dst)
            before, after = digest(src), digest(dst)
    differ = sorted(t for t in set(before) | set(after) if before.get(t) != after.get(t))
    return {"added": added, "records": after, "differ": differ}


def cmd_migrate(args: argparse.Namespace, run: AppRunner) -> int:
    if (args.to is None) == (args.source is None):
        raise CliError("migrate: give exactly one of --to URL or --from URL")
    cfg, home = load_config(args)
    configured = cfg.store.url
    source, target = (configured, args.to) if args.to else (args.source, configured)
    if source == target:
        raise CliError("migrate: the source and the target are the same store")
    for flag, location in (("--to", args.to), ("--from", args.source)):
        if location is not None and location != backends.SQLITE:
            backends.check_url(location, f"the URL of migrate {flag}")
    report = migrate(source, target, db.db_path(home, cfg.store.file), cfg.store.busy_timeout_ms)
    report = {"from": _shown(source), "to": _shown(target), **report}

    def human(r: dict[str, Any]) -> str:
        lines = [f"copied {r['from']} to {r['to']}"]
        for kind, d in r["records"].items():
            mark = "DIFFERS" if kind in r["differ"] else "ok"
            lines.append(f"  {kind}: {d['count']} (sha256 {d['sha256'][:16]}) {mark}")
        return "\n".join(lines)

    emit(args, report, human)
    return 1 if report["differ"] else 0


def _shown(location: str) -> str:
    """Where ``location`` is, for the report (a URL without its passwords)."""
    return (
        "the home's SQLite store"
        if location == backends.SQLITE
        else backends.shown(Path(), location)
    )


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "migrate",
        help="copy the whole store to or from PostgreSQL, checked by counts and hashes",
    )
    add_common(parser)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--to", metavar="URL", help="copy the configured store into this (empty) database"
    )
    where.add_argument(
        "--from",
        dest="source",
        metavar="URL",
        help="copy this database into the configured store (which must be empty)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(func=cmd_migrate)
