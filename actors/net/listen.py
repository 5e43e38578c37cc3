"""What ``memtrio serve`` listens on: the transport, the address, auth and TLS.

`resolve_listen` merges the ``[serve]`` configuration with the command line and
the environment (``MEMTRIO_TRANSPORT``, ``MEMTRIO_PORT``, ``MEMTRIO_AUTH_TOKEN``)
and refuses, with one line saying what to do, what would be unsafe or cannot
work: an unknown transport, a non-loopback bind without a token, a certificate
without its key (or the reverse), an empty token file.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ...supervisors import trust
from ...supervisors.config import FALLBACKS, Config, ConfigError, ServeConfig
from ...supervisors.grants import ANY, Grant, TokenGrant, serve_grants, token_digest
from .tls import check_files

# Transport names accepted by --transport and MEMTRIO_TRANSPORT -> the transport served.
TRANSPORTS: dict[str, str] = {
    "stdio": "stdio",
    "streamable-http": "http",
    "http": "http",
    "sse": "http",
    "tcp": "tcp",
    "ws": "ws",
}
SSE_HINT = (
    "memtrio: MEMTRIO_TRANSPORT=sse is deprecated: it serves Streamable HTTP "
    "(SSE replies included) on /mcp; use MEMTRIO_TRANSPORT=streamable-http"
)
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "ip6-localhost"})


def transport_name(value: str, source: str) -> str:
    """The transport ``value`` selects (``http`` for its aliases).

    Error handling: an unknown value raises `ConfigError` (exit 2) listing the
    valid ones; it never falls back to stdio.
    """
    chosen = TRANSPORTS.get(value.strip().lower())
    if chosen is None:
        raise ConfigError(f"{source}: unknown transport {value!r} (valid: {', '.join(TRANSPORTS)})")
    return chosen


def parse_bind(value: str, source: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` too) -> (host, port)."""
    host, sep, port = value.strip().rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ConfigError(
            f"{source}: {value!r} must be HOST:PORT (for example 127.0.0.1:7700; port 0-65535)"
        )
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host or "127.0.0.1", int(port)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is only reachable from this machine."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_token_file(path: Path, source: str, *, strict: bool = False) -> str:
    """The token in ``path``, trimmed.

    Error handling: a missing, unreadable, non-UTF-8 or empty (after trimming)
    file raises `ConfigError` naming it (never quoting what it holds). A file that
    group or others can read or write, or another user owns, is a warning line
    (`trust.enforce`), or `trust.LoosePermissions` (exit 2) under ``strict``.
    """
    try:
        token = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ConfigError(
            f"{source}: cannot read the token file {path}: {exc.strerror or type(exc).__name__}"
        ) from None
    except UnicodeDecodeError:
        raise ConfigError(
            f"{source}: the token file {path} is not UTF-8 text; write the token in it as text"
        ) from None
    if not token:
        raise ConfigError(
            f"{source}: the token file {path} is empty; write the token in it "
            "(or drop the option to serve without auth on loopback)"
        )
    problem = trust.file_problem(path, secret=True)
    if problem is not None:
        trust.enforce(f"the token file {problem}", f"chmod 600 {path}", strict=strict)
    return token


def token_grants(config: Config, single: str | None) -> tuple[TokenGrant, ...]:
    """The ``[[serve.tokens]]`` of ``config``, each token read from its file (or taken as its
    SHA-256), with its grant.

    Error handling: a malformed ``[serve] allowed_roots`` or ``[[serve.tokens]]`` table, a
    token file that cannot be read or is empty, and a token given twice (by two tables,
    or by a table and the single token) raise `ConfigError` (exit 2, one line).
    """
    try:
        _, tables = serve_grants(config.serve.allowed_roots, config.serve.tokens)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    grants: list[TokenGrant] = []
    seen: dict[bytes, str] = (
        {token_digest(single.strip()): "the --auth-token(-file) token"} if single else {}
    )
    for entry in tables:
        label = f"[[serve.tokens]] {entry.name!r}"
        if entry.token_file:
            digest = token_digest(
                read_token_file(Path(entry.token_file).expanduser(), f"{label} token_file")
            )
        else:
            digest = bytes.fromhex(entry.token_sha256)  # never a blank's (`serve_grants`)
        if digest in seen:
            raise ConfigError(
                f"{label} has the same token as {seen[digest]}; give each grant its own token"
            )
        seen[digest] = label
        grant = Grant(entry.name, tuple(entry.allowed_roots), entry.read_only)
        grants.append(TokenGrant(digest, grant))
    return tuple(grants)


