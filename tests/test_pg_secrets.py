"""A PostgreSQL store's password reaches no output, and a missing driver is one clear line.

Passwords hold what breaks naive redaction (``@ : / % # ?``, quotes, blanks), raw
or percent-encoded, in the URL's userinfo, in its query (``password``,
``sslpassword``), in libpq's key=value form, and in URLs memtrio refuses
(``mysql://``, ``postgresql+psycopg://``, a ``[::1`` without its ``]``). Every
path that shows a store or a driver's error is checked: configuration errors,
the store's errors (what libpq says, quoted), doctor, migrate, the CLI's last
line, the trace log, the tools' results.
"""

from __future__ import annotations

import contextlib
import io
import json
import string
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from urllib.parse import quote, unquote

import psycopg
import pytest
import stores
import trio
import zygote
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from launch import server_env
from memtrio.actors.chaos.client import (
    INITIALIZED,
    initialize_params,
    request_message,
    tool_call_params,
)
from memtrio.actors.store import backends, dsn
from memtrio.actors.store.pg import conn as pg_conn
from memtrio.actors.store.pg import pool
from memtrio.supervisors import cli, config, trace
from memtrio.supervisors.commands import load_config
from psycopg.conninfo import conninfo_to_dict

# What breaks naive redaction, and text that is not plain: a tab, a NUL, a byte not UTF-8.
SPECIALS = "@:/%#?'\" &=\\[]é\t\x00\udcff"
passwords = st.text(
    alphabet=string.ascii_letters + string.digits + SPECIALS, min_size=4, max_size=16
).map(lambda s: "Zq9" + s)  # a prefix no message holds by itself


def forms(pw: str) -> list[str]:
    """``pw`` in every way a user may hand memtrio a connection string."""
    enc = quote(pw, safe="", errors="surrogateescape")
    escaped = pw.replace("\\", "\\\\").replace("'", "\\'")
    return [
        f"postgresql://team:{pw}@db.internal:5432/memtrio",
        f"postgresql://team:{enc}@db.internal/memtrio",
        f"postgres://team:{enc}@db.internal/memtrio?sslmode=require",
        f"postgresql://team@db.internal/memtrio?password={enc}&sslmode=require",
        f"postgresql://team@db.internal/memtrio?sslpassword={enc}",
        f"postgresql://team@db.internal/memtrio?password={pw}",
        f"postgresql://team:{pw}@[::1",
        f"postgresql://team:{enc}@db.internal:99999/memtrio",
        f"host=db.internal password='{escaped}' dbname=memtrio",
        f"mysql://team:{pw}@db.internal/memtrio",
        f"postgresql+psycopg://team:{pw}@db.internal/memtrio",
        f"postgresql:///memtrio?host=db.internal&password={enc}",
        f"postgresql://team:{enc}@db.internal/memtrio?password={enc}",
        f"host=db.internal  password = '{escaped}'  dbname=memtrio",
        f"  postgresql://team:{enc}@db.internal/memtrio",
        f"postgresql://team:{enc}@db.internal,db2.internal:5433/memtrio",
        f"PostgreSQL://team:{enc}@db.internal/memtrio",
    ]


def leaks(text: str, pw: str) -> list[str]:
    """The forms of ``pw`` that ``text`` shows (its prefix alone is a leak too)."""
    shown = {
        pw,
        quote(pw, safe="", errors="surrogateescape"),
        unquote(pw, errors="surrogateescape"),
        json.dumps(pw)[1:-1],
        repr(pw)[1:-1],
        pw[:3],
    }
    return sorted(form for form in shown if len(form) >= 3 and form in text)


@contextlib.contextmanager
def fresh_secrets(log: Path) -> Iterator[None]:
    """The process's registered passwords and trace log as they were, after the block."""
    known, scrub = dsn._known, trace.LOG.scrub
    trace.LOG.configure(log, "debug", "off")
    try:
        yield
    finally:
        trace.LOG.configure(None)
        dsn._known, trace.LOG.scrub = known, scrub


