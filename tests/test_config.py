"""Configuration layering: config.toml < MEMTRIO_* environment < flags."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import zygote
from memtrio.supervisors import config, faults


def write(home: Path, text: str) -> None:
    (home / "config.toml").write_text(text)


def test_defaults_without_a_file(home: Path) -> None:
    cfg = config.load(home, env={})
    assert cfg.server.request_limit == 16 * 1024 * 1024
    assert cfg.retrieval.seed_top_k == 20 and cfg.retrieval.damping == 0.5
    assert cfg.code.index_threads == "auto" and cfg.code.max_files == 20000
    assert cfg.store.durability == "async" and cfg.store.wal_flush_ms == 250
    assert cfg.store.url == "sqlite"


def test_the_store_url_comes_from_the_file_the_environment_or_the_flag(home: Path) -> None:
    write(home, '[store]\nurl = "postgresql://team@db.example/memtrio"\n')
    assert config.load(home, env={}).store.url == "postgresql://team@db.example/memtrio"
    cfg = config.load(home, env={"MEMTRIO_STORE": "sqlite"})
    assert cfg.store.url == "sqlite"
    with pytest.raises(config.ConfigError) as info:
        config.load(
            home,
            env={},
            overrides={"store": {"url": "mysql://x"}},
            flags={("store", "url"): "--store"},
        )
    # Named, never quoted: a connection string may hold a password.
    assert "the command-line flag --store: " in str(info.value)
    assert 'must be "sqlite" or a postgresql:// URL' in str(info.value)
    assert "not a mysql:// URL (not shown" in str(info.value) and "//x" not in str(info.value)
    # A "://" inside a key=value string's password is not a scheme: nothing of it is named.
    conninfo = "host=db.internal password='Zq90://' dbname=memtrio"
    for env, overrides in (({"MEMTRIO_STORE": conninfo}, None), ({}, {"store": {"url": conninfo}})):
        with pytest.raises(config.ConfigError) as info:
            config.load(home, env=env, overrides=overrides)
        assert "not a key=value connection string (not shown" in str(info.value)
        assert "Zq9" not in str(info.value)


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


def test_durability_from_the_reference_variable_and_memtrio_s_wins(home: Path) -> None:
    assert config.load(home, env={}).store.durability == "async"
    cfg = config.load(home, env={"MCP_MEMORY_DURABILITY": "sync"})
    assert cfg.store.durability == "sync"
    both = {"MCP_MEMORY_DURABILITY": "sync", "MEMTRIO_DURABILITY": "async"}
    assert config.load(home, env=both).store.durability == "async"
    with pytest.raises(config.ConfigError, match=r"MCP_MEMORY_DURABILITY=fast \(environment\)"):
        config.load(home, env={"MCP_MEMORY_DURABILITY": "fast"})


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


# -- defect 12: every error names the key, the value and where it came from ------------

# One out-of-range value per checked key (NUL characters cannot be in the environment).
OUT_OF_RANGE: dict[tuple[str, str], object] = {
    ("server", "request_limit"): 100,
    ("server", "shutdown_grace"): -1.0,
    ("server", "call_timeout"): 0.0,
    ("log", "path"): "a\0b",
    ("store", "url"): "mysql://db/x",
    ("store", "read_connections"): 0,
    ("store", "busy_timeout_ms"): -1,
    ("store", "cache_size_mb"): 0,
    ("store", "mmap_size_mb"): -1,
    ("store", "wal_flush_ms"): 5,
    ("store", "maintenance_interval"): 0.5,
    ("embedding", "model"): "m\0",
    ("embedding", "batch_size"): 0,
    ("embedding", "workers"): 0,
    ("embedding", "intra_op_threads"): -1,
    ("embedding", "max_tokens"): 4,
    ("embedding", "chunk_tokens"): 4,
    ("embedding", "chunk_overlap"): -1,
    ("embedding", "max_chunks"): 300,
    ("embedding", "timeout"): 0.0,
    ("retrieval", "seed_top_k"): 0,
    ("retrieval", "seed_temperature"): 0.0,
    ("retrieval", "memory_seed_weight"): 1.5,
    ("retrieval", "entity_anchor_weight"): -1.0,
    ("retrieval", "damping"): 1.0,
    ("retrieval", "lexical_share"): 2.0,
    ("retrieval", "mmr_lambda"): -0.1,
    ("retrieval", "neighbour_weight"): -0.5,
    ("retrieval", "neighbour_window"): 11,
    ("retrieval", "term_anchor_weight"): -1.0,
    ("retrieval", "term_max_share"): 1.5,
    ("retrieval", "date_weight"): -0.5,
    ("retrieval", "position_penalty"): -1,
    ("retrieval", "list_penalty"): 101,
    ("retrieval", "list_window"): 0,
    ("retrieval", "stale_penalty"): 1.0,
    ("code", "index_threads"): 0,
    ("code", "max_files"): 0,
    ("vectors", "dims"): 4097,
    ("vectors", "auto_threshold"): -1,
    ("vectors", "exact_below"): -1,
    ("vectors", "connectivity"): 1,
    ("vectors", "expansion_add"): 0,
    ("vectors", "expansion_search"): 10_001,
    ("vectors", "ivf_nlist"): 0,
    ("vectors", "ivf_nprobe"): 0,
    ("code", "file_timeout"): 0.0,
    ("serve", "bind"): "127.0.0.1:99999",
    ("serve", "max_connections"): 0,
    ("serve", "idle_timeout"): 0.0,
    ("serve", "unauth_limit"): 0,
    ("serve", "auth_timeout"): 0.0,
    ("serve", "idle_exit"): -1.0,
    ("serve", "auth_token_file"): "a\0b",
    ("serve", "tls_cert"): "a\0b",
    ("serve", "tls_key"): "a\0b",
    ("store", "file"): "a\0b",
    ("hooks", "context_tokens"): 0,
    ("hooks", "prompt_tokens"): 1_000_001,
    ("hooks", "prompt_threshold"): 1.5,
    ("hooks", "timeout"): 0.0,
    ("http", "replay_events"): 0,
    ("http", "replay_bytes"): 1024,
    ("http", "replay_total_bytes"): 0,
}


def all_keys() -> list[tuple[str, str, object]]:
    """Every (section, key, type) of the configuration."""
    import msgspec

    out = []
    for section, struct in config._sections().items():
        out += [(section, f.name, f.type) for f in msgspec.structs.fields(struct)]
    return out


def load_error(home: Path, **options: Any) -> str:
    """The error `config.load` reports: raised, or, in a `config.LENIENT` section (``[code]``:
    the server then starts without that feature), noted in `Config.invalid`."""
    try:
        cfg = config.load(home, **options)
    except config.ConfigError as exc:
        return str(exc)
    assert len(cfg.invalid) == 1 and set(cfg.invalid) <= config.LENIENT, cfg.invalid
    return f"configuration error: {next(iter(cfg.invalid.values()))}"


def bad_type(hint: object) -> tuple[str | None, object]:
    """A value of the wrong type for ``hint``: as environment text (None if any text
    fits, e.g. a string key), and as a TOML value."""
    if hint is bool:
        return "maybe", "yes"
    if hint is int:
        return "seven", 1.5
    if hint is float:
        return "high", "0.5"
    if hint is str:
        return None, 5
    if getattr(hint, "__origin__", None) is list:
        return None, "memory"
    return "bogus", 1.5  # a Literal, or int | "auto"


def toml_value(value: object) -> str:
    import json

    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def test_defect12_every_checked_key_has_an_out_of_range_case() -> None:
    assert set(OUT_OF_RANGE) == set(config._CHECKS)


@pytest.mark.parametrize(("section", "key", "hint"), all_keys())
def test_defect12_a_bad_type_names_the_key_and_its_source_in_every_source(
    home: Path, section: str, key: str, hint: object
) -> None:
    env_text, toml = bad_type(hint)
    write(home, f"# settings\n[{section}]\n{key} = {toml_value(toml)}\n")
    message = load_error(home, env={})
    assert f"{key} = {toml_value(toml)} in {home / 'config.toml'} [{section}] line 3" in message
    assert f"{section}.{key} must be" in message and "\n" not in message
    if env_text is not None:
        write(home, "")
        var = f"MEMTRIO_{section.upper()}_{key.upper()}"
        message = load_error(home, env={var: env_text})
        assert f"{var}={env_text} (environment): {section}.{key} must be" in message
        message = load_error(home, env={}, overrides={section: {key: env_text}}, flags={})
        flag = f"--{key.replace('_', '-')}"
        assert f"the command-line flag {flag} {env_text}: {section}.{key}" in message


@pytest.mark.parametrize(("section", "key"), sorted(OUT_OF_RANGE))
def test_defect12_an_out_of_range_value_names_its_source(
    home: Path, section: str, key: str
) -> None:
    value = OUT_OF_RANGE[section, key]
    write(home, f"[{section}]\n{key} = {toml_value(value)}\n")
    message = load_error(home, env={})
    assert f"in {home / 'config.toml'} [{section}] line 2: {section}.{key} " in message
    if isinstance(value, str):
        return  # a NUL character cannot be in an environment variable
    write(home, "")
    var = f"MEMTRIO_{section.upper()}_{key.upper()}"
    message = load_error(home, env={var: str(value)})
    assert message.startswith(f"configuration error: {var}={value} (environment): {section}.{key} ")


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        (
            "[retrieval]\nseed_top_k = 5\n\n[retrival]\nx = 1\n",
            "config.toml line 4: unknown section [retrival]",
        ),
        ("[store]\n\ndurabilty = 'sync'\n", "config.toml line 3: unknown key store.durabilty"),
        (
            "[code]\nmax_files = 10\nenabled = \n",
            "invalid TOML: Invalid value (at line 3, column 11)",
        ),
        ("retrieval = 0.5\n", "config.toml line 1: retrieval must be a [retrieval] table"),
        ("damping = 0.5\n", "unknown top-level key 'damping': settings go in a [section]"),
        ("[retrieval]\ndamping = nan\n", "retrieval.damping must be a finite number, not nan"),
        ("[tools]\nenabled = ['memory', 'bogus']\n", "tools.enabled: unknown group(s) bogus"),
    ],
)
def test_defect12_config_toml_errors_give_the_file_and_line(
    home: Path, toml: str, expected: str
) -> None:
    write(home, toml)
    with pytest.raises(config.ConfigError) as info:
        config.load(home, env={})
    assert expected in str(info.value)
    assert str(home / "config.toml") in str(info.value)


def test_defect12_a_config_toml_that_is_not_utf8_gives_line_and_column(home: Path) -> None:
    (home / "config.toml").write_bytes(b"[log]\nlevel = 'caf\xe9'\n")
    with pytest.raises(config.ConfigError) as info:
        config.load(home, env={})
    assert str(info.value) == (
        f"configuration error: {home / 'config.toml'} line 2, column 13: not UTF-8 text "
        "(byte 0xe9); save the file as UTF-8"
    )


def test_defect12_a_config_toml_that_is_a_directory_is_an_error(home: Path) -> None:
    (home / "config.toml").mkdir()
    with pytest.raises(config.ConfigError, match="is a directory, not a file"):
        config.load(home, env={})


def test_defect12_unknown_environment_keys_of_a_section_are_errors(home: Path) -> None:
    with pytest.raises(config.ConfigError) as info:
        config.load(home, env={"MEMTRIO_RETRIEVAL_DAMPNG": "0.5"})
    assert "MEMTRIO_RETRIEVAL_DAMPNG=0.5 (environment): unknown key retrieval.dampng" in str(
        info.value
    )
    # Variables outside the sections (MEMTRIO_HOME, MEMTRIO_FAULTS, ...) are not settings.
    config.load(home, env={"MEMTRIO_HOME": "/x", "MEMTRIO_SOMETHING_ELSE": "1"})


def test_defect12_aliases_and_flags_name_themselves(home: Path) -> None:
    with pytest.raises(
        config.ConfigError,
        match=r"MEMTRIO_DURABILITY=fast \(environment\): store\.durability must be one of",
    ):
        config.load(home, env={"MEMTRIO_DURABILITY": "fast"})
    with pytest.raises(config.ConfigError) as info:
        config.load(
            home,
            env={},
            overrides={"tools": {"enabled": ["memory", "nope"]}},
            flags={("tools", "enabled"): "--tools"},
        )
    assert "the command-line flag --tools memory,nope: tools.enabled: unknown group(s) nope" in str(
        info.value
    )


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("file", "damping = 7 in {home}/config.toml [retrieval] line 2"),
        ("env", "MEMTRIO_RETRIEVAL_DAMPING=7 (environment)"),
        ("flag", "the command-line flag --tools memory,bogus"),
    ],
)
def test_defect12_the_cli_prints_one_line_naming_the_source(
    home: Path, source: str, expected: str
) -> None:
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMTRIO_")}
    args = ["mcp", "--home", str(home)]
    if source == "file":
        write(home, "[retrieval]\ndamping = 7\n")
    elif source == "env":
        env["MEMTRIO_RETRIEVAL_DAMPING"] = "7"
    else:
        args += ["--tools", "memory,bogus"]
    proc = subprocess.run(
        zygote.command(args),
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("memtrio: configuration error: ")
    assert expected.format(home=home) in proc.stderr


def test_vector_flags_set_the_vectors_section_and_are_range_checked(home: Path) -> None:
    from memtrio.supervisors.cli import build_parser
    from memtrio.supervisors.commands import load_config

    parser = build_parser()
    args = parser.parse_args(
        ["mcp", "--home", str(home), "--vectors", "--embedding-dims", "768"]
        + ["--vec-index", "hnsw", "--vec-quantization", "i8", "--ivf-nprobe", "4"]
    )
    cfg, _ = load_config(args)
    assert (cfg.vectors.enabled, cfg.vectors.dims, cfg.vectors.backend) == (True, 768, "hnsw")
    assert (cfg.vectors.quantization, cfg.vectors.ivf_nprobe) == ("i8", 4)
    assert (
        load_config(parser.parse_args(["serve", "--home", str(home)]))[0].vectors.enabled is False
    )
    bad = parser.parse_args(["serve", "--home", str(home), "--embedding-dims", "5000"])
    with pytest.raises(
        config.ConfigError, match="--embedding-dims 5000: vectors.dims must be 1-4096"
    ):
        load_config(bad)


def test_store_flags_set_the_store_section_and_are_range_checked(home: Path) -> None:
    from memtrio.supervisors.cli import build_parser
    from memtrio.supervisors.commands import load_config

    parser = build_parser()
    args = parser.parse_args(
        ["serve", "--home", str(home), "--cache-size-mb", "64", "--mmap-size", "256"]
        + ["--busy-timeout-ms", "5000", "--wal-flush-ms", "1000"]
    )
    store = load_config(args)[0].store
    assert (store.cache_size_mb, store.mmap_size_mb) == (64, 256)
    assert (store.busy_timeout_ms, store.wal_flush_ms) == (5000, 1000)
    bad = parser.parse_args(["mcp", "--home", str(home), "--wal-flush-ms", "1"])
    with pytest.raises(
        config.ConfigError, match="--wal-flush-ms 1: store.wal_flush_ms must be 10-3600000"
    ):
        load_config(bad)
