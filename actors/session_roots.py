"""Where a session's repository comes from (docs/transports.md, "Per-session repository").

- stdio embedded: the server's directory (the `SessionState` starts with it,
  ``root_source`` ``cwd``);
- the initialize parameter ``_meta["memtrio/root"]`` (an absolute path or a
  ``file://`` URI), on any transport: it wins (`root_param`, ``initialize``);
- otherwise, for a session that starts without a repository and whose client
  declared the ``roots`` capability: once the client sends
  ``notifications/initialized`` the session asks it ``roots/list``
  (`request_roots`), and asks again on ``notifications/roots/list_changed``; the
  answer (`take_response`) names the repository: the first ``file://`` root that
  lies in a Git checkout (``roots``).

A network session chooses only within its grant (``supervisors.grants``, what
its token opens): a repository outside it is refused at ``initialize``
(`root_param`), and roots outside it are passed over (`first_checkout`); when
they all are, the session keeps the refusal and its tool calls answer it. The
path is checked as given, then resolved (symlinks), and so is the repository's
common Git directory (its memory scope), so neither ``..``, a symlink nor a
linked worktree leads out of the grant.

A session without a repository writes only ``global``. A tool call waits for an
awaited ``roots/list`` answer (`wait_for_root`), at most `ROOTS_WAIT` seconds after
the request was sent; the root stays in the `SessionState`, so a restarted Session
actor keeps it.

Error handling: a bad ``_meta["memtrio/root"]`` raises `ValueError` naming the
field (the session answers -32602 and keeps serving); an error answer or a
malformed one to ``roots/list`` leaves the session without a repository, logged.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import unquote, urlsplit

import msgspec
import trio

from ..protocol import jsonrpc, mcp
from ..protocol.messages import Outbound
from ..supervisors import trace
from ..supervisors.git import git_output
from ..supervisors.grants import Grant, OutsideGrant, check_path, check_repository, resolved_path
from ..supervisors.supervisor import Mailbox
from .session_state import SessionState

ROOT_META = "memtrio/root"
_FIELD = '_meta["memtrio/root"]'
ROOTS_LIST = "roots/list"
# A tool call waits this long (seconds after the roots/list request) for the answer,
# then proceeds with the repository the session has (none, at first).
ROOTS_WAIT = 5.0
# At most this many roots of one answer are tried (each may run git).
MAX_ROOTS_TRIED = 16


def file_uri_path(uri: str) -> Path | None:
    """The local absolute path of a ``file://`` URI, or None (another scheme, a remote host)."""
    parts = urlsplit(uri)
    if parts.scheme.lower() != "file" or parts.netloc not in ("", "localhost"):
        return None
    path = unquote(parts.path)
    if not os.path.isabs(path) or "\0" in path:
        return None
    return Path(path)


def granted_root(path: str, grant: Grant | None, what: str) -> Path:
    """``path`` (absolute, an existing directory) resolved, once it and its repository's
    common Git directory are found inside ``grant`` (blocking: runs git).

    Error handling: raises `OutsideGrant` naming ``what`` (never the resolved path).
    """
    real = resolved_path(grant, path, what)
    check_repository(grant, real, what)
    return Path(real)


def root_param(meta: dict[str, object], grant: Grant | None = None) -> Path | None:
    """The directory named by ``_meta["memtrio/root"]`` (resolved), None when absent.

    Blocking (file system checks): call it off the event loop.

    Error handling: a non-string, a relative path, a URI that is not a local
    ``file://`` one, a path outside ``grant`` (checked before the path is touched)
    or a path that is not an existing directory raises `ValueError` with a message
    naming the field.
    """
    if ROOT_META not in meta:
        return None
    value = meta[ROOT_META]
    if not isinstance(value, str):
        raise ValueError(
            f"{_FIELD} must be a string (an absolute path or a file:// URI), "
            f"not {type(value).__name__}"
        )
    shown = repr(value) if len(value) <= 200 else repr(value[:200]) + "..."
    text = value
    if value.lower().startswith("file:"):
        path = file_uri_path(value)
        if path is None:
            raise ValueError(f"{_FIELD} {shown} is not a local file:// URI of an absolute path")
        text = str(path)
    if "\0" in text or not os.path.isabs(text):
        raise ValueError(f"{_FIELD} must be an absolute path or a file:// URI, not {shown}")
    try:
        check_path(grant, text, f"{_FIELD} {shown}")
        if not os.path.isdir(text):
            raise ValueError(f"{_FIELD} {shown} is not an existing directory")
        return granted_root(text, grant, f"{_FIELD} {shown}")
    except OutsideGrant as exc:
        raise ValueError(str(exc)) from None


