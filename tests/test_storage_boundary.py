"""The storage layer is a boundary (docs/architecture.md, "Storage").

Outside ``actors/store`` nothing imports ``sqlite3`` or ``psycopg``, calls ``.execute``,
holds a connection of the store (``tx.conn``, ``read_conn``/``write_conn``: all gone) or asks which
backend it runs on; a request of an actor never carries a function of a connection; the
feature packages import one another without a cycle. The two exceptions are named: the
code index keeps its own database (``actors.code``), and the chaos checker reads a store
independently on purpose (``actors.chaos``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import msgspec
from test_architecture import GRAPH, ROOT, find_cycle, module_name, source_files

STORAGE = "actors.store"
EXCEPTIONS = ("actors.code", "actors.chaos")
DRIVERS = {"sqlite3", "psycopg", "psycopg_pool"}
BACKEND_WORDS = re.compile(r"\b(is_postgres|dialect)\b")
# Modules not yet behind the storage interfaces (issue #30, under way): each entry is a
# defect to remove, never one to add; the test fails when a listed module is clean
# (take it off the list) and when an unlisted one reaches past the boundary.
TRANSITIONAL: set[str] = set()


def _outside(module: str) -> bool:
    return not module.startswith(STORAGE) and not module.startswith(EXCEPTIONS)


def _crossings(path: Path) -> list[str]:  # noqa: C901
    """What in ``path`` reaches past the storage boundary."""
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text, str(path))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name.split(".")[0] in DRIVERS]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            if (node.module or "").split(".")[0] in DRIVERS:
                found.append(f"from {node.module} import")
        elif isinstance(node, ast.Attribute):
            if node.attr in ("execute", "executemany", "executescript"):
                found.append(f".{node.attr} (line {node.lineno})")
            elif node.attr in ("read_conn", "write_conn"):
                found.append(f".{node.attr} (line {node.lineno})")
            elif node.attr == "conn" and isinstance(node.value, ast.Name) and node.value.id == "tx":
                found.append(f"tx.conn (line {node.lineno})")
        elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Attribute):
            if node.left.attr == "url" and any(
                isinstance(c, ast.Constant) and c.value is None for c in node.comparators
            ):
                found.append(f"a check of the store's URL (line {node.lineno})")
        elif isinstance(node, ast.Name) and BACKEND_WORDS.fullmatch(node.id):
            found.append(f"{node.id} (line {node.lineno})")
    return found


def _violations() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for path in source_files():
        name = module_name(path)
        if name.startswith("actors") and _outside(name):
            found = _crossings(path)
            if found:
                out[name] = found
    return out


VIOLATIONS = _violations()


def test_nothing_outside_the_storage_layer_reaches_into_the_database() -> None:
    new = {m: v for m, v in VIOLATIONS.items() if m not in TRANSITIONAL}
    assert not new, f"SQL, drivers or backend checks outside actors/store: {new}"


def test_the_transitional_list_only_shrinks() -> None:
    clean = sorted(m for m in TRANSITIONAL if m not in VIOLATIONS)
    assert not clean, f"behind the interfaces now: take them off TRANSITIONAL: {clean}"


def test_the_check_sees_a_crossing(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import sqlite3\n\ndef f(tx):\n    tx.conn.execute('SELECT 1')\n    return is_postgres(tx)\n"
    )
    found = _crossings(sample)
    assert any("sqlite3" in f for f in found) and any("tx.conn" in f for f in found)
    assert any(".execute" in f for f in found) and any("is_postgres" in f for f in found)


def test_no_request_carries_a_function_of_a_connection() -> None:
    """An actor's request names typed values; a unit of work is a function of `StoreTx`."""
    import importlib

    from memtrio.protocol.messages import Request

    for path in source_files():
        importlib.import_module("memtrio." + module_name(path))
    pending = list(Request.__subclasses__())
    seen: set[type] = set()
    while pending:
        cls = pending.pop()
        if cls in seen:
            continue
        seen.add(cls)
        pending += cls.__subclasses__()
        for field in msgspec.structs.fields(cls):
            shown = repr(field.type)
            assert "Connection" not in shown and "Cursor" not in shown, (cls, field.name, shown)
    assert len(seen) > 5


def _package(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "actors" and len(parts) > 2 else module


def test_no_import_cycle_between_feature_packages() -> None:
    packages: dict[str, set[str]] = {}
    for module, targets in GRAPH.items():
        if not module.startswith("actors."):
            continue
        mine = _package(module)
        out = packages.setdefault(mine, set())
        for target in targets:
            theirs = _package(target)
            if theirs.startswith("actors.") and theirs != mine:
                out.add(theirs)
    for targets in packages.values():
        for target in targets:
            packages.setdefault(target, set())
    cycle = find_cycle(packages)
    assert cycle is None, "feature packages import each other: " + " -> ".join(cycle or [])


def _package_imports() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for module, targets in GRAPH.items():
        if module.startswith("actors."):
            mine = _package(module)
            out.setdefault(mine, set()).update(
                _package(t) for t in targets if _package(t).startswith("actors.")
            )
            out[mine].discard(mine)
    return out


def test_the_architecture_doc_shows_the_package_imports_as_they_are() -> None:
    """docs/architecture.md's table of which feature imports which is the import graph's."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    rows = re.findall(r"^  \| `(\w+)` \| (.+?) \|$", text, re.MULTILINE)
    documented = {
        name: set(re.findall(r"`(\w+)`", cell)) for name, cell in rows if "none of" not in cell
    }
    assert {"store", "anchors", "kg", "memory", "ranker", "vectors", "embedder", "ui"} <= set(
        documented
    )
    actual = _package_imports()
    features = {
        "store",
        "embedder",
        "anchors",
        "kg",
        "vectors",
        "ranker",
        "memory",
        "ui",
        "code",
        "net",
    }
    for name, shown in documented.items():
        real = {t.removeprefix("actors.") for t in actual.get(f"actors.{name}", set())}
        real = {t for t in real if t in features | {"status", "chaos"}}
        assert shown == real, f"docs/architecture.md: `{name}` imports {sorted(real)}"


def test_the_storage_layer_imports_no_feature() -> None:
    bad = {
        module: sorted(t for t in targets if t.startswith("actors.") and not t.startswith(STORAGE))
        for module, targets in GRAPH.items()
        if module.startswith(STORAGE)
    }
    bad = {m: t for m, t in bad.items() if t}
    assert not bad, f"actors/store imports features: {bad}"


__all__ = ["ROOT"]
