"""The shape of the code: which way imports point, and how big a module or function may grow.

The import graph is built from the source of ``actors/``, ``protocol/`` and
``supervisors/``, module-level and function-level imports alike (an import
inside a function is still a dependency). The rules are the ones
docs/architecture.md draws:

- no import cycle between modules;
- ``protocol`` is pure: it imports neither ``actors`` nor ``supervisors``;
- only the composition root (``supervisors.app``) and the CLI entry
  (``supervisors.cli``) import ``actors``; no ``actors`` module imports them;
- modules stay under 600 lines and functions under 100 (data tables aside);
- no function is more complex than McCabe 10 (ruff's C901), except those listed in
  `COMPLEX_FUNCTIONS`, and none of those grows;
- the tests wait on the real clock (``time.sleep``, ``trio.sleep`` outside trio's
  virtual clock, ``asyncio.sleep``) in at most `MAX_REAL_SLEEPS` places.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from ruff.__main__ import find_ruff_bin

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("actors", "protocol", "supervisors")
COMPOSITION_ROOT = {"supervisors.app", "supervisors.cli"}
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 100
# Modules that are mostly data (per-language query tables): exempt from the line limits.
DATA_TABLES = {"actors.code.languages"}


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_files() -> Iterator[Path]:
    for package in PACKAGES:
        yield from sorted((ROOT / package).rglob("*.py"))


def resolve(module: str, is_package: bool, node: ast.ImportFrom) -> list[str]:
    """The project modules an ``from X import a, b`` names (X relative to ``module``)."""
    if node.level:
        base = module.split(".")
        if not is_package:
            base = base[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
        if target.startswith("memtrio."):
            target = target[len("memtrio.") :]
        elif target.split(".")[0] not in PACKAGES:
            return []
    # `from . import x` imports the submodule x when it is one.
    return [f"{target}.{alias.name}" for alias in node.names] + [target]


def build_graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in source_files()}
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                targets = resolve(name, is_package, node)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    target = alias.name.removeprefix("memtrio.")
                    if target.split(".")[0] in PACKAGES:
                        targets.append(target)
            for target in targets:
                # The most specific project module the import names.
                while target and target not in files:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


GRAPH = build_graph()


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_graph_sees_function_level_imports() -> None:
    # supervisors.app imports the feature list; actors.store.tools imports the ranker's key.
    assert "actors.features" in GRAPH["supervisors.app"]
    assert len(GRAPH) > 40 and sum(map(len, GRAPH.values())) > 150


def test_no_import_cycle() -> None:
    cycle = find_cycle(GRAPH)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_protocol_is_pure() -> None:
    bad = imports_where(lambda m: m.startswith("protocol"), lambda t: not t.startswith("protocol"))
    assert not bad, f"protocol imports outside itself: {bad}"


def imports_where(
    importer: Callable[[str], bool], imported: Callable[[str], bool]
) -> list[tuple[str, str]]:
    """The edges of the graph from a module ``importer`` accepts to one ``imported`` accepts."""
    return sorted(
        (module, target)
        for module, targets in GRAPH.items()
        if importer(module)
        for target in targets
        if imported(target)
    )


def test_only_the_composition_root_imports_actors() -> None:
    bad = imports_where(
        lambda m: m.startswith("supervisors") and m not in COMPOSITION_ROOT,
        lambda t: t.startswith("actors"),
    )
    assert not bad, f"runtime modules importing actors: {bad}"


def test_actors_never_import_the_composition_root() -> None:
    bad = imports_where(lambda m: m.startswith("actors"), lambda t: t in COMPOSITION_ROOT)
    assert not bad, f"actors importing the composition root or CLI entry: {bad}"


# The vector index library (exact, hnsw on usearch, ivf, over numpy arrays) is a leaf
# (issue #41): the ranker and the vector tools import it, and it imports no feature, only
# itself, the pure protocol code, the native libraries' load order (`actors.native`) and
# private files (`supervisors.private`, where a built hnsw graph is saved).
VECTOR_INDEX = "actors.vector_index"
LEAF_MAY_IMPORT = ("protocol.", "actors.native", "supervisors.private", f"{VECTOR_INDEX}.")


def test_the_vector_index_library_is_a_leaf() -> None:
    library = {m for m in GRAPH if m == VECTOR_INDEX or m.startswith(f"{VECTOR_INDEX}.")}
    assert {f"{VECTOR_INDEX}.{m}" for m in ("index", "exact", "hnsw", "ivf", "arrays")} <= library
    bad = imports_where(
        lambda m: m in library,
        # `from .. import native` names the package `actors` too (an empty __init__)
        lambda t: t not in PACKAGES and not f"{t}.".startswith(LEAF_MAY_IMPORT),
    )
    assert not bad, f"the vector index library imports beyond itself: {bad}"
    users = {m.split(".")[1] for m, _ in imports_where(lambda m: True, lambda t: t in library)}
    assert {"ranker", "vectors"} <= users


@pytest.mark.parametrize("path", list(source_files()), ids=lambda p: module_name(p))
def test_module_and_function_size(path: Path) -> None:
    name = module_name(path)
    if name in DATA_TABLES:
        return
    text = path.read_text(encoding="utf-8")
    lines = text.count("\n")
    assert lines <= MAX_MODULE_LINES, f"{name} has {lines} lines (limit {MAX_MODULE_LINES})"
    long = [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines, line {node.lineno})"
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert not long, f"{name}: functions over {MAX_FUNCTION_LINES} lines: {long}"


# `Any` only where a value is truly dynamic (a JSON payload, a pass-through argument).
MAX_BARE_ANY = 30


def bare_any_annotations(path: Path) -> list[str]:
    """Annotations that are exactly ``Any`` (``x: Any``, ``-> Any``) in one file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        annotations: list[ast.expr] = []
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            a = node.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
            annotations = [p.annotation for p in params if p is not None and p.annotation]
            if node.returns is not None:
                annotations.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            annotations = [node.annotation]
        found += [
            f"{module_name(path)}:{ann.lineno}"
            for ann in annotations
            if isinstance(ann, ast.Name) and ann.id == "Any"
        ]
    return found


