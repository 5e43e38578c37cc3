"""Files that steer memtrio, and whether someone other than this user could have written them.

Some files decide where data goes or who gets in: ``config.toml`` (the store
URL, the log path, the model), a token file, a TLS key, the runtime file of a
running ``memtrio serve`` (where ``memtrio mcp`` relays an agent's session). A
file that another user can write or replace (it, or a directory above it, is
theirs or writable by group or others) could redirect that data; a secret that
others can read is no secret.

- `directory_problem`: why another user could replace what a directory holds.
- `file_problem`: why another user could change a file (or, for a secret, read it).
- `enforce`: one warning line on stderr, once; or, under strict permissions
  (``[serve] strict_permissions = true``, ``--strict-permissions``),
  `LoosePermissions` (exit 2).

The superuser is trusted (it can change anything anyway). A directory writable
by a group is accepted when that group is the user's private group (its name is
the user's and it has no other member, the Debian and Red Hat convention), and
an ancestor writable by others is accepted when it has the sticky bit (``/tmp``):
nobody else can rename or remove what is in it. Errors: none raised here but
`LoosePermissions`; a path that cannot be examined is itself the problem.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import stat
import sys
from pathlib import Path

from .errors import UserError

# Permission bits that let group or others change a file or a directory's entries.
WRITE_BITS = 0o022
GROUP_WRITE = 0o020
# Any permission for group or others: a secret has none.
OPEN_BITS = 0o077
STRICT_HINT = "[serve] strict_permissions is on"


class LoosePermissions(UserError):
    """A file that steers memtrio that others could read or replace, under strict permissions."""

    code = 2


def _trusted(uid: int) -> bool:
    return uid in (os.geteuid(), 0)


def _private_group(gid: int) -> bool:
    """Whether ``gid`` is this user's private group (named after the user, no other member)."""
    with contextlib.suppress(KeyError, OSError):
        me = pwd.getpwuid(os.geteuid()).pw_name
        group = grp.getgrgid(gid)
        return group.gr_name == me and set(group.gr_mem) <= {me}
    return False


def _writable_by_others(info: os.stat_result) -> bool:
    mode = stat.S_IMODE(info.st_mode)
    if not mode & WRITE_BITS:
        return False
    return bool(mode & ~GROUP_WRITE & WRITE_BITS) or not _private_group(info.st_gid)


def directory_problem(path: Path) -> str | None:
    """Why someone other than this user (or root) could replace what the directory ``path``
    holds; None when nobody else can.

    Checked for ``path`` and every directory above it, both as written and with its
    symbolic links resolved: a directory (or a link on the way) that belongs to
    another user, or that group or others may write (``path`` itself always; an
    ancestor unless it has the sticky bit).
    """
    written = Path(os.path.abspath(path))
    real = Path(os.path.realpath(written))
    for top in dict.fromkeys((written, real)):
        for current in (top, *top.parents):
            try:
                info = os.lstat(current)
            except OSError as exc:
                return f"{current} cannot be examined ({exc.strerror or exc})"
            if not _trusted(info.st_uid):
                kind = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "it"
                return f"{current} belongs to another user (uid {info.st_uid}; {kind})"
            if stat.S_ISLNK(info.st_mode):
                continue
            sticky = bool(info.st_mode & stat.S_ISVTX) and current != top
            if _writable_by_others(info) and not sticky:
                mode = stat.S_IMODE(info.st_mode)
                return f"{current} is writable by group or others (mode {mode:04o})"
    return None


def file_problem(path: Path, *, secret: bool = False) -> str | None:
    """Why someone other than this user (or root) could change the file ``path`` (for a
    ``secret``, also: read it); None when nobody else can, or when there is no file.

    A symbolic link is judged by its owner, then by what it points to.
    """
    try:
        link = os.lstat(path)
        info = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{path} cannot be examined ({exc.strerror or exc})"
    if stat.S_ISLNK(link.st_mode) and not _trusted(link.st_uid):
        return f"{path} is a symbolic link that belongs to another user (uid {link.st_uid})"
    mode = stat.S_IMODE(info.st_mode)
    if not _trusted(info.st_uid):
        return f"{path} belongs to another user (uid {info.st_uid})"
    if secret and mode & OPEN_BITS:
        return f"{path} is readable or writable by group or others (mode {mode:04o})"
    if _writable_by_others(info):
        return f"{path} is writable by group or others (mode {mode:04o})"
    return None


_warned: set[str] = set()


def enforce(problem: str | None, remedy: str, *, strict: bool) -> None:
    """Nothing when ``problem`` is None. Else, under ``strict``, raise `LoosePermissions`;
    otherwise print ``memtrio: warning: PROBLEM; REMEDY`` on stderr (once per process)."""
    if problem is None:
        return
    if strict:
        raise LoosePermissions(f"{problem}; {remedy} ({STRICT_HINT})")
    if problem in _warned:
        return
    _warned.add(problem)
    print(f"memtrio: warning: {problem}; {remedy}", file=sys.stderr, flush=True)
