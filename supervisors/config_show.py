"""How configuration messages show a value: short, on one line, as it was given, and
never a value that may hold a password (a connection string); and the closest known
name to a mistyped one."""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Callable, Iterable
from typing import Literal

# Where the first bytes of a value may be shown in a message.
_SHOWN = 80
# A connection string (a URL, libpq's key=value form): it may hold a password.
_SECRET_SHAPED = re.compile(r"://|(?<![a-z0-9])(?:pg_?|ssl)?password\s*=", re.IGNORECASE)


# A variable or key whose name says it holds a secret: its value is never shown.
_SECRET_NAME = re.compile(
    r"(?:^|_)(?:TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|API_?KEY)(?:$|_)", re.IGNORECASE
)


def assigned(name: str, value: object, sep: str, from_text: bool = True) -> str:
    """``name``, ``sep`` and the value, for where a value came from (the name alone if
    the value may hold a password; ``<hidden>`` for a name that says it holds a secret)."""
    if _SECRET_NAME.search(name) and not name.upper().endswith(("_FILE", "_PATH", "_DIR")):
        return f"{name}{sep}<hidden>"
    return name if hidden(value) else f"{name}{sep}{show(value, from_text)}"


def hidden(value: object) -> bool:
    """Whether ``value`` may hold a password (a connection string): never shown, then."""
    return bool(_SECRET_SHAPED.search(value if isinstance(value, str) else toml(value)))


# A URL's scheme, at the start of the value: a "://" further in may be inside a password.
SCHEME = r"[A-Za-z][A-Za-z0-9+.\-]*://"


def described(value: str) -> str:
    """What ``value`` is, in words that quote none of it (for a message that must not echo
    it): ``a mysql:// URL`` (the scheme it starts with), ``a key=value connection string``,
    or ``a value that is not a URL``."""
    scheme = re.match(SCHEME, value)
    if scheme:
        return f"a {scheme.group(0)} URL"
    if "=" in value:
        return "a key=value connection string"
    return "a value that is not a URL"


def show(value: object, from_text: bool = True) -> str:
    """A value as it was given (text as typed, else TOML), short and on one line; one that
    may hold a password (`hidden`) only as what it is (``a mysql:// URL``)."""
    if hidden(value):
        kind = described(value) if isinstance(value, str) else "a connection string"
        return f"{kind} (not shown: it may hold a password)"
    if isinstance(value, str) and from_text:
        text = value if value.isprintable() and value.strip() == value else repr(value)
    else:
        text = toml(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


def toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {toml(v)}" for k, v in value.items()) + "}"
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return str(value)


def closest(
    name: object, known: Iterable[str], form: str, spell: Callable[[str], str] = str
) -> str:
    """``did you mean X? `` for the known name closest to a mistyped ``name`` (``form``
    spells X), or nothing when none is close."""
    if not isinstance(name, str) or len(name) > 100:
        return ""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f"did you mean {form.format(spell(close[0]))}? " if close else ""


def wanted(hint: object, from_text: bool) -> str:
    """What a key of type ``hint`` takes, in words."""
    if hint is bool:
        return "on/off or true/false" if from_text else "true or false"
    if hint is int:
        return "a whole number"
    if hint is float:
        return "a number"
    if hint is str:
        return "a string"
    origin = getattr(hint, "__origin__", None)
    if origin is list:
        return "a comma-separated list" if from_text else "a list of strings"
    if origin is Literal:
        return "one of " + ", ".join(json.dumps(a) for a in getattr(hint, "__args__", ()))
    args = getattr(hint, "__args__", ())
    if args:
        return " or ".join(wanted(a, from_text) for a in args)
    return str(hint)