def test_any_is_rare() -> None:
    found = [place for path in source_files() for place in bare_any_annotations(path)]
    assert len(found) <= MAX_BARE_ANY, f"{len(found)} bare Any annotations: {found}"


MAX_COMPLEXITY = 10
# The functions over `MAX_COMPLEXITY` when ruff's C901 was switched on (issue #41), each
# with its complexity then as a ceiling: they carry `noqa: C901` (actors/store/'s are
# exempted per file in pyproject.toml), none may grow, and no other may join them.
# Split one up and its line can go.
COMPLEX_FUNCTIONS: dict[tuple[str, str], int] = {
    ("actors/chaos/harness.py", "drive_load"): 12,
    ("actors/chaos/scenarios/coherence.py", "recall_other_process"): 14,
    ("actors/chaos/scenarios/malformed_cases.py", "bad_values"): 11,
    ("actors/chaos/scenarios/owners.py", "owner_cannot_start"): 11,
    ("actors/chaos/scenarios/postgres.py", "_outage"): 13,
    ("actors/chaos/scenarios/transports.py", "owner_killed_reattach"): 11,
    ("actors/code/anchors.py", "imports_file"): 11,
    ("actors/code/anchors.py", "near_all"): 13,
    ("actors/code/checkout.py", "resolve_path"): 13,
    ("actors/code/diff.py", "file_change_diff"): 13,
    ("actors/code/digest.py", "normal"): 11,
    ("actors/code/extract.py", "_collect"): 11,
    ("actors/code/service.py", "_states_in_place"): 11,
    ("actors/embedder/model.py", "resolve_spec"): 12,
    ("actors/hooks/digest.py", "read_transcript"): 13,
    ("actors/hooks/install.py", "claude_hooks"): 11,
    ("actors/kg/traversal.py", "find_all_paths"): 12,
    ("actors/memory/paths.py", "graph_paths"): 15,
    ("actors/memory/records.py", "check_record"): 15,
    ("actors/memory/transfer.py", "check"): 18,
    ("actors/net/attach.py", "find_owner"): 13,
    ("actors/net/attach.py", "attach"): 18,
    ("actors/net/attach.py", "relay_session"): 13,
    ("actors/net/http_asgi.py", "post"): 15,
    ("actors/net/http_session.py", "deliver"): 11,
    ("actors/net/relay.py", "answer_early"): 14,
    ("actors/net/relay.py", "replay"): 12,
    ("actors/ranker/dates.py", "_relative"): 12,
    ("actors/ranker/graph.py", "load"): 14,
    ("actors/ranker/graph.py", "_refresh"): 24,
    ("actors/ranker/sql_graph.py", "subgraph_links"): 12,
    ("actors/session.py", "dispatch"): 12,
    ("actors/stdio.py", "feed"): 12,
    ("actors/stdio.py", "run_writer"): 13,
    (
        "actors/store/sqlite/db.py",
        "unavailable",
    ): 12,  # the store's own errors (#41 item 4) mapped there too
    ("actors/store/tooling/runner.py", "run_store_command"): 11,
    ("actors/store/domain/stem.py", "_step1ab"): 11,
    ("protocol/jsonscan.py", "top_level"): 22,
    ("protocol/jsonscan.py", "last_members"): 12,
    ("protocol/jsonscan.py", "_value_start"): 12,
    ("supervisors/supervisor.py", "_on_exit"): 13,
    ("tests/test_property_tools.py", "valid"): 11,
    ("tests/test_soak.py", "step"): 20,
    ("tests/test_storage_boundary.py", "_crossings"): 12,
    ("tests/test_text_scans_linear.py", "old_candidates"): 11,
    ("tools/bench_protocol.py", "run_once"): 15,
    ("tools/build_kg_eval.py", "package"): 15,
    ("tools/build_kg_eval.py", "questions"): 14,
    ("tools/eval_stale.py", "oracle_file"): 11,
    ("tools/eval_stale.py", "edit"): 24,
    ("tools/fit_rerank.py", "main"): 13,
    ("tools/http_replay_rss.py", "_sessions_workload"): 11,
    ("tools/secret_corpus.py", "detect_secrets_cases"): 12,
}
COMPLEX_DIRS = ("actors", "protocol", "supervisors", "tests", "tools")


