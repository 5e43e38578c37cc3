"""Bearer-token auth of the network transports (stdio is never authenticated).

The token travels as ``Authorization: Bearer <token>`` on HTTP and WebSocket
and as the first line of a TCP connection (the token alone, or ``Bearer
<token>``). Comparison is constant-time (`hmac.compare_digest`).
"""

from __future__ import annotations

import hmac

# The challenge of a 401 (RFC 6750).
CHALLENGE = 'Bearer realm="memtrio"'


class BearerAuth:
    """Checks presented credentials against one token (None: auth is off)."""

    __slots__ = ("_token",)

    def __init__(self, token: str | None) -> None:
        self._token = token.encode() if token else None

    @property
    def required(self) -> bool:
        return self._token is not None

    def check_token(self, presented: str | bytes | None) -> bool:
        """Whether ``presented`` is the token (always True when auth is off)."""
        if self._token is None:
            return True
        if presented is None:
            return False
        raw = presented.encode() if isinstance(presented, str) else bytes(presented)
        return hmac.compare_digest(raw.strip(), self._token)

    def check_header(self, authorization: str | bytes | None) -> bool:
        """An ``Authorization`` header value: ``Bearer <token>`` (scheme case-insensitive)."""
        if self._token is None:
            return True
        if authorization is None:
            return False
        raw = authorization.encode() if isinstance(authorization, str) else bytes(authorization)
        scheme, _, credentials = raw.strip().partition(b" ")
        if scheme.lower() != b"bearer":
            return False
        return self.check_token(credentials)

    def check_line(self, line: bytes) -> bool:
        """The first line of a TCP connection: the token, or ``Bearer <token>``."""
        if self._token is None:
            return True
        text = line.strip()
        if text[:7].lower() == b"bearer ":
            return self.check_token(text[7:])
        return self.check_token(text)
