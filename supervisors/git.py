"""Running git on directories memtrio does not control.

Every git command memtrio runs goes through this module (a test scans the
source for any other). The directories are whatever a caller named: a
``root`` argument, a ``repo:`` scope, the server's startup directory, so an
unpacked archive or a freshly cloned project whose ``.git/config`` may name
commands to run. Git reads that file (it must, to read the repository), so:

- every configuration key that makes git run a command and that has a fixed
  name is overridden on the command line (`SAFE_CONFIG`; ``-c`` beats every
  configuration file): the fsmonitor hook, hooks, pagers, the external diff,
  credential helpers, ask-pass and ssh commands, editors, gpg;
- keys whose names a repository chooses (``diff.<driver>.textconv``,
  ``filter.<driver>.clean``/``smudge``/``process``) are never reached: only
  plumbing that does not convert content is run (``rev-parse``, ``ls-files``,
  ``merge-base``, ``diff --raw`` between two commits with ``--no-ext-diff
  --no-textconv``, ``cat-file --batch``);
- no transport may run (``GIT_ALLOW_PROTOCOL`` set to none overrides any
  ``protocol.*.allow`` of the repository), so a partial clone's lazy fetch of
  a missing object cannot start an ``ext::`` command or an ``uploadpack``;
- no ``GIT_*`` variable of our own environment is passed on (``GIT_DIR``,
  ``GIT_CONFIG_PARAMETERS``, ``GIT_EXTERNAL_DIFF``, ``GIT_SSH_COMMAND``...), so
  a command means the same whatever started the server;
- git never prompts: stdin is ``/dev/null``, it runs in a new session (no
  controlling terminal, so nothing opens ``/dev/tty``),
  ``GIT_TERMINAL_PROMPT=0`` and an empty ``GIT_ASKPASS``; and every command
  has a timeout (a configuration that includes a FIFO cannot hang a tool).

The system and user configuration files are still read: they are the user's
own, and ``safe.directory`` (which makes git refuse a repository owned by
someone else) lives there. It is never overridden.

Revisions and paths from callers are passed after ``--end-of-options`` or
``--`` (and ``code_diff`` refuses revisions starting with ``-``).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

import trio

# Seconds any git command may run before it is killed.
TIMEOUT = 60.0

# ``-c`` overrides of every exec-capable key with a fixed name.
SAFE_CONFIG = (
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.pager=cat",
    "core.askPass=",
    "core.sshCommand=",
    "core.gitProxy=",
    "core.editor=:",
    "sequence.editor=:",
    "diff.external=",
    "credential.helper=",
    "gpg.program=false",
    "log.showSignature=false",
    "protocol.allow=never",
)

SAFE_ENV = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_ASKPASS": "",  # set but empty: core.askPass is not consulted, nothing runs
    "SSH_ASKPASS": "",
    "GIT_ALLOW_PROTOCOL": "",  # no transport at all, whatever protocol.*.allow says
    "GIT_NO_LAZY_FETCH": "1",  # newer git: never fetch missing objects
    "GIT_NO_REPLACE_OBJECTS": "1",
    "GIT_OPTIONAL_LOCKS": "0",  # read-only commands do not rewrite the index
    "GIT_PAGER": "cat",
    "PAGER": "cat",
    "LC_ALL": "C",
}


class GitError(Exception):
    """A git command failed; the message is git's own first line."""


def command(args: Sequence[str]) -> list[str]:
    """The full argv of ``git args`` with the safe configuration."""
    argv = ["git", "--no-pager"]
    for item in SAFE_CONFIG:
        argv += ["-c", item]
    argv.extend(args)
    return argv


def environment() -> dict[str, str]:
    """Our environment without any ``GIT_*`` variable, plus `SAFE_ENV`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(SAFE_ENV)
    return env


def run(
    args: Sequence[str], cwd: Path | str, *, input: bytes | None = None, timeout: float = TIMEOUT
) -> subprocess.CompletedProcess[bytes]:
    """Run git synchronously in ``cwd``; stdout and stderr captured as bytes.

    Error handling: `OSError` (git missing, ``cwd`` gone) and
    `subprocess.TimeoutExpired` propagate; a non-zero exit does not raise.
    """
    return subprocess.run(
        command(args),
        cwd=cwd,
        input=input,
        stdin=subprocess.DEVNULL if input is None else None,
        capture_output=True,
        timeout=timeout,
        env=environment(),
        start_new_session=True,
    )


def git_output(args: Sequence[str], cwd: Path, timeout: float = 10.0) -> str | None:
    """Run git quietly; stdout stripped, or None when git fails, hangs or is missing."""
    try:
        proc = run(args, cwd, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    return proc.stdout.decode("utf-8", "surrogateescape").strip()


async def git(
    args: Sequence[str],
    cwd: Path | str,
    *,
    check: bool = True,
    input: bytes | None = None,
    timeout: float = TIMEOUT,
) -> bytes:
    """Run git in ``cwd`` from trio and return its stdout (bytes).

    Error handling: raises `GitError` when git cannot start, exceeds
    ``timeout`` (it is killed), or (with ``check``) exits non-zero.
    Cancellation: the git process is killed.
    """
    try:
        with trio.fail_after(timeout):
            proc = await trio.run_process(
                command(args),
                cwd=str(cwd),
                stdin=b"" if input is None else input,
                capture_stdout=True,
                capture_stderr=True,
                check=False,
                env=environment(),
                start_new_session=True,
            )
    except OSError as exc:
        raise GitError(f"cannot run git: {exc}") from None
    except trio.TooSlowError:
        raise GitError(f"git {args[0]} did not finish within {timeout:g} s") from None
    if check and proc.returncode != 0:
        message = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(
            message[0] if message else f"git {args[0]} failed with status {proc.returncode}"
        )
    return proc.stdout
