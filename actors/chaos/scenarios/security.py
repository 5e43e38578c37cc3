"""Hostile input from outside the protocol: ``memtrio import`` files built to break the importer,
and a Git checkout whose configuration and symlinks try to run commands or leak files."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import trio

from ..client import chaos_env
from ..harness import Ledger, Run, crashed, reply_error_text, reply_text
from ..hostile import make_hostile_checkout

# How long one `memtrio` CLI run may take (seconds) before it counts as hung.
_CLI_TIMEOUT = 120


def _json_line(record: dict[str, object]) -> bytes:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _import_cases(base: Path) -> list[tuple[str, Path]]:
    """Hostile files for ``memtrio import``, each written under ``base``."""
    line = _json_line
    ok = line({"type": "entity", "name": "Alice", "entityType": "person", "observations": ["x"]})
    header = line({"type": "header", "format": "memtrio-export", "version": 1})
    memory = {
        "type": "memory", "id": 1, "content": "c", "memory_type": "note", "importance": 0.0,
        "created_at": 1.0, "updated_at": 1.0,
    }  # fmt: skip
    huge = (
        b'{"type":"entity","name":"Bob","entityType":"t","observations":["'
        + b"x" * (20 * 1024 * 1024)
        + b'"]}'
    )
    cases = {
        "oversized-observation": ok
        + b"\n"
        + line({"type": "entity", "name": "B", "entityType": "t", "observations": ["x" * 65537]}),
        "oversized-line": ok + b"\n" + huge,
        "wrong-type": header + b"\n" + line({**memory, "scopes": "global"}),
        "bad-utf8": b'{"type":"entity","name":"caf\xe9","entityType":"t","observations":[]}',
        "deep-nesting": ok
        + b"\n"
        + b'{"type":"entity","name":'
        + b"[" * 100_000
        + b"]" * 100_000
        + b"}",
        "bom": b"\xef\xbb\xbf" + ok,
        "nul-bytes": ok + b"\n\x00\x00garbage",
        "truncated": ok + b"\n" + ok[:30],
        "negative-id": header + b"\n" + line({**memory, "id": -1}),
        "duplicate-ids": header + b"\n" + line(memory) + b"\n" + line(memory),
        "nan": header + b"\n" + line(memory).replace(b'"importance":0.0', b'"importance":NaN'),
        "empty": b"",
    }
    out = []
    for name, data in cases.items():
        path = base / f"{name}.jsonl"
        path.write_bytes(data)
        out.append((name, path))
    fifo = base / "fifo.jsonl"
    os.mkfifo(fifo)  # nobody writes it: a blocking open() would hang
    out.append(("fifo", fifo))
    out.append(("directory", base))
    return out


def _tables(db: Path) -> dict[str, list[str]]:
    """Every row of every table of ``db`` (to see that a refused import changed nothing)."""
    conn = sqlite3.connect(str(db))
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {t: sorted(map(repr, conn.execute(f'SELECT * FROM "{t}"'))) for t in names}
    finally:
        conn.close()


async def _cli(home: Path, *args: str) -> tuple[int | None, str]:
    """Run ``memtrio *args`` on ``home``: its exit code (None: it did not exit) and stderr."""
    with trio.move_on_after(_CLI_TIMEOUT):
        done = await trio.run_process(
            [sys.executable, "-m", "memtrio.supervisors.cli", *args],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            env=chaos_env(home),
            cwd=str(home),
        )
        return done.returncode, done.stderr.decode("utf-8", "replace")
    return None, f"(no exit within {_CLI_TIMEOUT} s)"


async def _refuse_hostile_imports(run: Run, home: Path) -> None:
    """Each hostile file is refused in one line with exit 1, and the store stays as it was."""
    out = run.out
    db = home / "memtrio.sqlite"
    before = await trio.to_thread.run_sync(_tables, db)
    cases = await trio.to_thread.run_sync(_import_cases, run.base)
    for name, path in cases:
        out.malformed += 1
        code, stderr = await _cli(home, "import", str(path))
        lines = stderr.strip().splitlines()
        if code != 1 or len(lines) != 1 or "nothing was imported" not in stderr:
            out.violations.append(f"import {name}: exit {code}, stderr {stderr[-300:]!r}")
        elif "Traceback" in stderr:
            out.violations.append(f"import {name}: a traceback: {stderr[-300:]!r}")
        if await trio.to_thread.run_sync(_tables, db) != before:
            out.violations.append(f"import {name}: refused, but the store changed")


def _write_import_at_the_limits(path: Path) -> None:
    """A valid file at the limits: the biggest observation there may be, many small ones."""
    big = "memtrio import limit " * (65536 // 21)
    records: Iterator[dict[str, object]] = (
        {
            "type": "entity",
            "name": f"E{i}",
            "entityType": "t",
            "observations": [big] if i == 0 else [f"fact {i} about import"] * 3,
        }
        for i in range(200)
    )
    path.write_bytes(b"\n".join(map(_json_line, records)))


async def _recall_after_import(run: Run, home: Path) -> None:
    """A recall over what was imported answers, fast and bounded in size."""
    out = run.out
    server = await run.server(home)
    started = time.monotonic()
    reply = await server.call_tool("recall", {"query": "memtrio import limit", "limit": 10})
    seconds = time.monotonic() - started
    size = len(json.dumps(reply))
    if "result" not in reply or reply["result"].get("isError"):
        out.violations.append(f"recall after the import failed: {str(reply)[:300]}")
    elif seconds > 10 or size > 2 * 1024 * 1024:
        out.violations.append(f"recall after the import took {seconds:.1f} s for {size:,} bytes")
    out.notes.append(f"recall after importing took {seconds:.2f} s, {size:,} bytes")
    await run.stop(server)


async def import_limits(run: Run) -> None:
    """Hostile ``memtrio import`` files (oversized, wrong types, bad UTF-8, deep nesting, a FIFO...)
    are each refused in one line with exit 1 and the store unchanged; then a valid import at the
    limits succeeds and a recall afterwards stays fast and bounded."""
    home = run.home()
    ledger = Ledger()
    await run.prefill(home, ledger, 5)
    await _refuse_hostile_imports(run, home)
    valid = run.base / "valid.jsonl"
    _write_import_at_the_limits(valid)
    code, stderr = await _cli(home, "import", str(valid))
    if code != 0:
        run.out.violations.append(f"a valid import failed: exit {code}, {stderr[-300:]!r}")
    await _recall_after_import(run, home)
    run.verify(home, ledger)


async def hostile_checkout(run: Run) -> None:
    """A checkout whose Git config names commands to run and whose symlinks lead out of it:
    the git- and file-reading tools run none of them and return nothing from outside."""
    out = run.out
    hostile = await trio.to_thread.run_sync(make_hostile_checkout, run.base / "hostile")
    root, written = str(hostile.root), run.base / "written-by-git"
    server = await run.server(run.home(), {"MEMTRIO_CODE": "on"}, cwd=hostile.root)
    calls: list[tuple[str, dict[str, object], bool]] = [  # (tool, arguments, succeeds)
        ("remember", {"content": "hostile checkout note"}, True),
        ("recall", {"query": "hostile checkout note", "scopes": [f"repo:{root}"]}, True),
        ("code_outline", {"path": "app.py"}, True),
        ("code_imports", {"path": "app.py", "root": root}, True),
        ("find_symbol", {"query": "outside_secret_fn"}, True),
        ("find_symbol", {"query": "OutsideSecretClass", "root": root}, True),
        ("code_diff", {"base": hostile.base, "head": hostile.head}, True),
        ("code_outline", {"path": "escape.py"}, False),
        ("code_outline", {"path": "sub/inner.py"}, False),
        ("code_imports", {"path": "linkdir/inner.py"}, False),
        ("code_diff", {"base": f"--output={written}"}, False),
    ]
    for tool, arguments, succeeds in calls:
        reply = await server.call_tool(tool, arguments, timeout=120)
        error = reply_error_text(reply)
        if error is not None:
            out.errors_seen += 1
        if crashed(out, f"{tool} {arguments}", reply):
            pass
        elif succeeds and error is not None:
            out.violations.append(f"{tool} {arguments} failed: {error[:160]}")
        elif not succeeds and error is None:
            out.violations.append(f"{tool} {arguments} was not refused: {reply_text(reply)[:160]}")
        for name in hostile.leaked(json.dumps(reply)):
            out.violations.append(f"{tool} {arguments} returned {name} from outside the checkout")
    await run.stop(server)
    out.errors_expected, out.errors_exact = sum(not ok for _, _, ok in calls), True
    for marker in hostile.fired():
        out.violations.append(f"the checkout's Git configuration ran a command: {marker}")
    if written.exists():
        out.violations.append("a revision argument was read by git as an option (--output)")