def driver_error(url: str, pw: str) -> psycopg.Error:
    """What libpq says about ``url``: it quotes the URL, names a host made of the password,
    and may show the password as it decoded it from the URL."""
    try:
        decoded = conninfo_to_dict(url).get("password") or pw
    except (psycopg.Error, UnicodeError):
        decoded = pw
    return psycopg.OperationalError(
        f'invalid connection string "{url}": failed to resolve host "{pw}@db.internal" ({decoded})'
    )


def every_message(url: str, pw: str, log: Path) -> str:
    """All the text memtrio's paths produce about ``url``: config, store and CLI errors,
    ``doctor``'s location, the trace log."""
    out: list[str] = []
    for env, overrides in (({"MEMTRIO_STORE": url}, None), ({}, {"store": {"url": url}})):
        try:
            config.load(log.parent, env=env, overrides=overrides)
        except config.ConfigError as exc:
            out.append(str(exc))
    try:
        backends.check_url(url, "--store")  # registers the URL's passwords, as opening does
    except config.ConfigError as exc:
        out.append(str(exc))
    out.append(backends.load(url).shown)
    out.append(str(pool.unavailable(driver_error(url, pw), url)))
    original = driver_error(url, pw)
    out.append(str(pg_conn._as_store_error(original, url)))
    out.append(str(original))  # chained: tracebacks in the log show it
    trace.event("store", "failed", url=url, error=str(driver_error(url, pw)))
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        cli.report(RuntimeError(f"cannot open {url} (password {pw})"))
    out.append(err.getvalue())
    out.append(log.read_text(encoding="utf-8"))
    return "\n".join(out)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pw=passwords)
@example(pw="Zq90://")  # once named as the scheme of a key=value string holding it
@example(pw="Zq9\\password=wMgF@")  # a keyword's value overlapping the user part: half hidden
def test_no_generated_password_reaches_any_message_about_its_store(pw: str) -> None:
    with contextlib.ExitStack() as stack:
        base = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        for i, url in enumerate(forms(pw)):
            log = base / f"{i}.log"
            with fresh_secrets(log):
                text = every_message(url, pw, log)
            assert not leaks(text, pw), (url, leaks(text, pw), text)


def test_passwords_that_overlap_in_a_message_are_both_hidden_whole() -> None:
    """A URL whose password holds ``password=``: the user part's password and the keyword's
    value (which runs on to the end of the URL) overlap. Replaced one after the other, the
    longer one first, the first hid the second's end and left its start (``Zq9\\``) shown."""
    url = "postgresql://team:Zq9\\password=wMgF@@db.internal:5432/memtrio"
    shown = dsn.redact(f'cannot open {url} (invalid connection string "{url}")', url)
    assert "Zq9" not in shown and "wMgF" not in shown, shown
    assert shown.startswith("cannot open postgresql://team:***"), shown
    # Overlapping, touching and repeated secrets: one mask a stretch, the rest kept.
    assert dsn._masked("keep abcdef keep abc.", ["abc", "cdef"]) == "keep *** keep ***."


def test_a_url_given_with_blanks_around_it_still_has_its_password_hidden() -> None:
    """``MEMTRIO_STORE=" postgresql://team:…@host/db"`` is refused before any connection,
    but a message that quotes the decoded password beside it (as libpq's do) hides it too:
    the user part is found after the blanks."""
    pw = 'Zq9"Y"2\\'
    url = f"  postgresql://team:{quote(pw, safe='')}@db.internal/memtrio"
    shown = dsn.redact(f'failed to resolve host "{pw}@db.internal" ({pw})', url)
    assert not leaks(shown, pw), shown


def test_a_store_url_libpq_would_misread_is_refused_as_configuration() -> None:
    # A raw "@" in the password: libpq reads the rest as the host, and resolves it (DNS).
    for url, what in [
        ("postgresql://team:p@ss@db.internal/memtrio", "raw '@' or '/'"),
        ("postgresql://team:pa/ss@db.internal/memtrio", "raw '@' or '/'"),
        ("postgresql://team:s3cret@[::1", 'matching "]"'),
        ("postgresql://team:s3 cret@db.internal/memtrio", "spaces"),
        ("postgresql://team:s3cret@db.internal:99999/memtrio", "1 to 65535"),
        ("mysql://team:s3cret@db.internal/memtrio", "a mysql:// URL"),
    ]:
        with pytest.raises(config.ConfigError) as refused:
            backends.check_url(url, "--store")
        message = str(refused.value)
        assert refused.value.code == 2 and what in message, message
        assert "s3cret" not in message and "ss@" not in message and "pa/" not in message
    backends.check_url("postgresql://team:p%40ss@[::1]:5432/memtrio?sslmode=require", "--store")