@dataclass(frozen=True)
class Listen:
    """Resolved settings of one ``memtrio serve`` listener."""

    transport: str  # http | tcp | ws
    host: str = "127.0.0.1"
    port: int = 7700
    token: str | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    max_connections: int = 128
    idle_timeout: float = 1800.0
    unauth_limit: int = 64
    auth_timeout: float = 5.0
    body_limit: int = 16 * 1024 * 1024
    allowed_origins: tuple[str, ...] = field(default_factory=tuple)
    # The per-token grants ([[serve.tokens]]) and the bound on every grant
    # ([serve] allowed_roots), see ``actors.net.auth``.
    grants: tuple[TokenGrant, ...] = field(default_factory=tuple)
    allowed_roots: tuple[str, ...] = (ANY,)
    # How the user chooses the address, for a message that cannot bind it.
    bind_hint: str = "--bind"

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)

    def url(self, port: int | None = None) -> str:
        """Where a client connects (``port``: the one actually bound, when 0 was asked)."""
        scheme = {"http": "http", "ws": "ws", "tcp": "tcp"}[self.transport]
        if self.tls and scheme in ("http", "ws"):
            scheme += "s"
        host = f"[{self.host}]" if ":" in self.host else self.host
        path = "/mcp" if self.transport == "http" else ""
        return f"{scheme}://{host}:{self.port if port is None else port}{path}"


def resolve_listen(
    config: Config,
    *,
    transport: str | None = None,
    bind: str | None = None,
    token: str | None = None,
    token_file: str | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    insecure_no_auth: bool = False,
    environ: Mapping[str, str] | None = None,
    command: str = "serve",
) -> Listen:
    """The listener settings: flags over the environment over ``[serve]``.

    ``transport`` is an already-validated name (see `transport_name`); without
    it ``MEMTRIO_TRANSPORT`` then ``[serve] transport`` decide. ``MEMTRIO_PORT``
    replaces the port of the bind address.

    Error handling: raises `ConfigError` (exit 2, one line) for an unknown
    transport, a bad address, a bad or empty token file, a certificate without
    its key or the reverse, TLS files that cannot serve (`tls.check_files`), and
    a non-loopback bind without a token unless ``insecure_no_auth``. A token file
    or TLS key others can read is a warning, or exit 2 under ``[serve]
    strict_permissions``. ``command`` (``serve``, ``mcp``, ``ui``) chooses the
    remedies the messages suggest: only what that command accepts.
    """
    env = os.environ if environ is None else environ
    serve = config.serve
    if transport is None:
        raw = env.get("MEMTRIO_TRANSPORT", "")
        transport = transport_name(raw, f"MEMTRIO_TRANSPORT={raw}") if raw else serve.transport
    if transport == "stdio":
        raise ConfigError("memtrio serve needs a network transport: http, tcp or ws")
    if bind is not None:
        host, port = parse_bind(bind, f"the command-line flag --bind {bind}")
    else:
        host, port = parse_bind(serve.bind, f"[serve] bind = {serve.bind!r}")
        raw_port = env.get("MEMTRIO_PORT", "")
        if raw_port:
            if not raw_port.isdigit() or int(raw_port) > 65535:
                raise ConfigError(f"MEMTRIO_PORT={raw_port} (environment): must be a port, 0-65535")
            port = int(raw_port)
    secret = _token(serve, env, token, token_file)
    cert, key = _tls(serve, transport, tls_cert, tls_key, env)
    listen = Listen(
        transport=transport,
        host=host,
        port=port,
        token=secret,
        tls_cert=Path(cert).expanduser() if cert else None,
        tls_key=Path(key).expanduser() if key else None,
        max_connections=serve.max_connections,
        idle_timeout=serve.idle_timeout,
        unauth_limit=serve.unauth_limit,
        auth_timeout=serve.auth_timeout,
        body_limit=config.server.request_limit,
        allowed_origins=tuple(serve.allowed_origins),
        grants=token_grants(config, secret),
        allowed_roots=tuple(serve.allowed_roots),
        bind_hint=BIND_HINT.get(command, "--bind"),
    )
    if not listen.loopback and listen.token is None and not listen.grants and not insecure_no_auth:
        raise ConfigError(
            f"refusing to serve on {host}, which is reachable from other machines, without a "
            f"token: {NO_TOKEN_REMEDY.get(command, NO_TOKEN_REMEDY['serve'])}"
        )
    return listen


