"""Configuration: ``$MEMTRIO_HOME/config.toml``, overridden by ``MEMTRIO_*``
environment variables, overridden by command-line flags.

Every key of every section can be set from the environment as
``MEMTRIO_<SECTION>_<KEY>`` (for example ``MEMTRIO_RETRIEVAL_DAMPING=0.6``);
a few short aliases exist too (`ALIASES`). Invalid configuration raises
`ConfigError` (exit code 2) naming the key, the value and where it came from
(but in `LENIENT` sections, ``[code]``, whose feature then stays off with a warning):
``MEMTRIO_RETRIEVAL_DAMPING=7 (environment)``, ``damping = 7 in
/path/config.toml [retrieval] line 2`` or ``the command-line flag --tools
memory,bogus``. Each key is checked for its type and its range (`_CHECKS`);
unknown sections and keys, in config.toml or as ``MEMTRIO_<SECTION>_<KEY>``
variables, are errors too (any other unknown ``MEMTRIO_*`` name is warned about:
``supervisors.environment``).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import msgspec

from ..protocol.tools import GROUPS
from . import config_hooks, trust
from .config_file import ConfigError as ConfigError  # raised here, defined with the file reader
from .config_file import at as _at
from .config_file import line_of as _line_of
from .config_file import read_toml as _read_toml
from .config_show import assigned as _assigned
from .config_show import closest as _closest
from .config_show import show as _show
from .config_show import wanted as _wanted


class ServerConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    request_limit: int = 16 * 1024 * 1024  # bytes per JSON-RPC line
    shutdown_grace: float = 5.0  # seconds in-flight calls get to finish at exit
    call_timeout: float = 300.0  # seconds before a tool call is abandoned with an error
    # Tool-result content shape: auto (by clientInfo.name, protocol.content), markdown, json.
    content: Literal["auto", "markdown", "json"] = "auto"
    # List each tool's outputSchema in tools/list (2025-06-18+): off by default, since they
    # would double its size; results carry structuredContent either way.
    output_schema: bool = False


class LogConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    level: Literal["debug", "info", "warning", "error", "off"] = "info"
    path: str = ""  # default: $MEMTRIO_HOME/logs/memtrio.log
    stderr_level: Literal["debug", "info", "warning", "error", "off"] = "warning"


class StoreConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Options of the memory store (docs/memory.md, "Storage and concurrency"); all but
    ``url`` are SQLite's."""

    url: str = "sqlite"  # sqlite (the file in the home) or postgresql://user@host/db
    file: str = ""  # the SQLite file (--memory-file, -f); "" = memtrio.sqlite in the home
    # async: synchronous=NORMAL and a PASSIVE checkpoint every wal_flush_ms; sync:
    # synchronous=FULL (an fsync per commit); "normal" is async's earlier name.
    durability: Literal["async", "sync", "normal"] = "async"
    read_connections: int = 4
    busy_timeout_ms: int = 30000
    cache_size_mb: int = (
        8  # SQLite page cache per connection, filled as pages are read (--cache-size-mb)
    )
    mmap_size_mb: int = 0  # memory-mapped I/O per connection, 0 = off (--mmap-size)
    wal_flush_ms: int = 250  # durability async: the WAL checkpoint period (--wal-flush-ms)
    maintenance_interval: float = 300.0  # seconds between checkpoint + vacuum + FTS merge runs
    # Credentials in what a write stores (docs/configuration.md, "Secrets"): refuse the
    # write, redact them to a [REDACTED:kind] marker with a warning, or allow them.
    secrets: Literal["refuse", "redact", "allow"] = "redact"


class EmbeddingConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    enabled: bool = True
    model: str = ""  # a directory with model.onnx + tokenizer.json or vocab.txt; "" = bundled all-MiniLM-L6-v2 int8
    # The reference's download settings: accepted, with a warning that nothing is downloaded
    # (the model ships in the package, or is the directory `model` names).
    revision: str = ""
    cache_dir: str = ""
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
    seed_temperature: float = 0.1
    memory_seed_weight: float = 0.5
    entity_anchor_weight: float = 0.2
    damping: float = 0.5
    graph: bool = True  # Personalized PageRank over the memory graph; false = rank the seeds only
    lexical_seeds: bool = True  # FTS5 matches seed the semantic ranking too
    lexical_share: float = 0.65  # of the memory seed mass given to FTS5 matches (rest: cosine)
    mmr_lambda: float = 0.9  # maximal marginal relevance: 1 = off, lower = more diverse results
    dense_seeds: bool = True  # the query vector's nearest memories seed the ranking
    neighbour_weight: float = 0.05  # score a memory lends its thread neighbours (0 = off)
    neighbour_window: int = 2  # thread neighbours on each side that receive it
    terms: bool = False  # link memories to the names, identifiers, paths, quoted terms they mention
    term_anchor_weight: float = 0.2  # seed mass of each such term named in the query
    term_max_share: float = 0.05  # a term in more of the selected memories is not walked
    dates: bool = True  # normalize the dates memories and questions speak of
    date_weight: float = 1.0  # score boost of a memory whose dates meet the question's
    rerank: bool = True  # memory seeds from the learned re-ranker (actors/ranker/rerank.py)
    position_penalty: float = 1.0  # re-ranked results: cost of a chosen memory's thread neighbour
    list_penalty: float = 1.5  # ... for a question asking for several things ("how many ...")
    list_window: int = 6  # ... and its thread neighbours up to this many places away
    topic_query: bool = True  # re-ranker: embed the query without its names as well
    stale_penalty: float = 0.15  # share of a stale memory's score taken off (its code changed)


class CodeConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    enabled: bool = True
    index_threads: int | Literal["auto"] = "auto"
    max_files: int = 20000
    file_timeout: float = 10.0  # seconds one file may take in a worker before it is abandoned


class ServeConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """``memtrio serve``: one long-lived server for many agents (docs/transports.md)."""

    transport: Literal["http", "tcp", "ws"] = "http"
    bind: str = "127.0.0.1:7700"  # HOST:PORT; loopback unless a token is set
    max_connections: int = 128  # live connections (TCP, WebSocket) / HTTP sessions at once
    idle_timeout: float = 1800.0  # seconds an HTTP session may stay idle before it expires
    # Connections of one listener that have not yet shown the token (the TCP token line,
    # the WebSocket handshake, an HTTP request with it); a new one evicts the oldest.
    unauth_limit: int = 64
    auth_timeout: float = 5.0  # seconds from accept to the token, else the connection is shut
    allowed_origins: list[str] = msgspec.field(default_factory=list)  # besides loopback ones
    auth_token_file: str = ""  # a file holding the bearer token (trimmed; empty is refused)
    tls_cert: str = ""  # PEM certificate chain (HTTP, WebSocket); both or neither
    tls_key: str = ""  # PEM private key
    attach: Literal["auto", "existing", "off"] = "auto"  # memtrio mcp: transports.md#attach
    idle_exit: float = 600.0  # seconds an owner memtrio mcp started stays up unused (0: never)
    # Refuse (exit 2), not only warn about, a token file or TLS key others can read and
    # a config.toml others can write (--strict-permissions).
    strict_permissions: bool = False
    # Grants (docs/transports.md, "Grants"; checked by ``supervisors.grants.serve_grants``).
    allowed_roots: list[str] = msgspec.field(default_factory=lambda: ["**"])
    tokens: list[dict[str, Any]] = msgspec.field(default_factory=list)  # [[serve.tokens]]


class HttpConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The Streamable HTTP transport's replay log (docs/transports.md, "Resumability"):
    the events a session keeps so that a client whose stream dropped can resume it."""

    replay_events: int = 1000  # events kept per session (the oldest go first)
    replay_bytes: int = 8 * 1024 * 1024  # bytes of events kept per session
    replay_total_bytes: int = 64 * 1024 * 1024  # bytes kept by all sessions together


class VectorsConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The vector layer (docs/recall.md, "Vector indexes"): the vector tools and the index
    backend that serves them and recall's semantic seeds."""

    enabled: bool = False  # advertise and serve the 12 vector tools (--vectors)
    dims: int = 384  # dimensions of bring-your-own vectors (--embedding-dims), at most 4096
    # Index backend: hnsw (default, as the reference; exact below exact_below vectors, a graph
    # to build is built in the background, exact meanwhile); auto = the same at auto_threshold.
    backend: Literal["auto", "exact", "hnsw", "ivf"] = "hnsw"
    exact_below: int = 10_000  # hnsw: an index of fewer vectors is searched exactly (0 = never)
    auto_threshold: int = 100_000
    metric: Literal["cos", "ip", "l2sq"] = "cos"  # the vector tools' metric (recall: cosine)
    quantization: Literal["f32", "f16", "bf16", "i8"] = "f32"  # hnsw's stored scalars
    connectivity: int = 16  # hnsw graph degree M
    expansion_add: int = 200  # hnsw efConstruction
    expansion_search: int = 128  # hnsw efSearch: recall@10 0.997 at 100,000 (50: 0.948)
    ivf_nlist: int = 256  # ivf cells (k-means centroids)
    ivf_nprobe: int = 8  # ivf cells searched per query


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
    serve: ServeConfig = msgspec.field(default_factory=ServeConfig)
    http: HttpConfig = msgspec.field(default_factory=HttpConfig)
    vectors: VectorsConfig = msgspec.field(default_factory=VectorsConfig)
    tools: ToolsConfig = msgspec.field(default_factory=ToolsConfig)
    hooks: config_hooks.HooksConfig = msgspec.field(default_factory=config_hooks.HooksConfig)
    # Not a section: the `LENIENT` sections given invalid settings -> the error (their
    # keys are then all defaults, and their feature warns and stays off).
    invalid: dict[str, str] = msgspec.field(default_factory=dict)


# Sections whose feature the server can leave off: an invalid setting there (a bad
# value, an unknown key, in config.toml, the environment or a flag) is a warning and
# the server starts without that feature (the reference's "memory tools only"), not
# an exit. `Config.invalid` carries the error to the feature (actors/code/feature.py).
LENIENT = frozenset({"code"})


# The reference's (mcp-memory) environment names of memtrio's settings: read only when
# memtrio's own names and the flags leave the key unset.
FALLBACKS: dict[str, tuple[str, str]] = {
    "MEMORY_FILE_PATH": ("store", "file"),
    "MCP_MEMORY_DURABILITY": ("store", "durability"),
    "MCP_TLS_CERT": ("serve", "tls_cert"),
    "MCP_TLS_KEY": ("serve", "tls_key"),
}

