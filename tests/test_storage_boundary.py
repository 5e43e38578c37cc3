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
import importlib.util
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


# The one place a store's address is looked at and a backend chosen (`backends.load`), and
# the backends' own classes (each knows itself). ``supervisors.config`` checks the setting's
# syntax (its default word and the URL schemes it takes): the supervisors import no actor.
BACKEND_CHOICE = {
    "actors.store.backends",
    "actors.store.sqlite.backend",
    "actors.store.pg.backend",
    "supervisors.config",
}
BACKEND_NAMES = {"sqlite", "postgresql", "postgres", "SQLITE", "POSTGRESQL"}
BACKEND_CLASSES = {"SqliteBackend", "PgBackend"}


def _names_a_backend(node: ast.expr) -> bool:
    """A backend's name or URL scheme spelt out: ``"sqlite"``, ``SQLITE``, ``"postgresql://"``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value in BACKEND_NAMES or node.value.startswith(("postgresql:", "postgres:"))
    if isinstance(node, ast.Name | ast.Attribute):
        name = node.id if isinstance(node, ast.Name) else node.attr
        return name in BACKEND_NAMES or name in BACKEND_CLASSES
    if isinstance(node, ast.Tuple):
        return any(_names_a_backend(e) for e in node.elts)
    return False


def _backend_comparisons(path: Path) -> list[str]:
    """Where ``path`` asks which backend the store is, rather than what it can do: a URL
    or a backend's name compared with a backend's (or a URL with None: SQLite's spelling),
    a URL's scheme tested, an ``isinstance`` of a backend's class."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            url_none = any(
                (isinstance(s, ast.Attribute) and s.attr == "url")
                or (isinstance(s, ast.Name) and s.id == "url")
                for s in sides
            ) and any(isinstance(s, ast.Constant) and s.value is None for s in sides)
            if url_none or any(_names_a_backend(s) for s in sides):
                found.append(f"a backend comparison (line {node.lineno})")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
            if called in ("startswith", "isinstance") and any(
                _names_a_backend(a) for a in node.args[-1:]
            ):
                found.append(f"a backend test by {called} (line {node.lineno})")
    return found


def _hits(check: Callable[[Path], list[str]], keep: Callable[[str], bool]) -> dict[str, list[str]]:
    """module name -> what ``check`` found in it, for every source module ``keep`` takes."""
    return {
        module_name(path): hits
        for path in source_files()
        if keep(module_name(path)) and (hits := check(path))
    }


def test_the_backend_is_chosen_in_one_place() -> None:
    """Outside `backends.load` (and the backends' own classes), code holds a `Backend` and
    asks `Backend.has` what it can do: no comparison of a URL or a backend's name."""
    found = _hits(_backend_comparisons, lambda name: name not in BACKEND_CHOICE)
    assert not found, f"backend comparisons outside actors/store/backends.py: {found}"


def test_the_backend_check_sees_a_comparison(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "def f(store, url, tx, b):\n"
        "    a = store.url is None\n"
        "    b = url != 'sqlite'\n"
        "    c = tx.backend == 'postgresql'\n"
        "    d = url.startswith(('postgresql://', 'postgres://'))\n"
        "    e = url == backends.SQLITE\n"
        "    f = isinstance(b, PgBackend)\n"
        "    return b.has(Capability.FILE_UPKEEP) and url == 'other'\n"
    )
    assert [f.split(" (line ")[1] for f in _backend_comparisons(sample)] == [
        f"{n})" for n in range(2, 8)
    ]


# The store's packages that speak to a driver: each backend's own. Every other module
# catches the store's own errors (`interfaces.errors`), never a driver's.
DRIVER_PACKAGES = ("actors.store.sqlite.", "actors.store.pg.")


def _driver_catches(path: Path) -> list[str]:
    """The ``except`` clauses of ``path`` that name a driver's error (``sqlite3.Error``...)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ExceptHandler) and node.type is not None:
            for name in ast.walk(node.type):
                if isinstance(name, ast.Name) and name.id in DRIVERS | {"ReadError"}:
                    found.append(f"except {ast.unparse(node.type)} (line {node.lineno})")
                    break
    return found


def test_outside_the_backends_only_the_stores_own_errors_are_caught() -> None:
    found = _hits(
        _driver_catches,
        lambda name: (
            name.startswith("actors.") and not name.startswith((*DRIVER_PACKAGES, *EXCEPTIONS))
        ),
    )
    assert not found, f"a driver's errors caught outside the backends: {found}"


def test_the_catch_check_sees_a_drivers_error(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "try:\n    pass\nexcept (sqlite3.Error, OSError):\n    pass\n"
        "try:\n    pass\nexcept StoreError:\n    pass\n"
    )
    assert _driver_catches(sample) == ["except (sqlite3.Error, OSError) (line 3)"]


# Inside the store, each driver has one room (issue #41): SQLite's package alone imports
# sqlite3 (its connections, schema, maintenance, scratch files and dialect), PostgreSQL's
# alone psycopg. The neutral plumbing at the root, the domain rules (domain/) and the tool
# plumbing (tooling/) import neither: `dsn` asks `pg.conninfo` for libpq's reading of a string.
DRIVER_HOMES = {
    "sqlite3": "actors.store.sqlite",
    "psycopg": "actors.store.pg",
    "psycopg_pool": "actors.store.pg",
}


def _driver_imports(path: Path) -> set[str]:
    """The drivers ``path`` imports, at module level or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found.add((node.module or "").split(".")[0])
    return found & set(DRIVER_HOMES)