def test_store_flag_is_kept_beside_the_store_tuning_flags(tmp_path: Path) -> None:
    # `mcp --store URL --cache-size-mb 8` used the home's SQLite file: the tuning flags
    # replaced the whole [store] override, URL included.
    args = cli.build_parser().parse_args(
        ["stats", "--home", str(tmp_path), "--store", "postgresql://team@db.internal/memtrio"]
    )
    args.store_cache_size_mb = "16"
    cfg, _ = load_config(args)
    assert cfg.store.url == "postgresql://team@db.internal/memtrio"
    assert cfg.store.cache_size_mb == 16


# --- the command line, as a user runs it -------------------------------------------------

SECRET = "Zq9s3cr@t:/%#?'\" x"
ENC = quote(SECRET, safe="")


async def run_all(
    runs: Sequence[tuple[Sequence[str], dict[str, str]]], cwd: Path
) -> list[subprocess.CompletedProcess[bytes]]:
    """Each ``(args, env)`` as ``memtrio ARGS``, a few at a time (each ends before this returns)."""
    limit = trio.CapacityLimiter(3)
    done: list[subprocess.CompletedProcess[bytes] | None] = [None] * len(runs)

    async def one(i: int, args: Sequence[str], env: dict[str, str]) -> None:
        async with limit:
            with trio.fail_after(120):
                done[i] = await trio.run_process(
                    zygote.command(args),
                    env=env,
                    cwd=cwd,
                    stdin=b"",
                    capture_stdout=True,
                    capture_stderr=True,
                    check=False,
                )

    async with trio.open_nursery() as nursery:
        for i, (args, env) in enumerate(runs):
            nursery.start_soon(one, i, args, env)
    return [d for d in done if d is not None]


HOSTILE = [
    f"postgresql://team:{SECRET.replace(' ', '')}@db.internal/memtrio",
    f"postgresql://team:{ENC}@[::1",
    f"postgresql://team:{ENC}@db.internal:99999/memtrio",
    f"postgresql://team@db.internal/memtrio?password={ENC}&{ENC}",
    f"host=db.internal password='{SECRET}'",
    f"mysql://team:{SECRET}@db.internal/memtrio",
    f"postgresql+psycopg://team:{ENC}@db.internal/memtrio",
]


async def test_a_hostile_store_url_is_one_line_exit_2_that_never_shows_its_password(
    home: Path,
) -> None:
    (home / "config.toml").write_text(f"[store]\nurl = {json.dumps(HOSTILE[5])}\n")
    plain = server_env(home)
    runs: list[tuple[Sequence[str], dict[str, str]]] = [
        (["doctor", "--store", url, "--home", str(home / "other")], plain) for url in HOSTILE
    ]
    runs += [
        (["stats"], plain),  # config.toml's [store] url
        (["mcp", "--no-attach"], {**plain, "MEMTRIO_STORE": HOSTILE[1]}),  # over config.toml
        (["migrate", "--to", HOSTILE[0], "--home", str(home / "other")], plain),
        (["migrate", "--from", HOSTILE[3], "--home", str(home / "other")], plain),
    ]
    for done, (args, _) in zip(await run_all(runs, home), runs, strict=True):
        out, err = done.stdout.decode(), done.stderr.decode()
        assert done.returncode == 2, (args, out, err)
        assert len(err.strip().splitlines()) == 1 and "configuration error" in err, err
        for text in (out, err):
            assert not leaks(text, SECRET) and "s3cr" not in text, (args, text)
    for log in home.rglob("*.log"):
        assert "s3cr" not in log.read_text(encoding="utf-8")


# --- without the postgres extra ----------------------------------------------------------

STORE_COMMANDS = [
    ["mcp", "--no-attach"],
    ["serve"],
    ["doctor"],
    ["stats"],
    ["list"],
    ["search", "deploys"],
    ["export"],
    ["import", "EXPORT"],
    ["ui"],
]


