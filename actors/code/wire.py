"""The pipe protocol between the server and a parser worker process.

Each message is a 4-byte big-endian length followed by a msgpack body. The
server sends a batch of `ParseJob`s in one frame (one write, one wake-up of the
worker for several files); the worker answers each job with its own
`ParseResult` frame, in order, as soon as it is done, so the server knows
which file a worker was on when it crashed or hung. Bodies are built and read
with one module-level encoder/decoder per type.
"""

from __future__ import annotations

import msgspec

from .symbols import Outline

MAX_FRAME = 64 * 1024 * 1024
READY = b"ready"  # the first frame a worker sends, once its imports are done
# The reason given for a file that changed between the server's check and the
# worker's read (the server parses it again at the next refresh).
CHANGED = "changed while being read"


class ParseJob(msgspec.Struct, array_like=True, frozen=True):
    """Outline ``data`` when given (``path`` then only names the file, e.g. a
    blob of a Git revision), else the file ``path`` of the checkout ``root``,
    read without following symlinks and only if it is still the file
    (``dev``, ``ino``) the server checked (see `files`)."""

    path: str
    language: str
    data: bytes | None = None
    root: str = ""
    dev: int = -1
    ino: int = -1


class ParseResult(msgspec.Struct, array_like=True, frozen=True):
    outline: Outline | None = None
    skipped: str = ""  # the reason the file was not indexed, when outline is None
    size: int = -1
    mtime_ns: int = -1


job_encoder = msgspec.msgpack.Encoder()
job_decoder = msgspec.msgpack.Decoder(list[ParseJob])
result_encoder = msgspec.msgpack.Encoder()
result_decoder = msgspec.msgpack.Decoder(ParseResult)


def frame(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body
