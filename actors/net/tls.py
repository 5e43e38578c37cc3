"""The TLS files of a listener (``--tls-cert``/``--tls-key``, ``[serve] tls_cert``/``tls_key``).

`check_files` runs when the settings are resolved (``actors.net.listen``), before
anything starts, so a file that cannot serve is one line and exit 2 naming it,
on every transport and on ``memtrio ui``, instead of a listener that fails
while starting. `server_ssl_context` builds the context a listener serves with.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Protocol

from ...supervisors import trust
from ...supervisors.config import ConfigError

# What a PEM private key's first line says, and what an encrypted one says too.
PEM_BEGIN = b"-----BEGIN "
KEY_MARKER = b"PRIVATE KEY-----"
ENCRYPTED_MARKERS = (b"ENCRYPTED PRIVATE KEY-----", b"Proc-Type: 4,ENCRYPTED")
# The largest certificate chain or key read (a real one is a few kilobytes).
MAX_PEM = 1 << 20


class HasTls(Protocol):
    @property
    def tls_cert(self) -> Path | None: ...

    @property
    def tls_key(self) -> Path | None: ...


def _read(label: str, path: Path) -> bytes:
    try:
        with path.open("rb") as file:
            return file.read(MAX_PEM)
    except OSError as exc:
        raise ConfigError(
            f"{label} {path}: cannot read it ({exc.strerror or exc}); "
            "give a readable PEM file (chmod 600, owned by the user memtrio runs as)"
        ) from None


def check_files(
    cert: Path, key: Path, *, cert_label: str, key_label: str, strict: bool = False
) -> None:
    """Check that ``cert`` and ``key`` can serve TLS: each readable, PEM, the key
    unencrypted and the key of the certificate; and that the key is private.

    Error handling: raises `ConfigError` (exit 2, one line naming the file at fault
    and what to do). A key that group or others can read (or another user owns)
    is a warning line (`trust.enforce`), or `trust.LoosePermissions` (exit 2)
    under ``strict``.
    """
    cert_pem, key_pem = _read(cert_label, cert), _read(key_label, key)
    if PEM_BEGIN not in cert_pem:
        raise ConfigError(
            f"{cert_label} {cert}: cannot load it: not a PEM file (no '-----BEGIN' line); "
            "give the certificate chain in PEM (openssl x509 -inform der -in C -out C.pem)"
        )
    try:
        ssl.create_default_context().load_verify_locations(cadata=cert_pem.decode("ascii"))
    except (ssl.SSLError, UnicodeDecodeError, ValueError):
        raise ConfigError(
            f"{cert_label} {cert}: cannot load it: not a PEM certificate (chain); "
            "give the server's certificate, then its intermediates, in PEM"
        ) from None
    if PEM_BEGIN not in key_pem or KEY_MARKER not in key_pem:
        raise ConfigError(
            f"{key_label} {key}: cannot load it: not a PEM private key "
            "(no '-----BEGIN ... PRIVATE KEY-----' line); give the certificate's key in PEM"
        )
    if any(marker in key_pem for marker in ENCRYPTED_MARKERS):
        raise ConfigError(
            f"{key_label} {key}: cannot load it: the key is encrypted; "
            "give it unencrypted (openssl pkey -in K -out K.plain) and chmod 600 it"
        )
    try:
        _context(cert, key)
    except (ssl.SSLError, OSError) as exc:
        mismatch = "KEY_VALUES_MISMATCH" in str(exc) or "key values mismatch" in str(exc)
        why = f"it is not the key of {cert_label} {cert}" if mismatch else f"{exc}"
        raise ConfigError(
            f"{key_label} {key}: cannot load it: {why}; "
            "give the unencrypted PEM key that matches the certificate"
        ) from None
    problem = trust.file_problem(key, secret=True)
    if problem is not None:
        trust.enforce(f"the TLS key {problem}", f"chmod 600 {key}", strict=strict)


def _context(cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(str(cert), str(key), password=lambda: b"")
    return context


def server_ssl_context(listen: HasTls) -> ssl.SSLContext | None:
    """The server-side TLS context of ``listen`` (None without a certificate).

    Error handling: a certificate or key that cannot be loaded (changed since
    `check_files` passed) raises `ConfigError` (exit 2) naming both files.
    """
    if listen.tls_cert is None or listen.tls_key is None:
        return None
    try:
        return _context(listen.tls_cert, listen.tls_key)
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(
            f"--tls-cert {listen.tls_cert} / --tls-key {listen.tls_key}: cannot load them "
            f"({exc}); both must be PEM files, the key unencrypted and matching the certificate"
        ) from None
