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
