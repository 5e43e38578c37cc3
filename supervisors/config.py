"""Configuration: ``$MEMTRIO_HOME/config.toml``, overridden by ``MEMTRIO_*``
environment variables, overridden by command-line flags.

Every key of every section can be set from the environment as
``MEMTRIO_<SECTION>_<KEY>`` (for example ``MEMTRIO_RETRIEVAL_DAMPING=0.6``);
a few short aliases exist too (`ALIASES`). Invalid configuration raises
`ConfigError` naming the key and where it came from.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

import msgspec


class ConfigError(ValueError):
    """Invalid configuration; the message names the key and its source."""


class ServerConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    request_limit: int = 16 * 1024 * 1024  # bytes per JSON-RPC line
    shutdown_grace: float = 5.0  # seconds in-flight calls get to finish at exit
    call_timeout: float = 300.0  # seconds before a tool call is abandoned with an error


class LogConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    level: Literal["debug", "info", "warning", "error", "off"] = "info"
    path: str = ""  # default: $MEMTRIO_HOME/logs/memtrio.log
    stderr_level: Literal["debug", "info", "warning", "error", "off"] = "warning"


class StoreConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    durability: Literal["normal", "sync"] = "normal"
    read_connections: int = 4
    busy_timeout_ms: int = 30000


class EmbeddingConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    enabled: bool = True
    model: str = (
        ""  # a directory with model.onnx + tokenizer.json; "" = bundled all-MiniLM-L6-v2 int8
    )
    backend: Literal["auto", "cpu", "cuda"] = "auto"
    batch_size: int = 32
    workers: int = 1
    intra_op_threads: int = 0  # 0 = onnxruntime's default (all cores)
    max_tokens: int = 256
    chunk_tokens: int = 128  # window of a stored text (at most max_tokens); longer ones get several
    chunk_overlap: int = 32  # tokens shared by neighbouring windows of a long text
    max_chunks: int = 32  # windows per stored text; the rest of a longer one is not embedded
    timeout: float = 60.0  # seconds an embedding request may take before it fails


class RetrievalConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    seed_top_k: int = 20
    seed_temperature: float = 0.05
    memory_seed_weight: float = 0.5
    entity_anchor_weight: float = 0.2
    damping: float = 0.5
    graph: bool = True  # Personalized PageRank over the memory graph; false = rank the seeds only
    lexical_seeds: bool = True  # FTS5 matches seed the semantic ranking too
    lexical_share: float = 0.65  # of the memory seed mass given to FTS5 matches (rest: cosine)
    mmr_lambda: float = 0.9  # maximal marginal relevance: 1 = off, lower = more diverse results


class CodeConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    enabled: bool = True
    index_threads: int | Literal["auto"] = "auto"
    max_files: int = 20000
    file_timeout: float = 10.0  # seconds one file may take in a worker before it is abandoned


class ToolsConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    enabled: list[str] = msgspec.field(
        default_factory=lambda: ["memory", "graph-read", "graph-write", "vectors", "code"]
    )


class Config(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    server: ServerConfig = msgspec.field(default_factory=ServerConfig)
    log: LogConfig = msgspec.field(default_factory=LogConfig)
    store: StoreConfig = msgspec.field(default_factory=StoreConfig)
    embedding: EmbeddingConfig = msgspec.field(default_factory=EmbeddingConfig)
    retrieval: RetrievalConfig = msgspec.field(default_factory=RetrievalConfig)
    code: CodeConfig = msgspec.field(default_factory=CodeConfig)
    tools: ToolsConfig = msgspec.field(default_factory=ToolsConfig)


# Short environment names: variable -> (section, key, value mapper).
ALIASES: dict[str, tuple[str, str]] = {
    "MEMTRIO_DURABILITY": ("store", "durability"),
    "MEMTRIO_EMBEDDINGS": ("embedding", "enabled"),
    "MEMTRIO_CODE": ("code", "enabled"),
    "MEMTRIO_TOOLS": ("tools", "enabled"),
    "MEMTRIO_LOG_LEVEL": ("log", "level"),
    "MEMTRIO_REQUEST_LIMIT": ("server", "request_limit"),
}

_ONOFF = {
    "on": True,
    "off": False,
    "true": True,
    "false": False,
    "1": True,
    "0": False,
    "yes": True,
    "no": False,
}


def default_home() -> Path:
    home = os.environ.get("MEMTRIO_HOME")
    return Path(home).expanduser() if home else Path.home() / ".memtrio"


def _sections() -> dict[str, type[msgspec.Struct]]:
    defaults = Config()
    return {name: type(getattr(defaults, name)) for name in Config.__struct_fields__}


def _coerce(section: str, key: str, raw: str, source: str) -> Any:
    struct = _sections()[section]
    hint = {f.name: f.type for f in msgspec.structs.fields(struct)}[key]
    text = raw.strip()
    value: Any = text
    origin = getattr(hint, "__origin__", None)
    if hint is bool:
        if text.lower() not in _ONOFF:
            raise ConfigError(
                f"{source}: {section}.{key} must be on/off or true/false, not {raw!r}"
            )
        return _ONOFF[text.lower()]
    if origin is list:
        value = [part.strip() for part in text.split(",") if part.strip()]
    try:
        return msgspec.convert(value, hint, strict=False)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"{source}: {section}.{key}: {exc}") from None


def load(
    home: Path | None = None,
    env: dict[str, str] | None = None,
    overrides: dict[str, dict[str, Any]] | None = None,
) -> Config:
    """Read config.toml, then the environment, then ``overrides`` (from flags)."""
    env = dict(os.environ) if env is None else env
    home = home or default_home()
    data: dict[str, dict[str, Any]] = {}
    path = home / "config.toml"
    if path.exists():
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except (tomllib.TOMLDecodeError, OSError) as exc:
            raise ConfigError(f"{path}: {exc}") from None
        sections = _sections()
        for section, values in data.items():
            if section not in sections:
                raise ConfigError(
                    f"{path}: unknown section [{section}] (known: {', '.join(sections)})"
                )
            if not isinstance(values, dict):
                raise ConfigError(f"{path}: [{section}] must be a table")
            known = sections[section].__struct_fields__
            for key in values:
                if key not in known:
                    raise ConfigError(
                        f"{path}: unknown key {section}.{key} (known: {', '.join(known)})"
                    )
    merged: dict[str, dict[str, Any]] = {k: dict(v) for k, v in data.items()}

    def put(section: str, key: str, value: Any) -> None:
        merged.setdefault(section, {})[key] = value

    sections = _sections()
    for section, struct in sections.items():
        for key in struct.__struct_fields__:
            var = f"MEMTRIO_{section.upper()}_{key.upper()}"
            if var in env and env[var] != "":
                put(section, key, _coerce(section, key, env[var], var))
    for var, (section, key) in ALIASES.items():
        if var in env and env[var] != "":
            put(section, key, _coerce(section, key, env[var], var))
    for section, values in (overrides or {}).items():
        for key, value in values.items():
            if value is not None:
                if isinstance(value, str):
                    value = _coerce(section, key, value, f"--{key.replace('_', '-')}")
                put(section, key, value)
    try:
        config = msgspec.convert(merged, Config, strict=False)
    except msgspec.ValidationError as exc:
        raise ConfigError(
            f"invalid configuration: {exc} (from {path} or MEMTRIO_* variables)"
        ) from None
    validate(config)
    return config


def validate(config: Config) -> None:
    from ..protocol.tools import GROUPS

    checks = [
        (config.server.request_limit >= 1024, "server.request_limit must be at least 1024 bytes"),
        (config.server.shutdown_grace >= 0, "server.shutdown_grace must be >= 0"),
        (config.store.read_connections >= 1, "store.read_connections must be >= 1"),
        (config.embedding.batch_size >= 1, "embedding.batch_size must be >= 1"),
        (config.embedding.workers >= 1, "embedding.workers must be >= 1"),
        (config.embedding.max_tokens >= 8, "embedding.max_tokens must be >= 8"),
        (1 <= config.embedding.max_chunks <= 256, "embedding.max_chunks must be 1-256"),
        (config.embedding.chunk_tokens >= 8, "embedding.chunk_tokens must be >= 8"),
        (config.embedding.chunk_overlap >= 0, "embedding.chunk_overlap must be >= 0"),
        (config.retrieval.seed_top_k >= 1, "retrieval.seed_top_k must be >= 1"),
        (config.retrieval.seed_temperature > 0, "retrieval.seed_temperature must be > 0"),
        (0 < config.retrieval.damping < 1, "retrieval.damping must be between 0 and 1"),
        (
            0 <= config.retrieval.lexical_share <= 1,
            "retrieval.lexical_share must be between 0 and 1",
        ),
        (
            0 <= config.retrieval.mmr_lambda <= 1,
            "retrieval.mmr_lambda must be between 0 and 1 (1 turns diversification off)",
        ),
        (config.code.max_files >= 1, "code.max_files must be >= 1"),
        (
            config.code.index_threads == "auto" or config.code.index_threads >= 1,
            'code.index_threads must be "auto" or >= 1',
        ),
    ]
    for ok, message in checks:
        if not ok:
            raise ConfigError(message)
    unknown = [g for g in config.tools.enabled if g not in GROUPS]
    if unknown:
        raise ConfigError(
            f"tools.enabled: unknown group(s) {', '.join(unknown)} (known: {', '.join(GROUPS[1:])})"
        )


def log_path(config: Config, home: Path) -> Path:
    return Path(config.log.path).expanduser() if config.log.path else home / "logs" / "memtrio.log"
