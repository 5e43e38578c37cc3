"""``memtrio doctor``: where everything is, the store's health, and the home's permissions.

Exit code 0 when the database is intact, at the latest schema, every stored
vector can be loaded, and no path of the home is open to group or others; 1
otherwise (or when the store cannot open: then the report says why and what to
do); 2 when the configuration cannot work (a PostgreSQL URL libpq would misread,
the driver not installed).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import msgspec

from ...protocol.plural import plural
from ...supervisors import private
from ...supervisors.commands import emit, load_config
from ...supervisors.config import log_path
from ...supervisors.context import AppContext, AppRunner
from ...supervisors.errors import UserError
from ...supervisors.git import git_output
from ...supervisors.progress import Progress
from ..store import backends, connections
from ..store.interfaces import StoreTx
from ..store.sqlite import db
from ..store.tooling.runner import run_store_command
from ..store.tooling.services import store_of
from ..store.writer import Store


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
        lines = [
            f"permissions: fixed {plural(len(paths), 'path')} that group or others could access"
        ]
    else:
        lines = [
            f"permissions: {plural(len(paths), 'path')} that group or others can access "
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
    if isinstance(exc, connections.StoreUnavailable) and exc.damaged:
        return (
            f"{exc.problem}: move {exc.path} and its -wal and -shm files aside (memtrio then "
            "starts an empty store) and load your last export with `memtrio import FILE`; "
            f"`sqlite3 {exc.path} .recover` may salvage what is left"
        )
    return str(exc)


async def _vector_report(app: AppContext, store: Store) -> dict[str, Any]:
    """The stored vectors a server would skip when it loads them (``vectors.audit``)."""
    from ..vector_index.arrays import value_rule  # numpy: only for doctor
    from ..vectors.audit import audit

    v = app.config.vectors
    rule = value_rule(v.backend, v.metric, v.quantization)
    model_rule = value_rule(v.backend, "cos", v.quantization)
    return await store.read(
        lambda tx: audit(tx, v.dims, rule, model_rule), name="doctor.vector_audit"
    )


def _vector_lines(report: dict[str, Any]) -> list[str]:
    if report["status"] == "ok":
        return ["vectors: ok (every stored vector can be loaded)"]
    lines = [f"vectors: {report['unusable']} stored vector(s) cannot be loaded: {report['remedy']}"]
    for row in report["rows"]:
        table, reason = row["table"], row["reason"]
        key = next(k for k in row if k.endswith("_id"))
        lines.append(f"  {table} {key.removesuffix('_id')} #{row[key]}: {reason}")
    return lines


async def _database_report(store: Store) -> dict[str, Any]:
    """Where the database is, its size, schema version, integrity and counts."""

    def check(tx: StoreTx) -> dict[str, Any]:
        return {**tx.health.report(), "counts": msgspec.structs.asdict(tx.upkeep.counts())}

    report = await store.write(check, name="doctor.health")
    return {"database": store.backend.shown, **report}


def server_line(home: Path, idle_exit: float) -> str:
    """Which ``memtrio serve`` of ``home`` runs (its runtime file), in one line: the owner
    ``memtrio mcp`` starts keeps running after its last session, and this says so."""
    from ..net import runtime

    try:
        found, _ = runtime.read(home)
    except runtime.Untrusted as exc:
        return f"not known: {exc}"
    except OSError as exc:
        return f"not known: {runtime.RUN_DIR}/{runtime.RUNTIME_FILE}: {exc.strerror}"
    if found is None or not runtime.pid_alive(found.pid):
        return "none running (the first memtrio mcp starts the owner of this home)"
    stop = "memtrio serve --stop stops it"
    if found.url:
        return f"memtrio serve pid {found.pid} at {found.url}; {stop}"
    idle = (
        f"exits {idle_exit / 60:g} min after its last session" if idle_exit else "never idles out"
    )
    return f"memtrio serve pid {found.pid}, the owner memtrio mcp attaches to ({idle}); {stop}"


def cmd_doctor(args: argparse.Namespace, run: AppRunner) -> int:
    cfg, home = load_config(args)
    perms = _permissions(home, log_path(cfg, home), args.fix)

    async def body(app: AppContext) -> int:
        store = store_of(app)
        with Progress("doctor", 2, "checks") as checks:  # the database, then the vectors
            database = await _database_report(store)
            checks.advance()
            vectors = await _vector_report(app, store)
            checks.advance()
        result = {
            "home": str(app.home),
            **database,
            "log": str(log_path(app.config, app.home)),
            "cwd": str(app.cwd),
            "current_scope": store.default_scope,
            "git": git_output(["--version"], app.cwd) or "not found",
            "embeddings": "on" if app.config.embedding.enabled else "off",
            "durability": app.config.store.durability,
            "server": server_line(app.home, app.config.serve.idle_exit),
            "permissions": perms,
            "vectors": vectors,
        }
        healthy = (
            result["integrity"] == "ok"
            and result["fts_integrity"] == "ok"
            and result["schema_version"] == result["latest_schema_version"]
            and perms["status"] != "loose"
            and result["vectors"]["status"] == "ok"
        )

        def human(r: dict[str, Any]) -> str:
            skip = ("counts", "permissions", "vectors")
            lines = [f"{k}: {v}" for k, v in r.items() if k not in skip]
            lines.append("counts: " + ", ".join(f"{k} {v}" for k, v in r["counts"].items()))
            lines += _vector_lines(r["vectors"])
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
            "database": backends.load(cfg.store.url, db.db_path(home, cfg.store.file)).shown,
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
        return 2 if exc.code == 2 else 1  # 2: the configuration (a URL, the driver)
