"""A non-editable install (what .ci/run and a user's ``pip install .`` do) ships every package."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_source_package_is_listed_in_pyproject() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    found = {
        "memtrio." + ".".join(init.parent.relative_to(ROOT).parts)
        for top in ("actors", "protocol", "supervisors")
        for init in (ROOT / top).rglob("__init__.py")
    }
    missing = sorted(found - listed)
    assert not missing, f"add to [tool.setuptools] packages in pyproject.toml: {missing}"


def test_the_wheel_builds_without_a_warning_and_ships_its_data(tmp_path: Path) -> None:
    """``pip install .`` builds with the newest setuptools: a deprecated ``project.license``
    table or a data folder missing from ``packages`` prints warnings there (and becomes
    an error at setuptools' announced dates). Built here with every warning an error."""
    import shutil
    import subprocess
    import sys
    import zipfile

    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for top in ("actors", "protocol", "supervisors"):
        shutil.copytree(
            ROOT / top, source / top, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )
    dist = tmp_path / "dist"
    build = (
        "import setuptools.build_meta as b, sys; "
        f"sys.stdout.write('WHEEL=' + b.build_wheel({str(dist)!r}) + chr(10))"
    )
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", build],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    wheel = dist / done.stdout.rpartition("WHEEL=")[2].strip()
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {
        "memtrio/actors/ui/static/index.html",
        "memtrio/actors/ui/static/app.js",
        "memtrio/actors/embedder/data/all-MiniLM-L6-v2-tokenizer.json",
        "memtrio/supervisors/cli.py",
    }
    assert shipped <= names, sorted(shipped - names)