def _token(
    serve: ServeConfig, env: Mapping[str, str], token: str | None, token_file: str | None
) -> str | None:
    """The bearer token: the flag, the flag's file, ``MEMTRIO_AUTH_TOKEN``, ``[serve]
    auth_token_file``, in that order; None when none is set."""
    if token is not None:
        secret = token.strip()
        if not secret:
            raise ConfigError("the command-line flag --auth-token: the token is empty")
    elif token_file:
        secret = read_token_file(
            Path(token_file).expanduser(),
            f"--auth-token-file {token_file}",
            strict=serve.strict_permissions,
        )
    elif (named := _token_variable(env)) is not None:
        secret = named
    elif serve.auth_token_file:
        secret = read_token_file(
            Path(serve.auth_token_file).expanduser(),
            "[serve] auth_token_file",
            strict=serve.strict_permissions,
        )
    else:
        secret = None
    return secret


# The bearer token by value: memtrio's variable, then the reference's (mcp-memory) name.
TOKEN_VARIABLES = ("MEMTRIO_AUTH_TOKEN", "MCP_MEMORY_AUTH_TOKEN")


def _token_variable(env: Mapping[str, str]) -> str | None:
    """The token of the first of `TOKEN_VARIABLES` set, or None.

    Error handling: one set to blanks only is a `ConfigError` naming it (it would
    otherwise serve without auth); the token itself is never in a message.
    """
    for var in TOKEN_VARIABLES:
        raw = env.get(var, "")
        if raw:
            if not raw.strip():
                raise ConfigError(
                    f"{var} is blank: set the token in it, or unset it "
                    "(a blank token would serve without auth)"
                )
            return raw.strip()
    return None


def _tls(
    serve: ServeConfig,
    transport: str,
    tls_cert: str | None,
    tls_key: str | None,
    env: Mapping[str, str],
) -> tuple[str | None, str | None]:
    """The TLS certificate chain and key (flags over ``[serve]``), checked (`tls.check_files`);
    messages name where each came from (the flag, the variable read, or the key)."""
    cert = tls_cert if tls_cert is not None else (serve.tls_cert or None)
    key = tls_key if tls_key is not None else (serve.tls_key or None)
    cert_label = "--tls-cert" if tls_cert is not None else _tls_source("tls_cert", env)
    key_label = "--tls-key" if tls_key is not None else _tls_source("tls_key", env)
    if bool(cert) != bool(key):
        given = cert_label if cert else key_label
        missing = _counterpart(given)
        raise ConfigError(
            f"{given} was given without {missing}: TLS needs both the certificate chain and its key"
        )
    if cert and transport == "tcp":
        raise ConfigError(
            f"TLS is served on http and ws, not tcp: drop {cert_label} and {key_label}"
        )
    for label, path in ((cert_label, cert), (key_label, key)):
        if path and not Path(path).expanduser().is_file():
            raise ConfigError(f"{label} {path}: no such file")
    if cert and key:
        check_files(
            Path(cert).expanduser(),
            Path(key).expanduser(),
            cert_label=cert_label,
            key_label=key_label,
            strict=serve.strict_permissions,
        )
    return cert, key


def _counterpart(label: str) -> str:
    """The key's spelling of a certificate's label (``MCP_TLS_CERT``: ``MCP_TLS_KEY``), and
    the reverse: the one missing is named as the user would write it."""
    swap = {"cert": "key", "key": "cert", "CERT": "KEY", "KEY": "CERT"}
    return re.sub(r"cert|key|CERT|KEY", lambda m: swap[m.group(0)], label)


def _tls_source(key: str, env: Mapping[str, str]) -> str:
    """Where ``[serve] <key>`` came from: memtrio's variable, the reference's, or the file."""
    reference = [var for var, setting in FALLBACKS.items() if setting == ("serve", key)]
    for var in (f"MEMTRIO_SERVE_{key.upper()}", *reference):
        if env.get(var, ""):
            return var
    return f"[serve] {key}"


# How each command's user chooses the address.
BIND_HINT = {"serve": "--bind", "ui": "--bind", "mcp": "[serve] bind (or MEMTRIO_PORT)"}
# What each command can do about a non-loopback bind without a token (only its own flags).
NO_TOKEN_REMEDY = {
    "serve": "set --auth-token-file (or MEMTRIO_AUTH_TOKEN), bind 127.0.0.1, "
    "or pass --insecure-no-auth",
    "ui": "set --auth-token-file (or MEMTRIO_AUTH_TOKEN), or bind 127.0.0.1 (--bind 127.0.0.1:0)",
    "mcp": "set MEMTRIO_AUTH_TOKEN (or [serve] auth_token_file), or bind 127.0.0.1 ([serve] bind)",
}
