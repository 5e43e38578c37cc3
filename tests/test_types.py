"""The type checker's verdict on actors/, protocol/ and supervisors/: zero errors.

mypy runs in a subprocess with pyproject.toml's `[tool.mypy]` (strict on the storage
interfaces and their two implementations). The package is installed as `memtrio` through
a package-dir mapping (actors/ -> memtrio.actors) that only an import hook resolves, so
mypy checks a tree of symlinks, `<tmp>/memtrio/{actors,protocol,supervisors}`, as
`-p memtrio.actors -p memtrio.protocol -p memtrio.supervisors`; the relative imports
between the three packages then resolve as they do at run time. The cache lives beside
that tree in the system's temporary directory, so a second run takes seconds.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import subprocess
import sys
import tempfile
import tokenize
import tomllib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("actors", "protocol", "supervisors")

# Modules whose errors are not counted: none, every module checks clean. A module added
# here needs a reason beside it; paths are relative to the repository root.
EXCLUDED: frozenset[str] = frozenset()

# `path:line: error: message  [code]` (or `path:line:col:`), path under the symlink tree.
_ERROR = re.compile(r"^memtrio/(?P<path>[^:]+\.py):\d+(?::\d+)?: error: ")
# A type: ignore names its error code(s) and then says why, in a comment of its own.
_IGNORE = re.compile(r"type:\s*ignore(?P<rest>.*)$")
_IGNORE_OK = re.compile(r"^\[[a-z0-9-]+(?:\s*,\s*[a-z0-9-]+)*\]\s*#\s*\S")


def _symlink_tree() -> Path:
    """The `memtrio` tree mypy checks, one per checkout, reused between runs for its cache."""
    digest = hashlib.sha256(str(ROOT).encode()).hexdigest()[:12]
    base = Path(tempfile.gettempdir()) / f"memtrio-mypy-{os.getuid()}-{digest}"
    package = base / "tree" / "memtrio"
    package.mkdir(parents=True, exist_ok=True)
    for name in PACKAGES:
        link = package / name
        if not (link.is_symlink() and link.resolve() == (ROOT / name).resolve()):
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to(ROOT / name, target_is_directory=True)
    return base


def _run_mypy() -> tuple[int, str]:
    base = _symlink_tree()
    tree = base / "tree"
    args = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")]
    args += ["--cache-dir", str(base / "cache"), "--no-error-summary", "--no-pretty"]
    for name in PACKAGES:
        args += ["-p", f"memtrio.{name}"]
    env = {**os.environ, "MYPYPATH": str(tree)}
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(
        args, cwd=tree, env=env, capture_output=True, text=True, timeout=240, check=False
    )
    return proc.returncode, proc.stdout + proc.stderr


def test_mypy_finds_no_errors_in_actors_protocol_supervisors() -> None:
    code, output = _run_mypy()
    counted: list[str] = []
    excluded: Counter[str] = Counter()
    crashed: list[str] = []
    for line in output.splitlines():
        m = _ERROR.match(line)
        if m is None:
            if line.strip() and ": note: " not in line:
                crashed.append(line)
            continue
        if m["path"] in EXCLUDED:
            excluded[m["path"]] += 1
        else:
            counted.append(line)
    summary = "\n".join(f"  {n:3d}  {path}" for path, n in sorted(excluded.items()))
    assert not crashed, "mypy did not run cleanly:\n" + "\n".join(crashed)
    assert not counted, (
        f"mypy reports {len(counted)} error(s) (exit {code}); fix the types, or name the "
        "error code and say why in a `# type: ignore[code]  # why`:\n"
        + "\n".join(counted)
        + f"\n(still excluded while issue #30's conversion lands:\n{summary})"
    )


def _ignores(path: Path) -> list[tuple[int, str]]:
    """Every `type: ignore` comment in `path`, with its line, from the file's tokens."""
    found: list[tuple[int, str]] = []
    source = path.read_text(encoding="utf-8")
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            m = _IGNORE.search(tok.string)
            if m is not None:
                found.append((tok.start[0], m["rest"].strip()))
    return found


def test_every_type_ignore_names_its_code_and_says_why() -> None:
    bad: list[str] = []
    for name in PACKAGES:
        for path in sorted((ROOT / name).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel in EXCLUDED:
                continue
            for line, rest in _ignores(path):
                if not _IGNORE_OK.match(rest):
                    bad.append(f"{rel}:{line}: type: ignore{rest}")
    assert not bad, "write each as `# type: ignore[error-code]  # why it is needed`:\n" + "\n".join(
        bad
    )


def test_every_module_named_in_the_mypy_overrides_exists() -> None:
    """A renamed storage module would drop out of strict mode without a word (mypy's
    warn_unused_configs does not work with its cache): each override names a module here."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    missing: list[str] = []
    for override in config["tool"]["mypy"]["overrides"]:
        names = override["module"]
        for name in [names] if isinstance(names, str) else names:
            if not name.startswith("memtrio."):
                continue  # a third-party package
            parts = name.removeprefix("memtrio.").removesuffix(".*").split(".")
            base = ROOT.joinpath(*parts)
            if not (base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()):
                missing.append(name)
    assert not missing, f"[tool.mypy] overrides name modules that do not exist: {missing}"


# A write of each concept that both reads and writes, called on a read transaction.
_WRITES_IN_A_READ = {
    "memories": "tx.memories.insert('x', 'note', 0.5, 1.0, [])",
    "memories ": "tx.memories.delete(1)",
    "scopes": "tx.scopes.ensure('global')",
    "vectors": "tx.vectors.drop('memory', 1)",
    "embeddings": "tx.embeddings.delete_embedding(1)",
    "fulltext": "tx.fulltext.optimize_indexes()",
    "recall_log": "tx.recall_log.count_access(1, 1.0)",
    "anchors": "tx.anchors.set(1, [])",
}


def test_the_type_checker_refuses_a_write_in_a_read_transaction() -> None:
    """`Store.read` hands its op a `ReadTx`: every write is a type error there (issue #41),
    as it is an error at run time (``query_only``, ``READ ONLY``); on a `StoreTx` it is not."""
    base = _symlink_tree()
    probe = base / "tree" / "read_probe.py"
    calls = list(_WRITES_IN_A_READ.values())
    probe.write_text(
        "from memtrio.actors.store.interfaces import ReadTx, StoreTx\n\n\n"
        "def read(tx: ReadTx) -> None:\n"
        + "".join(f"    {c}\n" for c in calls)
        + "\n\ndef write(tx: StoreTx) -> None:\n"
        + "".join(f"    {c}\n" for c in calls),
        encoding="utf-8",
    )
    args = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")]
    args += ["--cache-dir", str(base / "cache"), "--no-error-summary", "--no-pretty"]
    env = {**os.environ, "MYPYPATH": str(base / "tree")}
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(
        [*args, str(probe)], cwd=base / "tree", env=env, capture_output=True, text=True,
        timeout=240, check=False,
    )  # fmt: skip
    errors = [line for line in proc.stdout.splitlines() if ": error: " in line]
    refused = {int(line.split(":")[1]) for line in errors if "has no attribute" in line}
    first = 5  # the line of the first call in `read`
    assert refused == set(range(first, first + len(calls))), proc.stdout + proc.stderr
    assert len(errors) == len(calls), proc.stdout + proc.stderr
