"""Connection strings: how they are shown (never with a password), and which ones are usable.

Every message, log line, report and tool result that could hold a store's
connection string or a driver's text about it passes through `redact`, the
one redaction of the program. It removes:

- the passwords of the connection strings memtrio was given (`register`,
  or passed in), wherever they appear: as given, percent-decoded,
  percent-encoded, JSON- or repr-escaped (a driver quotes the part of a URL
  it could not parse, libpq names the host it could not resolve...);
- anything shaped like a password: the userinfo password of any
  ``scheme://user:PASSWORD@host`` (up to the *last* ``@`` of the URL, so a raw
  ``@`` in the password is hidden too), and the value of a ``password=``,
  ``sslpassword=`` or ``PGPASSWORD=`` keyword (libpq's key=value form, quoted
  or not, and URL query parameters).

`check` says whether a URL is one memtrio can hand to libpq: a
``postgresql://`` (or ``postgres://``) URL that libpq reads as it looks (a
raw ``@`` or ``/`` in the user or password makes libpq read part of the
password as the host, and send it to a DNS server): a `ConfigError` (exit
code 2) otherwise, whose message never quotes the URL.

This module imports no driver: libpq's reading of a string is the PostgreSQL package's
(`pg.conninfo`, which imports psycopg only when it reads one), so a SQLite user, and a
user without the ``postgres`` extra, can use it.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable
from urllib.parse import quote, unquote

from ...supervisors import trace
from ...supervisors.config import ConfigError
from ...supervisors.config_show import SCHEME as _SCHEME
from ...supervisors.config_show import described
from .pg import conninfo

MASK = "***"
# Known passwords shorter than this are hidden where they have a password's place
# (after ``user:``, after ``password=``) but not replaced everywhere in a text:
# replacing every "a" would make messages unreadable and protects nothing.
MIN_SUBSTITUTED = 3

# scheme://user:PASSWORD@: the user ends at its first ":", the password at the last "@" of
# the URL (a URL ends at a blank or a quote).
_USERINFO = re.compile(rf"({_SCHEME}[^\s:/?#\"'<>]*?:)[^\s\"'<>]*@")
# The same over one whole connection string (blanks and quotes are part of the password).
_WHOLE_USERINFO = re.compile(rf"{_SCHEME}[^:/?#]*?:(.*)@", re.DOTALL)
_KEYWORD = re.compile(
    r"(?i)(?<![A-Za-z0-9])((?:pg_?|ssl)?password\s*=\s*)"
    r"('(?:[^'\\]|\\.)*'?|\"(?:[^\"\\]|\\.)*\"?|[^\s&'\"]+)"
)
# What libpq quotes in its messages: a part of the URL (elided), or one character it wants.
_QUOTED = re.compile(r"\"([^\"]*)\"?")
_PG_SCHEMES = ("postgresql://", "postgres://")
ENCODE_HINT = (
    "percent-encode the user's and the password's special characters "
    "(@ as %40, / as %2F, : as %3A, # as %23, ? as %3F, % as %25, a space as %20)"
)
NOT_SHOWN = "the URL is not shown: it may hold a password"

_lock = threading.Lock()
_known: tuple[str, ...] = ()  # the registered passwords (`_masked` hides overlaps whole)


def _unquoted_value(value: str) -> str:
    """A libpq keyword value as libpq reads it (single quotes, backslash escapes)."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return re.sub(r"\\(.)", r"\1", value[1:-1])
    return value


def _forms(secret: str) -> set[str]:
    """``secret`` as it may appear in a text: as given, decoded, encoded, escaped (JSON,
    repr, the trace log's escapes of bytes that are not UTF-8)."""
    raw = unquote(secret, errors="surrogateescape")
    forms = {secret, raw, unquote(secret)}  # the last: bytes not UTF-8 replaced by U+FFFD
    forms |= {quote(f, safe="", errors="surrogateescape") for f in (secret, raw)}
    forms |= {f.encode("utf-8", "backslashreplace").decode("utf-8") for f in forms}
    # One-line messages turn each run of blanks into one space (and drop them at the ends).
    forms |= {re.sub(r"\s+", " ", f) for f in forms} | {" ".join(f.split()) for f in forms}
    out = set(forms)
    for form in forms:
        out |= {json.dumps(form, ensure_ascii=False)[1:-1], json.dumps(form)[1:-1]}
        out.add(repr(form)[1:-1])
    return out


def secrets_of(connection: str) -> set[str]:
    """The passwords ``connection`` holds, in every form a text may show them (blanks
    around it are not part of it: a URL pasted with them still has its user part)."""
    connection = connection.strip()
    found: list[str] = []
    whole = _WHOLE_USERINFO.match(connection)
    if whole:
        found.append(whole.group(1))
    found += [_unquoted_value(m.group(2)) for m in _KEYWORD.finditer(connection)]
    found += [m.group(2) for m in _KEYWORD.finditer(connection)]
    try:
        parsed = conninfo.read(connection)  # the driver, when it is installed
        found += [str(parsed.get(k) or "") for k in ("password", "sslpassword")]
    except Exception:  # noqa: BLE001, S110 - not installed, or not a string libpq reads
        pass
    return {form for secret in found if secret for form in _forms(secret)}


