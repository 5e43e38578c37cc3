"""The TLS context of a listener (``--tls-cert``/``--tls-key``, ``[serve] tls_cert``/``tls_key``)."""

from __future__ import annotations

import ssl

from ...supervisors.config import ConfigError
from .listen import Listen


def server_ssl_context(listen: Listen) -> ssl.SSLContext | None:
    """The server-side TLS context of ``listen`` (None without a certificate).

    Error handling: a certificate or key that cannot be loaded (not PEM, a key
    that does not match the certificate, an encrypted key) raises `ConfigError`
    (exit 2) naming both files.
    """
    if listen.tls_cert is None or listen.tls_key is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(str(listen.tls_cert), str(listen.tls_key), password=lambda: b"")
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(
            f"--tls-cert {listen.tls_cert} / --tls-key {listen.tls_key}: cannot load them "
            f"({exc}); both must be PEM files, the key unencrypted and matching the certificate"
        ) from None
    return context
