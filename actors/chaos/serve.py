"""A real ``memtrio serve`` process for the transport scenarios.

`start_serve` spawns ``python -m memtrio.supervisors.cli serve --transport T
--bind 127.0.0.1:0`` with an isolated home and waits for its one listening
line (which names the URL, with the port the system chose) and for its runtime
file (``run/serve.json``: the attach endpoint, a TCP listener guarded by the
proof of ``actors.net.proof``, which the scenarios also use as a TCP transport).
"""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import trio

from ..net import runtime
from .client import chaos_env

LISTENING = re.compile(r"memtrio serve: listening on (\S+) \(pid (\d+)\)")
START_TIMEOUT = 60.0
POLL = 0.02


class ServeFailed(Exception):
    """``memtrio serve`` exited or did not listen in time."""


class ServeProcess:
    """One running ``memtrio serve`` (its stderr in a file of its home)."""

    def __init__(self, process: trio.Process, home: Path, stderr_path: Path) -> None:
        self.process = process
        self.home = home
        self.stderr_path = stderr_path
        self.url = ""
        self.attach: runtime.Runtime | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def stderr_text(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""

    async def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        """Wait for the listening line and for the runtime file naming this process.

        Error handling: raises `ServeFailed` (with the end of stderr) when the
        process exits first or ``timeout`` passes.
        """
        with trio.move_on_after(timeout):
            while True:
                if not self.alive:
                    raise ServeFailed(
                        f"memtrio serve exited {self.process.returncode} before listening: "
                        + self.stderr_text()[-400:].strip()
                    )
                found = LISTENING.search(self.stderr_text())
                attach, _ = runtime.read(self.home)
                if found and attach is not None and attach.pid == self.pid:
                    self.url, self.attach = found.group(1), attach
                    return
                await trio.sleep(POLL)
        raise ServeFailed(f"memtrio serve did not listen within {timeout:g} s")

    def kill9(self) -> None:
        if self.process.returncode is None:
            try:
                os.kill(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    async def terminate(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (a graceful stop) and the exit code; None when it did not exit in time
        (then it is killed)."""
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
        with trio.move_on_after(timeout):
            return await self.process.wait()
        self.kill9()
        await self.process.wait()
        return None


def descriptor_limit(nofile: int) -> Callable[[], None]:
    """A ``preexec_fn`` setting the child's ``RLIMIT_NOFILE`` (soft and hard) to ``nofile``."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    return limit


async def start_serve(
    home: Path,
    transport: str,
    env: Mapping[str, str] | None = None,
    *,
    nofile: int | None = None,
) -> ServeProcess:
    """Spawn ``memtrio serve --transport TRANSPORT`` on a free loopback port (not yet ready:
    see `ServeProcess.wait_ready`); ``nofile``: its descriptor limit (soft and hard)."""
    home.mkdir(parents=True, exist_ok=True)
    stderr_path = home / f"serve-stderr-{len(list(home.glob('serve-stderr-*')))}.txt"
    command = [sys.executable, "-m", "memtrio.supervisors.cli", "serve"]
    command += ["--transport", transport, "--bind", "127.0.0.1:0"]
    with open(stderr_path, "ab") as errlog:
        process = await trio.lowlevel.open_process(
            command,
            stdin=subprocess.DEVNULL,
            stdout=errlog,
            stderr=errlog,
            env=chaos_env(home, env),
            cwd=str(home),
            preexec_fn=None if nofile is None else descriptor_limit(nofile),
        )
    return ServeProcess(process, home, stderr_path)