def test_inside_the_store_each_driver_is_imported_by_its_backend_package_only() -> None:
    store = {module_name(p): p for p in source_files() if module_name(p).startswith(STORAGE)}
    # Both rooms hold their connections and schema (a vacuous pass is not a pass).
    assert {"actors.store.sqlite.db", "actors.store.sqlite.schema", "actors.store.pg.conn"} <= set(
        store
    )
    misplaced = {
        name: sorted(
            driver
            for driver in _driver_imports(path)
            if not (name + ".").startswith(DRIVER_HOMES[driver] + ".")
        )
        for name, path in store.items()
    }
    misplaced = {name: drivers for name, drivers in misplaced.items() if drivers}
    assert not misplaced, f"actors/store modules importing another room's driver: {misplaced}"


def test_the_driver_import_check_sees_function_level_imports(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import sqlite3 as lite\nimport json\n"
        "def f():\n    from psycopg.conninfo import conninfo_to_dict\n"
        "    from .db import connect\n"
    )
    assert _driver_imports(sample) == {"sqlite3", "psycopg"}


BACKEND_PACKAGES = ("actors.store.sqlite", "actors.store.pg")


def _reaches_into(graph: dict[str, set[str]], package: str, other: str) -> list[str]:
    """The imports of modules of ``package`` that name a module of ``other``."""
    return sorted(
        f"{name} -> {target}"
        for name, targets in graph.items()
        if (name + ".").startswith(package + ".")
        for target in targets
        if (target + ".").startswith(other + ".")
    )


def test_neither_backend_package_imports_the_other() -> None:
    """A third backend is its own package: what both schemas share is `store.schemas`."""
    sqlite, pg = BACKEND_PACKAGES
    crossings = _reaches_into(GRAPH, pg, sqlite) + _reaches_into(GRAPH, sqlite, pg)
    assert not crossings, f"a backend package importing the other one: {crossings}"


def test_the_backend_crossing_check_sees_one() -> None:
    graph = {"actors.store.pg.conn": {"actors.store.sqlite.schema", "actors.store.schemas"}}
    assert _reaches_into(graph, "actors.store.pg", "actors.store.sqlite") == [
        "actors.store.pg.conn -> actors.store.sqlite.schema"
    ]


def test_the_records_version_is_sqlites_schema_version() -> None:
    """Export headers carry `schemas.RECORDS_VERSION` on either backend: it must follow
    SQLite's migrations (bump it with a new SQLite migration that changes the records)."""
    from memtrio.actors.store import schemas
    from memtrio.actors.store.sqlite import schema

    assert schemas.RECORDS_VERSION == schema.LATEST


MAX_INTERFACE_METHODS = 20


def _interface_sizes() -> dict[str, int]:
    """Each storage interface (a Protocol of ``actors/store/interfaces``): how many methods
    and properties it asks for, its bases' included."""
    import importlib
    import inspect

    sizes: dict[str, int] = {}
    for path in sorted((ROOT / "actors" / "store" / "interfaces").glob("*.py")):
        module = importlib.import_module("memtrio." + module_name(path))
        for name, cls in vars(module).items():
            if (
                inspect.isclass(cls)
                and cls.__module__ == module.__name__
                and getattr(cls, "_is_protocol", False)
            ):
                sizes[name] = len(
                    {
                        attr
                        for klass in cls.__mro__
                        if klass.__module__.startswith("memtrio.actors.store.interfaces")
                        for attr, value in vars(klass).items()
                        if not attr.startswith("_")
                        and callable(value)
                        or isinstance(value, property)
                    }
                )
    return sizes


def test_each_storage_interface_is_small() -> None:
    """Interfaces split by what callers use (issue #41): none asks for 20 methods or more."""
    sizes = _interface_sizes()
    assert {"Graph", "GraphWrites", "Upkeep", "Import", "Vectors", "Embeddings"} <= set(sizes)
    # A transaction gathers the interfaces (one property each): the interfaces are sized.
    sizes = {name: n for name, n in sizes.items() if name not in ("ReadTx", "StoreTx")}
    large = {name: n for name, n in sizes.items() if n >= MAX_INTERFACE_METHODS}
    assert not large, f"storage interfaces of {MAX_INTERFACE_METHODS} methods or more: {large}"