# Short environment names: variable -> (section, key); applied in this order.
ALIASES: dict[str, tuple[str, str]] = {
    "MEMTRIO_DURABILITY": ("store", "durability"),
    "MEMTRIO_STORE": ("store", "url"),
    "MEMTRIO_EMBEDDINGS": ("embedding", "enabled"),
    "MEMTRIO_CODE": ("code", "enabled"),
    "MEMTRIO_TOOLS": ("tools", "enabled"),
    "MEMTRIO_LOG_LEVEL": ("log", "level"),
    "MEMTRIO_REQUEST_LIMIT": ("server", "request_limit"),
    "MEMTRIO_CONTENT": ("server", "content"),
    "MEMTRIO_VECTORS": ("vectors", "enabled"),
    "MEMTRIO_SECRETS": ("store", "secrets"),
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

# Limits of each key, checked after its type: (test, what it must be). A value
# outside them stops the program with the key, the value and where it came from.
MAX_INT32 = 2**31 - 1
_CHECKS: dict[tuple[str, str], tuple[Callable[[Any], bool], str]] = {
    ("server", "request_limit"): (
        lambda v: 1024 <= v <= MAX_INT32,
        f"must be at least 1024 bytes (and at most {MAX_INT32})",
    ),
    ("server", "shutdown_grace"): (lambda v: 0 <= v <= 3600, "must be 0-3600 seconds"),
    ("server", "call_timeout"): (lambda v: 0 < v <= 86400, "must be > 0 and at most 86400 seconds"),
    ("log", "path"): (lambda v: "\0" not in v, "must not contain a NUL character"),
    ("store", "url"): (
        lambda v: v == "sqlite" or v.startswith(("postgresql://", "postgres://")),
        'must be "sqlite" or a postgresql:// URL (postgresql://user@host/db; write libpq\'s '
        "key=value form as a URL)",
    ),
    ("store", "read_connections"): (lambda v: 1 <= v <= 64, "must be 1-64"),
    ("store", "busy_timeout_ms"): (lambda v: 0 <= v <= MAX_INT32, f"must be 0-{MAX_INT32}"),
    ("store", "cache_size_mb"): (lambda v: 1 <= v <= 65_536, "must be 1-65536 (MB)"),
    ("store", "mmap_size_mb"): (lambda v: 0 <= v <= 1_048_576, "must be 0-1048576 (MB; 0 = off)"),
    ("store", "wal_flush_ms"): (lambda v: 10 <= v <= 3_600_000, "must be 10-3600000 (ms)"),
    ("store", "maintenance_interval"): (
        lambda v: 1 <= v <= 7 * 86400,
        "must be 1-604800 seconds",
    ),
    ("embedding", "model"): (lambda v: "\0" not in v, "must not contain a NUL character"),
    ("store", "file"): (lambda v: "\0" not in v, "must not contain a NUL character"),
    ("embedding", "batch_size"): (lambda v: 1 <= v <= 4096, "must be 1-4096"),
    ("embedding", "workers"): (lambda v: 1 <= v <= 64, "must be 1-64"),
    ("embedding", "intra_op_threads"): (
        lambda v: 0 <= v <= 1024,
        "must be 0-1024 (0 = onnxruntime's default)",
    ),
    ("embedding", "max_tokens"): (lambda v: 8 <= v <= 1_000_000, "must be >= 8"),
    ("embedding", "chunk_tokens"): (lambda v: 8 <= v <= 1_000_000, "must be >= 8"),
    ("embedding", "chunk_overlap"): (lambda v: 0 <= v <= 1_000_000, "must be >= 0"),
    ("embedding", "max_chunks"): (lambda v: 1 <= v <= 256, "must be 1-256"),
    ("embedding", "timeout"): (lambda v: 0 < v <= 86400, "must be > 0 and at most 86400 seconds"),
    ("retrieval", "seed_top_k"): (lambda v: 1 <= v <= 100_000, "must be 1-100000"),
    ("retrieval", "seed_temperature"): (lambda v: 0 < v <= 1000, "must be > 0"),
    ("retrieval", "memory_seed_weight"): (lambda v: 0 <= v <= 1, "must be between 0 and 1"),
    ("retrieval", "entity_anchor_weight"): (lambda v: 0 <= v <= 1000, "must be >= 0"),
    ("retrieval", "damping"): (lambda v: 0 < v < 1, "must be between 0 and 1 (exclusive)"),
    ("retrieval", "lexical_share"): (lambda v: 0 <= v <= 1, "must be between 0 and 1"),
    ("retrieval", "neighbour_weight"): (lambda v: 0 <= v <= 10, "must be between 0 and 10"),
    ("retrieval", "neighbour_window"): (lambda v: 0 <= v <= 10, "must be 0-10"),
    ("retrieval", "term_anchor_weight"): (lambda v: 0 <= v <= 1000, "must be >= 0"),
    ("retrieval", "term_max_share"): (lambda v: 0 <= v <= 1, "must be between 0 and 1"),
    ("retrieval", "date_weight"): (lambda v: 0 <= v <= 1000, "must be >= 0"),
    ("retrieval", "position_penalty"): (lambda v: 0 <= v <= 100, "must be 0-100"),
    ("retrieval", "list_penalty"): (lambda v: 0 <= v <= 100, "must be 0-100"),
    ("retrieval", "list_window"): (lambda v: 1 <= v <= 50, "must be 1-50"),
    ("retrieval", "stale_penalty"): (
        lambda v: 0 <= v < 1,
        "must be at least 0 and below 1 (a share of the score; 0 = off; a stale memory is never hidden)",
    ),
    ("retrieval", "mmr_lambda"): (
        lambda v: 0 <= v <= 1,
        "must be between 0 and 1 (1 turns diversification off)",
    ),
    ("code", "index_threads"): (
        lambda v: v == "auto" or 1 <= v <= 256,
        'must be "auto" or 1-256',
    ),
    ("serve", "bind"): (
        lambda v: (
            bool(re.fullmatch(r"(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.\-]*):\d{1,5}", v))
            and int(v.rsplit(":", 1)[1]) <= 65535
        ),
        "must be HOST:PORT (for example 127.0.0.1:7700 or [::1]:7700; port 0-65535)",
    ),
    ("serve", "max_connections"): (lambda v: 1 <= v <= 100_000, "must be 1-100000"),
    ("serve", "idle_timeout"): (
        lambda v: 0 < v <= 7 * 86400,
        "must be > 0 and at most 604800 seconds",
    ),
    ("serve", "unauth_limit"): (lambda v: 1 <= v <= 100_000, "must be 1-100000"),
    ("serve", "auth_timeout"): (lambda v: 0 < v <= 300, "must be > 0 and at most 300 seconds"),
    ("serve", "idle_exit"): (lambda v: 0 <= v <= 604800, "must be 0-604800 seconds (0 = never)"),
    ("serve", "auth_token_file"): (lambda v: "\0" not in v, "must not contain a NUL character"),
    ("serve", "tls_cert"): (lambda v: "\0" not in v, "must not contain a NUL character"),
    ("serve", "tls_key"): (lambda v: "\0" not in v, "must not contain a NUL character"),
    ("http", "replay_events"): (lambda v: 1 <= v <= 1_000_000, "must be 1-1000000"),
    ("http", "replay_bytes"): (
        lambda v: 65_536 <= v <= MAX_INT32,
        f"must be at least 65536 bytes (and at most {MAX_INT32})",
    ),
    ("http", "replay_total_bytes"): (
        lambda v: 65_536 <= v <= 2**40,
        "must be at least 65536 bytes (and at most 2**40)",
    ),
    ("vectors", "dims"): (lambda v: 1 <= v <= 4096, "must be 1-4096"),
    ("vectors", "auto_threshold"): (lambda v: 0 <= v <= MAX_INT32, f"must be 0-{MAX_INT32}"),
    ("vectors", "exact_below"): (lambda v: 0 <= v <= MAX_INT32, f"must be 0-{MAX_INT32}"),
    ("vectors", "connectivity"): (lambda v: 2 <= v <= 256, "must be 2-256"),
    ("vectors", "expansion_add"): (lambda v: 1 <= v <= 10_000, "must be 1-10000"),
    ("vectors", "expansion_search"): (lambda v: 1 <= v <= 10_000, "must be 1-10000"),
    ("vectors", "ivf_nlist"): (lambda v: 1 <= v <= 65_536, "must be 1-65536"),
    ("vectors", "ivf_nprobe"): (lambda v: 1 <= v <= 65_536, "must be 1-65536"),
    ("code", "max_files"): (lambda v: 1 <= v <= 100_000_000, "must be >= 1"),
    ("code", "file_timeout"): (lambda v: 0 < v <= 3600, "must be > 0 and at most 3600 seconds"),
} | config_hooks.CHECKS


def default_home() -> Path:
    """``$MEMTRIO_HOME`` (made absolute, links kept), else ``~/.memtrio``."""
    home = os.environ.get("MEMTRIO_HOME")
    if home:
        return Path(os.path.abspath(Path(home).expanduser()))
    try:
        return Path.home() / ".memtrio"
    except RuntimeError:  # no HOME and no passwd entry
        raise ConfigError(
            "cannot tell where your home directory is (HOME is not set): "
            "set MEMTRIO_HOME or pass --home"
        ) from None


def _sections() -> dict[str, type[msgspec.Struct]]:
    defaults = Config()
    fields = {name: type(getattr(defaults, name)) for name in Config.__struct_fields__}
    return {name: kind for name, kind in fields.items() if issubclass(kind, msgspec.Struct)}


def _hints(section: str) -> dict[str, Any]:
    return {f.name: f.type for f in msgspec.structs.fields(_sections()[section])}


class _Value:
    """One setting as given: its value and where it came from (for messages)."""

    __slots__ = ("source", "value")

    def __init__(self, value: object, source: str) -> None:
        self.value = value
        self.source = source


def _convert(section: str, key: str, given: _Value, from_text: bool) -> object:
    """``given`` as the key's type, range-checked; `ConfigError` naming its source if not."""
    hint = _hints(section)[key]
    value = given.value
    shown = _show(value, from_text)
    if (section, key) == ("serve", "attach") and str(value).strip().lower() in _ONOFF:
        value = "auto" if _ONOFF[str(value).strip().lower()] else "off"  # it was a boolean
    bad = f"{given.source}: {section}.{key} must be {_wanted(hint, from_text)}, not {shown}"
    if from_text:
        text = str(value).strip()
        if hint is bool:
            if text.lower() not in _ONOFF:
                raise ConfigError(bad)
            return _ONOFF[text.lower()]
        if getattr(hint, "__origin__", None) is list:
            value = [part.strip() for part in text.split(",") if part.strip()]
        elif hint is not str:
            value = text
    try:
        # Text (environment, flags) may spell numbers; config.toml values have their types.
        converted = msgspec.convert(value, hint, strict=not from_text)
    except msgspec.ValidationError:
        raise ConfigError(bad) from None
    if isinstance(converted, float) and not math.isfinite(converted):
        raise ConfigError(f"{given.source}: {section}.{key} must be a finite number, not {shown}")
    check = _CHECKS.get((section, key))
    if check is not None and not check[0](converted):
        raise ConfigError(f"{given.source}: {section}.{key} {check[1]}, not {shown}")
    return converted


def load(
    home: Path | None = None,
    env: dict[str, str] | None = None,
    overrides: dict[str, dict[str, Any]] | None = None,
    flags: dict[tuple[str, str], str] | None = None,
    under_env: dict[str, dict[str, Any]] | None = None,
) -> Config:
    """Read config.toml, then the environment, then ``overrides`` (from flags).

    ``under_env``: flag values the environment overrides (the reference's order
    for ``--embedding-batch-size`` and ``--retrieval-*``: file < flag < environment).
    ``flags`` names the command-line flag of an override, for messages
    (default ``--key``). Error handling: any invalid setting raises
    `ConfigError` naming the key, the value and where it came from
    (``MEMTRIO_RETRIEVAL_DAMPING=7 (environment)``, ``damping = 7 in
    /path/config.toml [retrieval] line 2``, ``the command-line flag --tools``),
    except in a `LENIENT` section (``[code]``): its error goes to `Config.invalid`.
    A config.toml that another user owns or group or others can write is a
    warning line, or `trust.LoosePermissions` (exit 2) under ``[serve]
    strict_permissions``.
    """
    env = dict(os.environ) if env is None else env
    sections = _sections()
    given: dict[tuple[str, str], tuple[_Value, bool]] = {}  # -> (value, given as text)
    invalid: dict[str, str] = {}

    def fail(section: str, message: str) -> None:
        """Stop on ``message``, or for a `LENIENT` section note it (the first one)."""
        if section not in LENIENT:
            raise ConfigError(message)
        invalid.setdefault(section, message)

    path = (home or default_home()) / "config.toml"
    read = _from_toml(path, sections, given, fail)
    _from_flags(under_env, flags, given)
    for var, (section, key) in FALLBACKS.items():
        if env.get(var, "") != "":
            given[section, key] = (
                _Value(env[var], f"{_assigned(var, env[var], '=')} (environment)"),
                True,
            )
    _from_env(env, sections, given, fail)
    _from_flags(overrides, flags, given)
    merged: dict[str, Any] = {}
    for (section, key), (value, from_text) in given.items():
        try:
            merged.setdefault(section, {})[key] = _convert(section, key, value, from_text)
        except ConfigError as exc:
            fail(section, str(exc).removeprefix("configuration error: "))
    for section in invalid:
        merged.pop(section, None)  # all defaults: its feature stays off (`Config.invalid`)
    merged["invalid"] = invalid
    config = msgspec.convert(merged, Config)
    _check_tools(config, given.get(("tools", "enabled")))
    if config.store.file and config.store.url != "sqlite":
        raise ConfigError(
            f"{given['store', 'file'][0].source}: store.file names a SQLite file, but store.url "
            "is a PostgreSQL store: give one or the other"
        )
    if read:  # it steers where data goes: only this user may change it
        problem = trust.file_problem(path)
        remedy = f"it decides where memtrio keeps and sends data: chmod 600 {path}"
        trust.enforce(problem, remedy, strict=config.serve.strict_permissions)
    return config


Given = dict[tuple[str, str], tuple[_Value, bool]]  # (section, key) -> (value, given as text)


def _from_toml(
    path: Path,
    sections: dict[str, type[msgspec.Struct]],
    given: Given,
    fail: Callable[[str, str], None],
) -> bool:
    """Read ``path`` into ``given``; whether there was such a file."""
    parsed = _read_toml(path)
    if parsed is None:
        return False
    data, text = parsed
    for section, values in data.items():
        if section not in sections:
            where = _at(path, text, section)
            if not isinstance(values, dict):
                raise ConfigError(
                    f"{where}: unknown top-level key {section!r}: settings go in a "
                    f"[section] (known: {', '.join(sections)})"
                )
            raise ConfigError(
                f"{where}: unknown section [{section}] "
                f"({_closest(section, sections, '[{}]')}known: {', '.join(sections)})"
            )
        if not isinstance(values, dict):
            fail(
                section,
                f"{_at(path, text, section)}: {section} must be a [{section}] table, "
                f"not {_show(values, False)}",
            )
            continue
        known = sections[section].__struct_fields__
        for key, value in values.items():
            line = _line_of(text, section, key)
            if key not in known:
                fail(
                    section,
                    f"{path}{f' line {line}' if line else ''}: unknown key {section}.{key} "
                    f"({_closest(key, known, '{}')}known in [{section}]: {', '.join(known)})",
                )
                continue
            source = f"{_assigned(key, value, ' = ', False)} in {path} [{section}]"
            given[section, key] = (_Value(value, source + (f" line {line}" if line else "")), False)
    return True


def _from_env(
    env: dict[str, str],
    sections: dict[str, type[msgspec.Struct]],
    given: Given,
    fail: Callable[[str, str], None],
) -> None:
    prefixes = {f"MEMTRIO_{section.upper()}_": section for section in sections}
    for var, raw in sorted(env.items()):
        if raw == "" or var in ALIASES:
            continue
        for prefix, section in prefixes.items():
            if not var.startswith(prefix):
                continue
            key = var[len(prefix) :].lower()
            if key not in sections[section].__struct_fields__:
                fail(
                    section,
                    f"{_assigned(var, raw, '=')} (environment): unknown key {section}.{key} "
                    f"({_closest(key, sections[section].__struct_fields__, prefix + '{}', str.upper)}"
                    f"known in [{section}]: {', '.join(sections[section].__struct_fields__)})",
                )
                continue
            given[section, key] = (_Value(raw, f"{_assigned(var, raw, '=')} (environment)"), True)
    for var, (section, key) in ALIASES.items():
        raw = env.get(var, "")
        if raw != "":
            given[section, key] = (_Value(raw, f"{_assigned(var, raw, '=')} (environment)"), True)


def _from_flags(
    overrides: dict[str, dict[str, Any]] | None,
    flags: dict[tuple[str, str], str] | None,
    given: Given,
) -> None:
    for section, values in (overrides or {}).items():
        for key, value in values.items():
            if value is None:
                continue
            flag = (flags or {}).get((section, key), f"--{key.replace('_', '-')}")
            shown = ",".join(value) if isinstance(value, list) else value
            source = _assigned(f"the command-line flag {flag}", shown, " ")
            if isinstance(value, list):
                value = ",".join(value)
            given[section, key] = (_Value(value, source), isinstance(value, str))


def _check_tools(config: Config, given: tuple[_Value, bool] | None) -> None:
    unknown = [g for g in config.tools.enabled if g not in GROUPS]
    if unknown:
        source = f"{given[0].source}: " if given is not None else ""
        raise ConfigError(
            f"{source}tools.enabled: unknown group(s) {', '.join(unknown)} "
            f"(known: {', '.join(GROUPS[1:])})"
        )


def validate(config: Config) -> None:
    """Check a `Config` built in code against the limits `load` applies (no sources to name)."""
    for (section, key), (test, requirement) in _CHECKS.items():
        value = getattr(getattr(config, section), key)
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{section}.{key} must be a finite number, not {_show(value)}")
        if not test(value):
            raise ConfigError(f"{section}.{key} {requirement}, not {_show(value)}")
    _check_tools(config, None)


def log_path(config: Config, home: Path) -> Path:
    return Path(config.log.path).expanduser() if config.log.path else home / "logs" / "memtrio.log"
