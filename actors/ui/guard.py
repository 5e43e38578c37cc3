"""Who may use the dashboard, and which files it serves.

- Every ``/api/`` request carries the dashboard's per-launch token
  (``X-Memtrio-Token`` or ``Authorization: Bearer``); the page gets it from the
  URL ``memtrio ui`` prints. It is the dashboard's own: never the MCP bearer
  token of ``memtrio serve``, which the dashboard does not accept, and which
  the printed URL never carries.
- A browser ``Origin`` must be the dashboard's own (``scheme://Host``, the Host
  a loopback name unless a token was configured) or one of ``[serve]
  allowed_origins``; a write (POST) also needs a same-origin request
  (``Origin`` or ``Sec-Fetch-Site: same-origin``) with a JSON body, so a page
  of another site cannot forge one (CSRF).
- A static path is resolved inside the package's ``static/`` folder only: no
  ``..`` or ``.`` segment, no backslash, no percent sign left after decoding
  (double encoding), no NUL, no symbolic link, and only known file types.
"""

from __future__ import annotations

import hmac
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from ..net.listen import is_loopback

STATIC = Path(__file__).resolve().parent / "static"
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".json": "application/json",
}
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
# Sent with every answer of the dashboard.
SECURITY_HEADERS = (
    ("content-security-policy", CSP),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    ("x-frame-options", "DENY"),
    ("cross-origin-resource-policy", "same-origin"),
)
TOKEN_HEADER = "x-memtrio-token"


class Denied(Exception):
    """A request the dashboard refuses: HTTP status and why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def new_token() -> str:
    """A per-launch token (URL-safe, 192 random bits)."""
    return secrets.token_urlsafe(24)


@dataclass(frozen=True)
class Guard:
    """The dashboard's token and origin rules.

    ``token``: the dashboard's own per-launch token. ``configured``: a bearer
    token was configured (``--auth-token-file``, ``MEMTRIO_AUTH_TOKEN``), so a
    non-loopback bind and Host are acceptable; that token is not accepted here.
    """

    token: str
    configured: bool = False
    allowed_origins: tuple[str, ...] = field(default_factory=tuple)

    def check_token(self, headers: dict[str, str]) -> None:
        presented = headers.get(TOKEN_HEADER)
        if presented is None:
            scheme, _, credentials = headers.get("authorization", "").partition(" ")
            presented = credentials if scheme.lower() == "bearer" else None
        if presented is None or not hmac.compare_digest(
            presented.strip().encode(), self.token.encode()
        ):
            raise Denied(401, "missing or wrong dashboard token: open the URL memtrio ui printed")

    def own_origin(self, headers: dict[str, str], scheme: str) -> str:
        host = headers.get("host", "")
        try:
            hostname = urlsplit(f"//{host}").hostname or ""
        except ValueError:  # "[::1" and the like: not a host at all
            raise Denied(400, "the Host header is not a host[:port]") from None
        if not self.configured and not is_loopback(hostname):
            raise Denied(403, f"host {host!r} is not a loopback address")
        return f"{scheme}://{host}"

    def check_origin(self, headers: dict[str, str], scheme: str, write: bool) -> None:
        """Refuse a foreign ``Origin``; a write also needs proof it is same-origin."""
        own = self.own_origin(headers, scheme)
        origin = headers.get("origin")
        if origin is not None and origin != own and origin not in self.allowed_origins:
            raise Denied(403, f"origin {origin!r} may not use this dashboard")
        if not write:
            return
        site = headers.get("sec-fetch-site")
        if site is not None and site != "same-origin":
            raise Denied(403, f"cross-site write refused (Sec-Fetch-Site: {site})")
        if origin is None and site is None:
            raise Denied(403, "a write needs an Origin or Sec-Fetch-Site header (same-origin)")
        kind = headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/json":
            raise Denied(415, "a write must send Content-Type: application/json")


def static_file(path: str, root: Path = STATIC) -> tuple[Path, str]:
    """The file under ``root`` that the (percent-decoded) URL ``path`` names, and its type.

    Error handling: raises `Denied` (404) for anything that could leave ``root``
    or is not a known file type; the message never echoes a resolved path.
    """
    rel = path.lstrip("/") or "index.html"
    parts = rel.split("/")
    if (
        any(ch in rel for ch in ("\\", "\x00", "%", ":"))
        or any(p in ("", ".", "..") for p in parts)
        or rel.startswith("~")
    ):
        raise Denied(404, "no such file")
    kind = CONTENT_TYPES.get(os.path.splitext(rel)[1].lower())
    if kind is None:
        raise Denied(404, "no such file")
    base = root.resolve()
    current = base
    for part in parts:
        current = current / part
        if current.is_symlink():
            raise Denied(404, "no such file")
    resolved = current.resolve()
    if not resolved.is_relative_to(base) or not resolved.is_file():
        raise Denied(404, "no such file")
    return resolved, kind