def register(connection: str) -> None:
    """Hide ``connection``'s passwords from every later `redact` of this process, and
    from the trace log (its lines pass through `redact` from now on)."""
    global _known
    fresh = {s for s in secrets_of(connection) if len(s) >= MIN_SUBSTITUTED}
    with _lock:
        _known = tuple(set(_known) | fresh)
    trace.LOG.scrub = redact


def _masked(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every place any of ``secrets`` covers replaced by one `MASK` each
    stretch: where two overlap (a password holding ``password=`` in a URL's user part, whose
    keyword's value runs on past it), both are hidden whole, whichever is found first."""
    spans: list[tuple[int, int]] = []
    for secret in secrets:
        at = text.find(secret)
        while at != -1:
            spans.append((at, at + len(secret)))
            at = text.find(secret, at + 1)
    if not spans:
        return text
    spans.sort()
    parts: list[str] = []
    done = 0  # the end of the text already copied or masked
    start, end = spans[0]
    for begin, stop in spans[1:]:
        if begin <= end:  # overlapping or touching: one stretch
            end = max(end, stop)
            continue
        parts += [text[done:start], MASK]
        done, start, end = end, begin, stop
    parts += [text[done:start], MASK, text[end:]]
    return "".join(parts)


def redact(text: str, *connections: str) -> str:
    """``text`` without any password (see the module doc): those of ``connections`` and of
    the registered connection strings, and anything shaped like one."""
    known: Iterable[str] = _known
    if connections:
        given = {s for c in connections for s in secrets_of(c) if len(s) >= MIN_SUBSTITUTED}
        known = given.union(known)
    text = _masked(text, known)
    if "://" in text:
        text = _USERINFO.sub(rf"\g<1>{MASK}@", text)
    if "password" in text.lower():
        text = _KEYWORD.sub(rf"\g<1>{MASK}", text)
    return text


def shown(connection: str) -> str:
    """``connection`` as messages and logs show it: ``postgresql://user:***@host/db``."""
    return redact(connection, connection)


def _elided(quoted: re.Match[str]) -> str:
    """A part of the URL libpq quoted, as ``"…"``; a punctuation mark it expected, as it is."""
    inner = quoted.group(1)
    return quoted.group(0) if len(inner) == 1 and not inner.isalnum() else '"…"'


def check(url: str, origin: str) -> None:
    """Refuse (`ConfigError`, exit code 2) a ``url`` memtrio cannot hand to libpq as it is.

    ``origin`` names where the URL came from (``--to``, "--store, [store] url or
    MEMTRIO_STORE"). Needs the driver (psycopg), for libpq's own reading of the URL.
    """
    if not url.startswith(_PG_SCHEMES):
        hint = (
            " (write it as a postgresql:// URL)"
            if "=" in url and "://" not in url
            else " (memtrio stores in SQLite or PostgreSQL)"
        )
        raise ConfigError(
            f"{origin} must be a postgresql:// URL, not {described(url)}{hint}; {NOT_SHOWN}"
        )
    if not url.isprintable():
        raise ConfigError(
            f"{origin} holds a character that is not printable text (a control character, or "
            f"bytes that are not UTF-8): {ENCODE_HINT}; {NOT_SHOWN}"
        )
    rest = url.partition("://")[2]
    if rest.count("@") > 1 or ("@" in rest and "/" in rest.partition("@")[0]):
        raise ConfigError(
            f"{origin} holds a raw '@' or '/' in its user, password or parameters, which "
            f"libpq would read as part of the host: {ENCODE_HINT}; {NOT_SHOWN}"
        )
    try:
        parsed = conninfo.read(url)
    except UnicodeDecodeError:
        raise ConfigError(
            f"{origin} is malformed (a percent-encoded byte sequence that is not UTF-8); "
            f"{ENCODE_HINT}; {NOT_SHOWN}"
        ) from None
    except conninfo.Malformed as exc:
        # libpq quotes the part it could not read (a password, maybe): never shown.
        reason = _QUOTED.sub(_elided, " ".join(str(exc).split()))
        raise ConfigError(
            f"{origin} is malformed ({redact(reason, url)}); {ENCODE_HINT}; {NOT_SHOWN}"
        ) from None
    for port in str(parsed.get("port") or "").split(","):
        if port and not (port.isdigit() and 1 <= int(port) <= 65535):
            raise ConfigError(
                f"{origin} has a port that is not a number from 1 to 65535; {NOT_SHOWN}"
            )
