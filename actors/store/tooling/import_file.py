"""Reading a file to import: a regular file, line by line, each line bounded.

Both import formats (memtrio's export, the reference server's memory.jsonl)
are read through `open_import` and `numbered_lines`, twice: once to check
every record against the tools' limits, then again to write them in one
transaction. Memory stays bounded by the longest legal line whatever the
file holds:

- only a regular file is read (a directory, FIFO or device is refused without
  blocking); ``-`` (stdin) is first copied to a temporary file;
- a line longer than `MAX_LINE_BYTES` is refused after reading that many
  bytes of it, never buffered whole.
"""

from __future__ import annotations

import codecs
import fcntl
import os
import re
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import BinaryIO, TypeVar

import msgspec

from ....protocol.validation import describe_validation_error

T = TypeVar("T")

# The default ``[server] request_limit``: no tool call carries a longer record,
# and the largest record within the tools' limits (a memory of 1,000,000
# characters with 100 entities and relations, a vector of 256 windows) fits.
MAX_LINE_BYTES = 16 * 1024 * 1024
COPY_CHUNK = 1 << 20


class ImportRefused(ValueError):
    """An import file that is refused as a whole; the message names the line and the rule."""


def printable(text: str, limit: int = 300) -> str:
    """``text`` on one line: control characters and unpaired surrogates escaped, cut at ``limit``."""
    out = []
    for ch in text[: limit + 1]:
        code = ord(ch)
        if code < 32 or code == 127 or 0xD800 <= code <= 0xDFFF or ch in "\u2028\u2029\x85":
            out.append(f"\\x{code:02x}" if code < 256 else f"\\u{code:04x}")
        else:
            out.append(ch)
    shown = "".join(out)
    return shown if len(text) <= limit else shown[:limit] + "..."


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "not a regular file"


@contextmanager
def open_import(name: str) -> Iterator[BinaryIO]:
    """The file ``name`` (``-``: stdin, copied to a temporary file), open for binary reading.

    Error handling: a file that cannot be opened, or is not a regular file,
    raises `ImportRefused` ("cannot read: ..."; the caller names the file).
    Opening never blocks: a FIFO is opened non-blocking and refused.
    """
    if name == "-":
        stdin = sys.stdin.buffer if sys.stdin is not None else None
        if stdin is None:
            raise ImportRefused("cannot read: stdin is closed")
        with tempfile.TemporaryFile(prefix="memtrio-import-") as spool:
            try:
                shutil.copyfileobj(stdin, spool, COPY_CHUNK)
            except OSError as exc:
                raise ImportRefused(f"cannot read: {exc.strerror or exc}") from None
            spool.seek(0)
            yield spool
        return
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise ImportRefused(f"cannot read: {exc.strerror or exc}") from None
    except ValueError:  # a NUL byte in the name
        raise ImportRefused("cannot read: not a valid file name") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            hint = "" if stat.S_ISDIR(mode) else " (to read a pipe, give `-` and pipe it to stdin)"
            raise ImportRefused(f"cannot read: it is {_kind(mode)}, not a regular file{hint}")
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
        file = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with file:
        yield file


def count_lines(file: BinaryIO) -> int:
    """How many lines ``file`` holds (blank ones too: a progress's total), read from its start."""
    file.seek(0)
    count, last = 0, b""
    for chunk in iter(lambda: file.read(1 << 20), b""):
        count += chunk.count(b"\n")
        last = chunk
    file.seek(0)
    return count + (1 if last and not last.endswith(b"\n") else 0)


def numbered_lines(file: BinaryIO, limit: int = MAX_LINE_BYTES) -> Iterator[tuple[int, bytes]]:
    """Every line of ``file`` from its start, numbered from 1, without its newline.

    Blank lines are skipped (their numbers counted). Error handling: a line
    longer than ``limit`` bytes raises `ImportRefused` after ``limit + 1``
    bytes were read; a read error raises `ImportRefused` too.
    """
    file.seek(0)
    number = 0
    while True:
        try:
            line = file.readline(limit + 2)  # the line, its newline, one byte more
        except OSError as exc:
            raise ImportRefused(f"line {number + 1}: cannot read: {exc.strerror or exc}") from None
        if not line:
            return
        number += 1
        if line.endswith(b"\n"):
            line = line[:-1]
        if len(line) > limit:
            raise ImportRefused(
                f"line {number}: longer than {limit:,} bytes, the most a record within the tools' limits takes"
            )
        if line and not line.isspace():
            yield number, line


