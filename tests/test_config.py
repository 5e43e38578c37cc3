"""Configuration layering: config.toml < MEMTRIO_* environment < flags."""

from __future__ import annotations

from pathlib import Path

import pytest
from memtrio.supervisors import config, faults


def write(home: Path, text: str) -> None:
    (home / "config.toml").write_text(text)


def test_defaults_without_a_file(home: Path) -> None:
    cfg = config.load(home, env={})
    assert cfg.server.request_limit == 16 * 1024 * 1024
    assert cfg.retrieval.seed_top_k == 20 and cfg.retrieval.damping == 0.5
    assert cfg.code.index_threads == "auto" and cfg.code.max_files == 20000
    assert cfg.store.durability == "normal"


def test_environment_overrides_file_and_flags_override_environment(home: Path) -> None:
    write(home, "[retrieval]\ndamping = 0.7\nseed_top_k = 5\n[embedding]\nbatch_size = 8\n")
    cfg = config.load(home, env={"MEMTRIO_RETRIEVAL_DAMPING": "0.6"})
    assert cfg.retrieval.damping == 0.6  # env beats file
    assert cfg.retrieval.seed_top_k == 5  # file beats default
    assert cfg.embedding.batch_size == 8
    cfg = config.load(
        home, env={"MEMTRIO_RETRIEVAL_DAMPING": "0.6"}, overrides={"retrieval": {"damping": 0.3}}
    )
    assert cfg.retrieval.damping == 0.3  # flag beats env


def test_short_aliases(home: Path) -> None:
    cfg = config.load(
        home,
        env={
            "MEMTRIO_EMBEDDINGS": "off",
            "MEMTRIO_CODE": "off",
            "MEMTRIO_DURABILITY": "sync",
            "MEMTRIO_TOOLS": "memory, code",
        },
    )
    assert cfg.embedding.enabled is False and cfg.code.enabled is False
    assert cfg.store.durability == "sync"
    assert cfg.tools.enabled == ["memory", "code"]


@pytest.mark.parametrize(
    ("toml", "env", "expected"),
    [
        ("[retrieval]\ndampng = 0.5\n", {}, "unknown key retrieval.dampng"),
        ("[retrival]\n", {}, "unknown section [retrival]"),
        ("[retrieval]\ndamping = 'high'\n", {}, "damping"),
        ("[retrieval]\ndamping = 1.5\n", {}, "retrieval.damping must be between 0 and 1"),
        ("not toml at all [", {}, "config.toml"),
        (
            "",
            {"MEMTRIO_EMBEDDINGS": "maybe"},
            "MEMTRIO_EMBEDDINGS=maybe (environment): embedding.enabled must be on/off",
        ),
        ("", {"MEMTRIO_STORE_READ_CONNECTIONS": "many"}, "MEMTRIO_STORE_READ_CONNECTIONS"),
        ("", {"MEMTRIO_TOOLS": "memory,bogus"}, "unknown group(s) bogus"),
    ],
)
def test_invalid_config_names_the_key(
    home: Path, toml: str, env: dict[str, str], expected: str
) -> None:
    write(home, toml)
    with pytest.raises(config.ConfigError) as info:
        config.load(home, env=env)
    assert expected in str(info.value)


def test_invalid_config_is_one_clear_line_from_the_cli(home: Path) -> None:
    import subprocess
    import sys

    write(home, "[server]\nrequest_limit = 'big'\n")
    proc = subprocess.run(
        [sys.executable, "-m", "memtrio.supervisors.cli", "mcp", "--home", str(home)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "configuration error" in proc.stderr and "request_limit" in proc.stderr


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("store.commit", "expected point=action"),
        ("store.commit=explode", "action must be"),
        ("store.commit=raise@x", "@N needs a whole number"),
        ("store.commit=delay:soon", "delay needs seconds"),
    ],
)
def test_bad_fault_specs_are_refused(spec: str, message: str) -> None:
    with pytest.raises(faults.FaultSpecError, match=message):
        faults.parse(spec)


async def test_fault_selectors_fire_on_the_chosen_hits() -> None:
    faults.configure("a=raise@2,b=raise@2+")
    try:
        fired = {"a": [], "b": []}
        for _ in range(4):
            for point in ("a", "b"):
                try:
                    await faults.hit(point)
                    fired[point].append(False)
                except faults.InjectedFault:
                    fired[point].append(True)
        assert fired == {"a": [False, True, False, False], "b": [False, True, True, True]}
        assert faults.ACTIVE
    finally:
        faults.configure(None)
    assert not faults.ACTIVE