def first_checkout(
    uris: Sequence[str], grant: Grant | None = None
) -> tuple[Path | None, str | None]:
    """The first ``file://`` root that lies in a Git checkout and in ``grant`` (resolved),
    or None; with why a root was passed over for being outside the grant (None if none was).

    Blocking (runs git): call it off the event loop.
    """
    tried = 0
    refused: str | None = None
    for uri in uris:
        path = file_uri_path(uri)
        if path is None:
            continue
        tried += 1
        if tried > MAX_ROOTS_TRIED:
            break
        what = f"the MCP root {uri[:200]!r}"
        try:
            check_path(grant, str(path), what)
            if path.is_dir() and git_output(["rev-parse", "--show-toplevel"], path) is not None:
                return granted_root(str(path), grant, what), None
        except OutsideGrant as exc:
            refused = refused or str(exc)
    return None, refused


def wants_roots(state: SessionState) -> bool:
    """Whether the session takes its repository from the client's roots."""
    return state.roots_capable and state.root_source in ("none", "roots")


async def request_roots(state: SessionState, outbox: Mailbox[Outbound]) -> None:
    """Send the client a ``roots/list`` request; a tool call now waits for its answer.

    A newer request supersedes an older one still awaited (its answer, when it
    comes, is ignored as stray).
    """
    state.requests_sent += 1
    rid = f"memtrio-roots-{state.requests_sent}"
    for old in [k for k, method in state.server_requests.items() if method == ROOTS_LIST]:
        del state.server_requests[old]
    state.server_requests[rid] = ROOTS_LIST
    if state.roots_settled.is_set():
        state.roots_settled = trio.Event()
    state.roots_deadline = trio.current_time() + ROOTS_WAIT
    trace.event(state.name, "roots_requested", request_id=rid)
    await outbox.send(Outbound(jsonrpc.request_line(rid, ROOTS_LIST)))


async def take_response(state: SessionState, msg: jsonrpc.Response) -> bool:
    """Handle the client's answer to a request of ours; False for a stray response."""
    rid = msg.id
    method = state.server_requests.get(rid) if isinstance(rid, str) else None
    if method is None:
        return False
    assert isinstance(rid, str)
    if method == ROOTS_LIST:
        await _take_roots(state, rid, msg)
    # Forgotten only once handled: a session stopped meanwhile handles it again.
    state.server_requests.pop(rid, None)
    return True


async def _take_roots(state: SessionState, rid: str, msg: jsonrpc.Response) -> None:
    root: Path | None = None
    refused: str | None = None
    if msg.error is not None or msg.result is None:
        try:
            error = mcp.error_object.decode(msg.error) if msg.error is not None else None
            why = f"{error.code}: {error.message}" if error is not None else "no result"
        except msgspec.DecodeError:
            why = "a malformed error"
        trace.warning(state.name, "roots_failed", request_id=rid, error=why[:300])
    else:
        try:
            roots = mcp.list_roots_result.decode(msg.result).roots
        except msgspec.DecodeError as exc:
            trace.warning(state.name, "roots_malformed", request_id=rid, error=str(exc)[:300])
        else:
            uris = [r.uri for r in roots]
            root, refused = await trio.to_thread.run_sync(first_checkout, uris, state.grant)
    state.root = root
    state.root_source = "roots"
    state.root_refusal = refused if root is None else None
    if state.root_refusal is not None:
        trace.warning(state.name, "root_refused", request_id=rid, why=state.root_refusal[:300])
    trace.event(
        state.name,
        "session_root",
        root=str(root) if root is not None else None,
        source="roots",
        request_id=rid,
    )
    state.roots_settled.set()


async def wait_for_root(state: SessionState) -> None:
    """Wait for an awaited ``roots/list`` answer, until its deadline (`ROOTS_WAIT`)."""
    settled = state.roots_settled
    if settled.is_set():
        return
    with trio.move_on_at(state.roots_deadline):
        await settled.wait()
    if not settled.is_set():
        trace.warning(
            state.name,
            "roots_wait_expired",
            waited=ROOTS_WAIT,
            root=str(state.root) if state.root is not None else None,
            detail="no roots/list answer in time: the call proceeds with the session's current "
            "repository (none: it writes only global)",
        )