class _Type(msgspec.Struct):
    type: str | None = None


_type_decoder = msgspec.json.Decoder(_Type)
_any_decoder = msgspec.json.Decoder()
_NON_NUMBER = re.compile(rb"[:\[,]\s*-?(?:NaN|Infinity)\b")
_ESCAPE = re.compile(rb"(?<!\\)(?:\\\\)*\\u([dD][89a-fA-F][0-9a-fA-F]{2})")


def decode_line(decoder: msgspec.json.Decoder[T], number: int, line: bytes) -> T:
    """One line decoded with its typed ``decoder``.

    Error handling: anything the decoder refuses raises `ImportRefused`
    naming the line and why: not UTF-8, not JSON, nested too deeply, or a
    field of the wrong type or out of range (with msgspec's path, e.g.
    ``Expected `array`, got `str` - at `$.scopes```).
    """
    _no_bom(number, line)
    try:
        return decoder.decode(line)
    except msgspec.ValidationError as exc:
        raise ImportRefused(
            f"line {number}: malformed {_record_type(line)}: "
            f"{printable(describe_validation_error(exc, decoder.type, noun='field'))}"
        ) from None
    except msgspec.DecodeError as exc:
        raise ImportRefused(f"line {number}: {_not_json(line, exc)}") from None
    except RecursionError:
        raise ImportRefused(f"line {number}: JSON nested too deeply") from None


def record_type(line: bytes) -> str | None:
    """The ``type`` of a JSON object line, or None (not JSON, not an object, no string ``type``)."""
    try:
        return _type_decoder.decode(line).type
    except (msgspec.DecodeError, RecursionError):  # DecodeError includes ValidationError
        return None


def require_json(number: int, line: bytes) -> None:
    """Raise `ImportRefused` saying why, unless ``line`` is JSON (of any shape)."""
    _no_bom(number, line)
    # A typed decoder stops at the first value of the wrong type, before it has
    # seen the whole line ('{"type": 0' is refused as a type, not as truncated
    # JSON): another shape is checked with the untyped decoder, to the end.
    for decoder in (_type_decoder, _any_decoder):
        try:
            decoder.decode(line)
        except msgspec.ValidationError:
            continue  # JSON of another shape so far: read it whole
        except msgspec.DecodeError as exc:
            raise ImportRefused(f"line {number}: {_not_json(line, exc)}") from None
        except RecursionError:
            raise ImportRefused(f"line {number}: JSON nested too deeply") from None
        return


def _no_bom(number: int, line: bytes) -> None:
    if line.startswith(codecs.BOM_UTF8):
        raise ImportRefused(
            f"line {number}: starts with a byte-order mark (U+FEFF); save the file as UTF-8 without one"
        )


def _record_type(line: bytes) -> str:
    kind = record_type(line)
    return f"{printable(kind, 40)} record" if kind else "record"


def _not_json(line: bytes, exc: msgspec.DecodeError) -> str:
    nul = line.find(b"\x00")
    if nul >= 0:
        return f"not JSON: a NUL byte at byte {nul + 1:,} (a binary file?)"
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as bad:
        return f"not UTF-8 text: byte 0x{line[bad.start]:02x} at byte {bad.start + 1:,}"
    if _unpaired_surrogate(line):
        return (
            "a string holds an unpaired UTF-16 surrogate (a \\udXXX escape), which is not text "
            "and cannot be stored; fix that string in the file"
        )
    if _NON_NUMBER.search(line):
        return f"not JSON: NaN and Infinity are not JSON numbers ({printable(str(exc))})"
    return f"not JSON ({printable(str(exc))})"


def _unpaired_surrogate(line: bytes) -> bool:
    expect_low_at = -1
    for match in _ESCAPE.finditer(line):
        code = int(match.group(1), 16)
        start = match.end() - 6  # where this \uXXXX begins
        if code >= 0xDC00:  # a low surrogate: only right after a high one
            if start != expect_low_at:
                return True
            expect_low_at = -1
        else:
            if expect_low_at != -1:
                return True  # a high surrogate not followed by a low one
            expect_low_at = match.end()
    return expect_low_at != -1