def complexity_over_limit() -> dict[tuple[str, str], int]:
    """(file, function) -> McCabe complexity of every function over `MAX_COMPLEXITY`,
    by ruff's C901, whatever ``noqa`` comments and per-file exemptions say."""
    args = [find_ruff_bin(), "check", "--isolated", "--ignore-noqa", "--select", "C901"]
    args += ["--config", f"lint.mccabe.max-complexity = {MAX_COMPLEXITY}"]
    args += ["--output-format", "json", "--exit-zero", *COMPLEX_DIRS]
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, check=True)
    found = {}
    for item in json.loads(proc.stdout):
        m = re.fullmatch(r"`(\w+)` is too complex \((\d+) > \d+\)", item["message"])
        assert m, item["message"]
        path = Path(item["filename"]).resolve().relative_to(ROOT).as_posix()
        found[(path, m[1])] = int(m[2])
    return found


def test_complex_functions_do_not_grow_and_no_new_one_appears() -> None:
    found = complexity_over_limit()
    new = {key: n for key, n in found.items() if key not in COMPLEX_FUNCTIONS}
    assert not new, f"functions over McCabe {MAX_COMPLEXITY} (split them up): {new}"
    grown = {
        key: f"{COMPLEX_FUNCTIONS[key]} -> {n}"
        for key, n in found.items()
        if n > COMPLEX_FUNCTIONS[key]
    }
    assert not grown, f"complex functions grew (split them up): {grown}"


def test_ruff_itself_checks_complexity() -> None:
    """``ruff check`` (the project's config) reports a new complex function too: C90 is
    selected at `MAX_COMPLEXITY`, and the per-file exemptions cover listed functions only."""
    lint = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]
    assert "C90" in lint["select"] or "C901" in lint["select"]
    assert lint["mccabe"]["max-complexity"] == MAX_COMPLEXITY
    exempt = {path for path, codes in lint["per-file-ignores"].items() if "C901" in codes}
    assert exempt <= {path for path, _ in COMPLEX_FUNCTIONS}, exempt


# Real-clock waits in tests/ (issue #41): a wait is on trio's virtual clock when it is in a
# function that takes the ``autojump_clock`` or ``mock_clock`` fixture (or inside one), or in
# a module-level helper that only such functions call; any other ``time.sleep``,
# ``trio.sleep`` or ``asyncio.sleep`` (but a ``sleep(0)`` checkpoint) waits on the real clock
# and makes the suite slower and flakier. Wait on an event, a process's output or the
# virtual clock instead. The ceiling only comes down.
MAX_REAL_SLEEPS = 10
VIRTUAL_CLOCKS = {"autojump_clock", "mock_clock"}
SLEEPS = {("time", "sleep"), ("trio", "sleep"), ("asyncio", "sleep")}