def test_a_read_transaction_offers_no_interface_that_only_writes() -> None:
    from memtrio.actors.store.interfaces import ReadTx, StoreTx

    write_only = {"graph_writes", "graph_merge", "imports", "health", "file_upkeep"}
    assert write_only <= set(vars(StoreTx)) and not write_only & set(dir(ReadTx))


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
    assert {
        "store",
        "vector_index",
        "anchors",
        "kg",
        "memory",
        "ranker",
        "vectors",
        "embedder",
        "ui",
    } <= set(documented)
    actual = _package_imports()
    features = {
        "store",
        "vector_index",
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


def test_the_architecture_doc_lists_each_package_below_those_it_imports() -> None:
    """docs/architecture.md's table is the layering: a package imports only packages of the
    rows above its own (its imports are the graph's: the test above)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    rows = re.findall(r"^  \| `(\w+)` \| (.+?) \|$", text, re.MULTILINE)
    order = [name for name, _ in rows]
    above = {
        name: sorted(t for t in re.findall(r"`(\w+)`", cell) if t in order[order.index(name) :])
        for name, cell in rows
    }
    above = {name: names for name, names in above.items() if names}
    assert not above, f"docs/architecture.md: packages listed above what they import: {above}"


def _depends_on(package: str) -> set[str]:
    """The feature packages ``package`` imports, directly or through others."""
    imports = _package_imports()
    seen: set[str] = set()
    pending = [package]
    while pending:
        for target in imports.get(pending.pop(), set()):
            if target not in seen:
                seen.add(target)
                pending.append(target)
    return seen


def test_the_ranker_does_not_depend_on_the_knowledge_graph_tools() -> None:
    """The ranker reads the store and the vector index library (a leaf), not the graph tools
    the vector tools are built on: it sits below `kg` in the layering (issue #41)."""
    below = _depends_on("actors.ranker")
    assert "actors.vector_index" in below and "actors.kg" not in below, sorted(below)


def test_the_storage_layer_imports_no_feature() -> None:
    bad = {
        module: sorted(t for t in targets if t.startswith("actors.") and not t.startswith(STORAGE))
        for module, targets in GRAPH.items()
        if module.startswith(STORAGE)
    }
    bad = {m: t for m, t in bad.items() if t}
    assert not bad, f"actors/store imports features: {bad}"


__all__ = ["ROOT"]


def _dialect_twins() -> Any:
    spec = importlib.util.spec_from_file_location(
        "dialect_twins", ROOT / "tools" / "dialect_twins.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Identical function-body lines of the two backends by `tools/dialect_twins.py` (issue
# #41: 509 before the shared bases in `actors/store/rows`, 120 after; 127 once the store's
# rooms put SQLite's schema.py beside PostgreSQL's, 5 lines of loops and returns, and the
# FTS5 seeds' numpy scoring added 2 `return` lines). The issue's bound is
# `MAX_DIALECT_TWINS`; the ceiling is where the code stands, so the count never grows back:
# lower it when it falls.
MAX_DIALECT_TWINS = 150
DIALECT_TWINS_CEILING = 127


def test_the_backends_share_their_logic_instead_of_repeating_it() -> None:
    found = _dialect_twins().total()
    assert DIALECT_TWINS_CEILING < MAX_DIALECT_TWINS
    assert found <= DIALECT_TWINS_CEILING, (
        f"{found} identical body lines in actors/store/sqlite and actors/store/pg "
        f"(ceiling {DIALECT_TWINS_CEILING}): move the shared logic to actors/store/rows; "
        "`python tools/dialect_twins.py --lines` lists them"
    )


def test_the_twin_count_sees_a_line_repeated_in_both_dialects(tmp_path: Path) -> None:
    for backend, mark, call in (("sqlite", "?", "execute"), ("pg", "%(id)s", "native")):
        (tmp_path / backend).mkdir()
        (tmp_path / backend / "things.py").write_text(
            "class Things:\n"
            "    def get(self, thing_id: int) -> object:\n"
            '        """One thing."""\n'
            f'        row = self.conn.{call}("SELECT name FROM things WHERE id = {mark}",\n'
            "            (thing_id,),\n"
            "        )\n"
            f"        return row  # {backend}\n",
            encoding="utf-8",
        )
    found = _dialect_twins().twins(tmp_path)
    assert dict(found["things.py"]) == {
        'row = self.conn.execute("SELECT name FROM things WHERE id = ?",': 1,
        "(thing_id,),": 1,
    }