async def test_every_store_command_without_the_postgres_extra_says_pip_install(
    home: Path, tmp_path: Path
) -> None:
    hidden = tmp_path / "no-psycopg" / "psycopg"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text(
        "raise ImportError(\"No module named 'psycopg'\", name='psycopg')\n"
    )
    export = tmp_path / "export.jsonl"
    export.write_text(
        '{"format": "memtrio-export", "schema_version": 6, "type": "header", "version": 1}\n'
    )
    url = f"postgresql://team:{ENC}@db.internal/memtrio"
    env = {**server_env(home), "PYTHONPATH": str(hidden.parent)}
    runs: list[tuple[Sequence[str], dict[str, str]]] = [
        ([str(export) if a == "EXPORT" else a for a in args] + ["--store", url], env)
        for args in STORE_COMMANDS
    ]
    runs += [(["migrate", "--to", url], env), (["migrate", "--from", url], env)]
    for done, (args, _) in zip(await run_all(runs, home), runs, strict=True):
        err = done.stderr.decode()
        assert done.returncode == 2, (args, err)
        last = err.strip().splitlines()[-1]
        assert "pip install 'memtrio[postgres]'" in last and "unexpected" not in err, (args, err)
        assert "s3cr" not in err + done.stdout.decode()
    chaos = (await run_all([(["chaos", "--scenario", "pg-migrate-race", "--json"], env)], home))[0]
    assert chaos.returncode == 0, chaos.stderr
    outcome = json.loads(chaos.stdout)
    assert "pip install 'memtrio[postgres]'" in json.dumps(outcome), outcome


# --- a real store with a password ---------------------------------------------------------


@pytest.fixture
def password_url(pg_server: stores.PgServer) -> str:
    """A database of the session's server, by a URL with a password in its userinfo and as
    ``sslpassword`` (the private server trusts local connections: any password opens it)."""
    url = pg_server.database()
    assert "postgres:@" in url
    return url.replace("postgres:@", f"postgres:{ENC}@") + f"&sslpassword={ENC}"


async def test_a_served_store_url_password_reaches_no_output_log_or_tool_result(
    home: Path, password_url: str, pg_server: stores.PgServer
) -> None:
    env = {**server_env(home), "MEMTRIO_LOG_LEVEL": "debug"}
    target = pg_server.database().replace("postgres:@", f"postgres:{ENC}@")
    requests = [
        request_message("initialize", initialize_params("t", "2025-06-18"), 1),
        INITIALIZED,
        request_message(
            "tools/call", tool_call_params("remember", {"content": "deploys run on Fridays"}), 2
        ),
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "server_status", "arguments": {}},
        },
    ]
    mcp_env = {**env, "MEMTRIO_STORE": password_url}
    runs: list[tuple[Sequence[str], dict[str, str]]] = [
        (["doctor", "--json", "--store", password_url], env),
        (["stats", "--store", password_url], env),
        (["migrate", "--to", target, "--json"], env),
    ]
    done = await run_all(runs, home)
    mcp = subprocess.run(
        [sys.executable, "-m", "memtrio.supervisors.cli", "mcp", "--no-attach"],
        input="".join(json.dumps(r) + "\n" for r in requests),
        capture_output=True,
        text=True,
        env=mcp_env,
        cwd=home,
        timeout=120,
    )
    assert mcp.returncode == 0, mcp.stderr
    assert '"id":3' in mcp.stdout and 'isError":true' not in mcp.stdout
    assert all(d.returncode == 0 for d in done), [d.stderr for d in done]
    doctor = json.loads(done[0].stdout)
    assert doctor["database"].startswith("postgresql://postgres:***@/")
    assert "sslpassword=***" in doctor["database"]
    assert json.loads(done[2].stdout)["to"].startswith("postgresql://postgres:***@/")
    texts = [mcp.stdout, mcp.stderr, *(d.stdout.decode() + d.stderr.decode() for d in done)]
    texts += [p.read_text(encoding="utf-8") for p in home.rglob("*.log")]
    assert any("store_opened" in t for t in texts)
    for text in texts:
        assert not leaks(text, SECRET), leaks(text, SECRET)