def _takes_a_clock(node: ast.AST) -> bool:
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return False
    a = node.args
    return bool({p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]} & VIRTUAL_CLOCKS)


def _virtual_helpers(module: ast.Module) -> set[str]:
    """Module-level functions called only from virtual-clock code (at least once), to a
    fixed point: their waits are on the test's virtual clock too."""
    helpers = {
        node.name
        for node in module.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not _takes_a_clock(node)
    }
    virtual: set[str] = set()
    while True:
        found = {name for name, where in _calls(module, helpers, virtual).items() if all(where)}
        if found == virtual:
            return virtual
        virtual = found


def _calls(module: ast.Module, helpers: set[str], virtual: set[str]) -> dict[str, list[bool]]:
    """For each of ``helpers`` named in ``module``: whether each use is in virtual-clock code
    (a function taking a clock, or one of ``virtual``, or inside one)."""
    calls: dict[str, list[bool]] = {}

    def visit(node: ast.AST, inside: bool) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            inside = inside or _takes_a_clock(node) or node.name in virtual
        if isinstance(node, ast.Name) and node.id in helpers:
            calls.setdefault(node.id, []).append(inside)
        for child in ast.iter_child_nodes(node):
            visit(child, inside)

    visit(module, False)
    return calls


def real_clock_sleeps(path: Path) -> list[str]:
    """``file:line`` of each real-clock sleep call in one test file."""
    found: list[str] = []
    module = ast.parse(path.read_text(encoding="utf-8"))
    helpers = _virtual_helpers(module)

    def visit(node: ast.AST, virtual: bool) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            virtual = virtual or _takes_a_clock(node) or node.name in helpers
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and (node.func.value.id, node.func.attr) in SLEEPS
            and not virtual
            and not (
                node.args and isinstance(node.args[0], ast.Constant) and not node.args[0].value
            )
        ):
            found.append(f"{path.name}:{node.lineno}")
        for child in ast.iter_child_nodes(node):
            visit(child, virtual)

    visit(module, False)
    return found


def test_the_sleep_counter_tells_real_from_virtual_clock_waits(tmp_path: Path) -> None:
    sample = tmp_path / "test_sample.py"
    sample.write_text(
        "import time, trio, asyncio\n"
        "async def test_real() -> None:\n"
        "    await trio.sleep(1)\n"
        "    await trio.sleep(0)\n"  # a checkpoint, no wait
        "    time.sleep(0.1)\n"
        "    await asyncio.sleep(0.1)\n"
        "async def test_virtual(autojump_clock: object) -> None:\n"
        "    async def inner() -> None:\n"
        "        await trio.sleep(300)\n"
        "    await trio.sleep(60)\n"
        "SCRIPT = 'import time; time.sleep(60)'\n"  # a child process's code, not a wait here
        "async def poll() -> None:\n"  # a helper only virtual-clock tests call
        "    await trio.sleep(0.01)\n"
        "async def test_polls(autojump_clock: object) -> None:\n"
        "    await poll()\n"
        "async def shared() -> None:\n"  # called from a real-clock test as well
        "    await trio.sleep(0.01)\n"
        "async def test_shares(autojump_clock: object) -> None:\n"
        "    await shared()\n"
        "async def test_shares_too() -> None:\n"
        "    await shared()\n"
        "async def unused() -> None:\n"  # called by nothing: counted
        "    time.sleep(1)\n"
    )
    assert real_clock_sleeps(sample) == [
        "test_sample.py:3",
        "test_sample.py:5",
        "test_sample.py:6",
        "test_sample.py:17",
        "test_sample.py:23",
    ]


def test_tests_wait_on_the_real_clock_in_few_places() -> None:
    tests = Path(__file__).resolve().parent
    found = [place for path in sorted(tests.glob("*.py")) for place in real_clock_sleeps(path)]
    assert len(found) <= MAX_REAL_SLEEPS, (
        f"{len(found)} real-clock sleeps in tests/ (at most {MAX_REAL_SLEEPS}): wait on an "
        f"event, the process's output or trio's virtual clock instead: {found}"
    )
