"""config.toml as a file: read (UTF-8 TOML, errors with line and column) and the line
that sets a key, for messages that point at it (``supervisors.config``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .errors import UserError


class ConfigError(UserError, ValueError):
    """Invalid configuration; the message names the key, the value and where it came from.

    Exit code 2 (see docs/configuration.md).
    """

    code = 2

    def __init__(self, message: str) -> None:
        super().__init__(f"configuration error: {message}")


def read_toml(path: Path) -> tuple[dict[str, Any], str] | None:
    """config.toml parsed, with its text (for line numbers); None if there is none."""
    try:
        raw = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except IsADirectoryError:
        raise ConfigError(f"{path} is a directory, not a file: move it away") from None
    except OSError as exc:
        raise ConfigError(
            f"cannot read {path}: {exc.strerror or exc}; make it readable or remove it"
        ) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ConfigError(
            f"{path} line {line}, column {column}: not UTF-8 text (byte 0x{raw[exc.start]:02x}); "
            "save the file as UTF-8"
        ) from None
    import tomllib  # here: a home without config.toml (most) skips its import at every start

    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None


_HEADER = re.compile(r"^\s*\[\[?\s*([^\[\]]+?)\s*\]\]?\s*(?:#.*)?$")


def line_of(text: str, section: str, key: str | None = None) -> int | None:
    """The line that sets ``section.key`` (or opens ``[section]``) in the TOML ``text``."""
    current: str | None = None
    assign = re.compile(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=") if key else None
    dotted = re.compile(
        rf"^\s*[\"']?{re.escape(section)}[\"']?\s*"
        + (rf"\.\s*[\"']?{re.escape(key)}[\"']?\s*=" if key else "[.=]")
    )
    for number, line in enumerate(text.splitlines(), 1):
        header = _HEADER.match(line)
        if header:
            current = header.group(1).strip().strip("\"'")
            if key is None and current == section:
                return number
            continue
        if current is None and dotted.match(line):
            return number
        if current == section and assign is not None and assign.match(line):
            return number
    return None


def at(path: Path, text: str, section: str, key: str | None = None) -> str:
    line = line_of(text, section, key)
    return f"{path} line {line}" if line else str(path)
