"""The parser worker process: ``python -m memtrio.actors.code.worker``.

Reads frames of `ParseJob` batches on stdin and answers each job with one
`ParseResult` frame, as soon as it is done, on a private copy of stdout; file
descriptor 1 is pointed at stderr first, so a stray print (from us or a
library) can never corrupt the protocol stream. Exits when stdin closes.

A file is read from its checkout without following any symlink, and only
when it is still the file the server checked (`files.read_file`). Error
handling: a file that cannot be read or parsed is answered as skipped with
the reason; anything that kills the process (a parser crash, the
``code.parse`` fault point with ``exit``) is noticed by the server, which
reports that file and starts a new worker.
"""

from __future__ import annotations

import os
import sys
from typing import BinaryIO

from ...supervisors import faults
from .extract import MAX_BYTES, Skipped, check_content, outline
from .files import Unsafe, read_file
from .wire import CHANGED, READY, ParseJob, ParseResult, frame, job_decoder, result_encoder


def handle(job: ParseJob) -> ParseResult:
    if faults.ACTIVE:
        faults.hit_sync("code.parse")
        faults.hit_sync("code.parse:" + job.path.rsplit("/", 1)[-1])
    size = mtime_ns = -1
    try:
        if job.data is not None:
            data = job.data
        elif not job.root:
            return ParseResult(skipped="no checkout given to read the file from")
        else:
            expect = (job.dev, job.ino) if job.ino >= 0 else None
            try:
                content, st = read_file(job.root, job.path, MAX_BYTES, expect)
            except Unsafe as exc:
                return ParseResult(skipped=f"{CHANGED} ({exc})")
            size, mtime_ns = st.st_size, st.st_mtime_ns
            if content is None:
                return ParseResult(skipped="larger than 1 MiB", size=size, mtime_ns=mtime_ns)
            data = content
        check_content(job.path, data)
        return ParseResult(outline=outline(job.language, data), size=size, mtime_ns=mtime_ns)
    except Skipped as exc:
        return ParseResult(skipped=str(exc), size=size, mtime_ns=mtime_ns)
    except OSError as exc:
        return ParseResult(skipped=f"cannot read: {exc.strerror or exc}")
    except Exception as exc:  # noqa: BLE001 - one bad file must not stop the worker
        return ParseResult(
            skipped=f"parser error: {type(exc).__name__}: {exc}", size=size, mtime_ns=mtime_ns
        )


def _read_exactly(stream: BinaryIO, n: int) -> bytes | None:
    chunks = []
    while n:
        chunk = stream.read(n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def serve(inp: BinaryIO, out: BinaryIO) -> None:
    while True:
        header = _read_exactly(inp, 4)
        if header is None:
            return
        body = _read_exactly(inp, int.from_bytes(header, "big"))
        if body is None:
            return
        for job in job_decoder.decode(body):
            out.write(frame(result_encoder.encode(handle(job))))
            out.flush()


def main() -> None:
    faults.configure_from_env()
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        out.write(frame(READY))  # imports done: the server may send jobs
        out.flush()
        serve(sys.stdin.buffer, out)
    except (BrokenPipeError, KeyboardInterrupt):
        pass


if __name__ == "__main__":
    main()
