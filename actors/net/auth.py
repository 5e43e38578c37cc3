"""Bearer-token auth of the network transports (stdio is never authenticated).

The token travels as ``Authorization: Bearer <token>`` on HTTP and WebSocket
and as the first line of a TCP connection (the token alone, or ``Bearer
<token>``). A presented token is looked up among the server's tokens and
answers with the `Grant` it opens (``supervisors.grants``): the single token
(``--auth-token-file``) opens the grant ``default``, every ``[[serve.tokens]]``
entry its own; each grant is bounded by ``[serve] allowed_roots``. Tokens are
kept as their SHA-256 and compared in constant time (`hmac.compare_digest`),
every one of them on each lookup. A blank token (empty once trimmed) is never a
token: none is kept (`BearerAuth` refuses one, and a grant for the SHA-256 of a
blank, see ``supervisors.grants.blank_digest``) and none is ever accepted.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...supervisors.grants import ANY, Grant, TokenGrant, blank_digest, token_digest, with_bound

# The challenge of a 401 (RFC 6750).
CHALLENGE = 'Bearer realm="memtrio"'
# The grant of the single token (--auth-token-file, MEMTRIO_AUTH_TOKEN), and of every
# session when auth is off (loopback without a token).
DEFAULT_GRANT = "default"
OPEN_GRANT = "open"


class BearerAuth:
    """Checks presented credentials against the server's tokens (none: auth is off).

    ``token`` is the single token (a full grant), ``grants`` the per-token grants,
    ``roots`` the server's bound on every grant (``[serve] allowed_roots``).

    Error handling: a blank ``token``, or a grant whose digest is the SHA-256 of a
    blank, raises `ValueError` (``actors.net.listen`` refuses both at start with a
    line saying why; this is the last line of defence).
    """

    __slots__ = ("_open", "_tokens")

    def __init__(
        self,
        token: str | None,
        grants: Sequence[TokenGrant] = (),
        roots: Sequence[str] = (ANY,),
    ) -> None:
        bound = tuple(roots)
        for entry in grants:
            blank = blank_digest(entry.digest)
            if blank is not None:
                raise ValueError(f"the token of grant {entry.grant.name!r} is {blank}")
        if token is not None and not token.strip():
            raise ValueError("the bearer token is blank")
        tokens = [TokenGrant(g.digest, with_bound(g.grant, bound)) for g in grants]
        if token:
            tokens.insert(
                0, TokenGrant(token_digest(token.strip()), Grant(DEFAULT_GRANT, bound=bound))
            )
        self._tokens = tuple(tokens)
        self._open = Grant(OPEN_GRANT, bound=bound)

    @property
    def required(self) -> bool:
        return bool(self._tokens)

    def grant_for_token(self, presented: str | bytes | None) -> Grant | None:
        """The grant ``presented`` opens (the open grant when auth is off); None: refused."""
        if not self._tokens:
            return self._open
        if presented is None:
            return None
        raw = (presented.encode() if isinstance(presented, str) else bytes(presented)).strip()
        if not raw:
            return None  # a blank token opens nothing, whatever the tables say
        digest = token_digest(raw)
        found: Grant | None = None
        for entry in self._tokens:  # every entry, whichever matches: no early exit
            if entry.matches(digest) and found is None:
                found = entry.grant
        return found

    def grant_for_header(self, authorization: str | bytes | None) -> Grant | None:
        """An ``Authorization`` header value: ``Bearer <token>`` (scheme case-insensitive)."""
        if not self._tokens:
            return self._open
        if authorization is None:
            return None
        raw = authorization.encode() if isinstance(authorization, str) else bytes(authorization)
        scheme, _, credentials = raw.strip().partition(b" ")
        if scheme.lower() != b"bearer":
            return None
        return self.grant_for_token(credentials)

    def grant_for_line(self, line: bytes) -> Grant | None:
        """The first line of a TCP connection: the token, or ``Bearer <token>``."""
        if not self._tokens:
            return self._open
        text = line.strip()
        if text[:7].lower() == b"bearer ":
            return self.grant_for_token(text[7:])
        return self.grant_for_token(text)

    def check_token(self, presented: str | bytes | None) -> bool:
        """Whether ``presented`` is one of the tokens (always True when auth is off)."""
        return self.grant_for_token(presented) is not None

    def check_header(self, authorization: str | bytes | None) -> bool:
        return self.grant_for_header(authorization) is not None

    def check_line(self, line: bytes) -> bool:
        return self.grant_for_line(line) is not None
