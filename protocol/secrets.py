"""Credentials in text: find them (`find_secrets`), replace them (`redact`), and describe
them without repeating them (`Finding.shown`).

Pure code, no I/O: the store's write paths (``actors.screening``), the session digests and
anything else that keeps user text call it. What is found:

- well-known formats, by their documented prefix and shape: AWS access key ids, GitHub,
  GitLab, Slack, Stripe, Google API, OpenAI, Anthropic, Hugging Face, SendGrid, Twilio,
  Mailchimp, PyPI, npm, Telegram, Discord, Sourcegraph, Notion, HashiCorp Vault,
  Facebook, Heroku, Grafana, Sentry, Square and Azure storage keys, private key blocks
  (PEM, OpenSSH, PGP) and JSON Web Tokens;
- credentials by their context: ``Authorization: Bearer ...`` / ``Basic ...`` values, the
  password of a URL (``scheme://user:password@host``), and the value of an assignment
  whose name says it holds a credential (``password = ...``, ``api_key: ...``,
  ``client_secret=...``, ``AWS_SECRET_ACCESS_KEY=...``) when that value looks like one:
  a password of at least 6 characters, any other credential random-looking (at least 12
  characters, no spaces, two of lower case, upper case, digits and symbols, 3 bits of
  entropy per character).

What is not a secret: a placeholder (``***``, ``xxxx``, ``<token>``, ``${TOKEN}``,
``$TOKEN``, ``%s``, ``{{ token }}``, ``...``, ``changeme``-style words listed in
`PLACEHOLDER_WORDS`) and a value made of one repeated character.

Cost: every pattern begins with a literal or with a look-behind that stops it from starting
inside a run of the characters it matches, and every repetition is bounded; a scan is
linear in the length of the text (at worst about 0.7-0.9 s of CPU per MB of adversarial
text: docs/bench-runs/eval-secrets.txt). Patterns compile on first use. A pattern
whose every match begins with one of a few literal strings (`Rule.needles`, read off the
compiled pattern) is run only on a text that holds one of them: most texts hold none, and a
substring test costs a fraction of a regular-expression scan.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import functools
import math
import re

# The parsed form of a pattern (`Rule.needles`): the standard library's own parser, which
# typeshed does not describe.
import re._constants as sre_constants  # type: ignore[import-not-found]  # no stub
import re._parser as sre_parser  # type: ignore[import-not-found]  # no stub
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

SecretsMode = Literal["refuse", "redact", "allow"]
MODES: tuple[SecretsMode, ...] = ("refuse", "redact", "allow")
MARKER = "[REDACTED:{kind}]"  # what replaces a secret (`redact`); never itself a secret

SHOWN_PREFIX = 4  # characters of a secret a message repeats (`Finding.shown`)
MIN_PASSWORD = 6  # a value named password shorter than this is not taken for one
MIN_RANDOM = 12  # ... a value named key, token, secret: at least this long
MIN_ENTROPY = 3.0  # ... and this many bits per character (Shannon, over its characters)
MAX_VALUE = 512  # characters of an assigned value looked at


@dataclass(frozen=True)
class Finding:
    """One secret in a text: ``kind`` names its format, ``text[start:end]`` is the secret."""

    kind: str
    start: int
    end: int

    def shown(self, text: str) -> str:
        """The secret described without being repeated: its kind, its first characters
        (`SHOWN_PREFIX`, fewer for a short one) and its length."""
        secret = text[self.start : self.end]
        keep = min(SHOWN_PREFIX, len(secret) // 4)
        return f"{self.kind} `{secret[:keep]}...` ({len(secret)} characters at {self.start})"


# -- the rules ---------------------------------------------------------------------------

Check = Callable[[str], bool]


@dataclass(frozen=True)
class Rule:
    """``source``'s group ``secret`` (or the whole match) is a ``kind`` when ``check`` agrees.

    The pattern is compiled on first use (`pattern`): importing this module compiles
    nothing, so a process that never writes pays nothing for it at start-up."""

    kind: str
    source: str
    check: Check | None = None

    @property
    def pattern(self) -> re.Pattern[str]:
        return _regex(self.source)

    @property
    def needles(self) -> Needles | None:
        """The literal strings one of which begins every match (and whether they match
        regardless of case), or None when the pattern has no such prefix."""
        return _needles(self.source)


@dataclass(frozen=True)
class Needles:
    """A text can match only if it holds one of ``strings`` (lower-cased when ``folded``:
    the pattern ignores their case; then only an ASCII text is tested, on which lower-casing
    agrees with the regular-expression engine's case folding)."""

    strings: tuple[str, ...]
    folded: bool

    def absent(self, text: str, lowered: str | None) -> bool:
        """Whether no match can be in ``text`` (``lowered``: its lower case, if ASCII)."""
        if not self.folded:
            return not any(map(text.__contains__, self.strings))
        return lowered is not None and not any(map(lowered.__contains__, self.strings))


_ZERO_WIDTH = frozenset({sre_constants.AT, sre_constants.ASSERT, sre_constants.ASSERT_NOT})
MAX_NEEDLES = 32  # literal prefixes a pattern may have and still be prefiltered


def _prefixes(items: list[Any], folded: bool) -> tuple[set[str], bool, bool]:
    """The literal strings every match of a parsed sequence begins with: (the strings, whether
    they are the whole of every match, whether some part ignores case). Zero-width assertions
    are skipped; literals, small literal sets, groups and alternations extend the strings;
    anything else ends them."""
    out, anyfold = {""}, folded
    for op, av in items:
        if op in _ZERO_WIDTH:
            continue
        if op == sre_constants.LITERAL:
            more, whole, fold = {chr(av)}, True, folded
        elif op == sre_constants.IN and all(o == sre_constants.LITERAL for o, _ in av):
            more, whole, fold = {chr(c) for _, c in av}, True, folded
        elif op == sre_constants.BRANCH:
            parts = [_prefixes(list(b.data), folded) for b in av[1]]
            more = {x for p in parts for x in p[0]}
            whole = all(p[1] for p in parts)
            fold = any(p[2] for p in parts)
        elif op == sre_constants.SUBPATTERN and not av[2] and not av[1] & ~re.IGNORECASE:
            more, whole, fold = _prefixes(list(av[3].data), folded or bool(av[1] & re.IGNORECASE))
        else:
            return out, False, anyfold
        anyfold = anyfold or fold
        out = {x + y for x in out for y in more}
        if len(out) > MAX_NEEDLES:
            return {""}, False, anyfold
        if not whole:
            return out, False, anyfold
    return out, True, anyfold


@functools.cache
def _needles(source: str) -> Needles | None:
    """`Rule.needles` of the pattern ``source`` (compiled without flags)."""
    try:
        items = list(sre_parser.parse(source).data)
        strings, _whole, folded = _prefixes(items, False)
        if "" in strings:  # no literal prefix: a literal every match holds further in
            strings, folded = _inner_literals(items), False
    except Exception:  # noqa: BLE001 - the parser's internals changed: scan every text
        return None
    if not strings or "" in strings:  # some match may hold no literal at all
        return None
    return Needles(tuple(sorted({x.lower() for x in strings} if folded else strings)), folded)


def _inner_literals(items: list[Any]) -> set[str]:
    """The longest run of literals of a parsed sequence's own items (each match holds it; an
    alternation of the whole pattern: one per alternative), or an empty set."""
    if len(items) == 1 and items[0][0] == sre_constants.BRANCH:
        runs = [_inner_literals(list(b.data)) for b in items[0][1][1]]
        return set().union(*runs) if all(runs) else set()
    best = run = ""
    for op, av in items:
        run = run + chr(av) if op == sre_constants.LITERAL else ""
        best = max(best, run, key=len)
    return {best} if best else set()


@functools.cache
def _regex(source: str, flags: int = 0) -> re.Pattern[str]:
    """``source`` compiled, once (patterns compile on first use: importing this module
    costs no compilation)."""
    return re.compile(source, flags)


def _reference(value: str) -> bool:
    return _regex(_REFERENCE, re.DOTALL).match(value) is not None


PLACEHOLDER_WORDS = frozenset(
    {
        "changeme", "change_me", "example", "redacted", "placeholder", "password",
        "passwd", "secret", "token", "your_token", "your_password", "your_api_key",
        "none", "null", "nil", "undefined", "true", "false", "required", "optional",
        "string", "dummy", "fake", "test", "todo", "tbd", "xxx", "empty", "hidden",
    }
)  # fmt: skip
CODE_WORDS = frozenset({"lambda", "function", "new", "await", "self", "this", "none", "nil"})
_REFERENCE = (  # what a placeholder's whole value may be
    r"^(?:[a-z_][a-z0-9_]{0,60}(?:\.[a-z_][a-z0-9_]{0,60}){1,10}[:;,]?"  # an attribute
    r"|\$\{?[A-Za-z_][\w.]{0,100}\}?|\$\d|%\(?\w{0,40}\)?s"  # a variable
    r"|\{.{0,200}|\{\{.{0,200}\}\}|<[^<>]{0,200}>"  # a template, <token>
    r"|[A-Za-z_][\w.]{0,100}\(.{0,400}"  # a call
    r"|\[REDACTED:[\w-]{1,40}\]"  # a marker
    r"|os\.environ.{0,200}|process\.env.{0,200}|getenv.{0,200})$"
)


def placeholder(value: str) -> bool:
    """A value that stands for a secret without being one: a reference to a variable or a
    template, a word such as ``changeme``, one repeated character, ``...``."""
    core = value.strip("\"'`;,.()[] ")
    if not core or len(set(core.lower())) <= 2 and len(core) >= 3:
        return True
    if core.startswith(("/", "~/", "./", "../")) and "/" in core[1:]:
        return True  # a file's path: where the secret is kept
    if core.lower() in PLACEHOLDER_WORDS or _reference(core) or _reference(value):
        return True
    lowered = core.lower()
    if lowered.split(" ", 1)[0].rstrip(":") in CODE_WORDS:
        return True
    return "example" in lowered or "xxxx" in lowered or "*" * 3 in core or "fake" in lowered


_WORDS = r"[A-Za-z][a-z]{1,30}(?:[_\-./:]{1,2}[A-Za-z]?[a-z0-9]{1,30}){1,30}"


def entropy(value: str) -> float:
    """Shannon entropy of ``value``'s characters, in bits per character."""
    counts = Counter(value)
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def random_looking(value: str) -> bool:
    """A generated credential rather than a word: long, letters and digits, high entropy."""
    if len(value) < MIN_RANDOM or placeholder(value) or any(c.isspace() for c in value):
        return False
    if _regex(_WORDS).fullmatch(value):
        return False  # an identifier, a file or module name: words joined by _ - . / :
    return _classes(value) >= 2 and entropy(value) >= MIN_ENTROPY


def _classes(value: str) -> int:
    """How many of lower-case letters, upper-case letters, digits and other characters
    ``value`` has (a word has one, a generated credential two or more)."""
    return sum(
        (
            any(c.islower() for c in value),
            any(c.isupper() for c in value),
            any(c.isdigit() for c in value),
            any(not c.isalnum() and not c.isspace() for c in value),
        )
    )


def password_like(value: str) -> bool:
    """A value given to a password: not a placeholder, not prose, at least `MIN_PASSWORD`."""
    if len(value) < MIN_PASSWORD or placeholder(value):
        return False
    if not any(c.isalnum() for c in value):
        return False
    # One ordinary word ("required", "optional", "rotated") names no password.
    return not (value.isalpha() and value.islower())


def not_placeholder(value: str) -> bool:
    return not placeholder(value)


def _json_part(part: str) -> bool:
    try:
        decoded = msgspec.json.decode(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (ValueError, binascii.Error, msgspec.DecodeError):
        return False
    return isinstance(decoded, dict)


def jwt_like(token: str) -> bool:
    """A JSON Web Token: its header decodes to a JSON object."""
    return _json_part(token.split(".", 1)[0])


def _rx(pattern: str) -> str:
    """A rule's pattern, compiled by `Rule.pattern` when first used."""
    return pattern


_B = r"(?<![A-Za-z0-9_\-])"  # not inside a run of token characters
_E = r"(?![A-Za-z0-9_\-])"
# The names of credentials (any case); what follows the name is `_ASSIGN`'s ``name`` group
# (``client_secret``, ``aws_secret_access_key``, ``api_key``, ``GITHUB_TOKEN`` all match).
_KEY_NAMES = r"(?:secret|token|credentials?|apikey|accesskey|privatekey|auth|[_.\-]key)"
_PASSWORD_NAMES = r"(?:pass(?:word|wd|phrase)?|pwd)"
# name, then up to 40 more name characters, a quote, then the assignment operator
# the rest of the name (``_super_secure``, not a plural ``s``), an index, a closing quote,
# then the assignment or comparison operator (or, before a double quote, none)
_ASSIGN = (
    r"(?P<name>(?:[_.\-][\w.\-]{0,40})?)(?:\[\d{0,5}\])?[\"']?"
    r"(?:[ \t]{0,5}(?:===|!==|=>|:{1,3}=|\?=|==|!=|=|:)|[ \t]{1,5}(?=\"))[ \t]{0,5}@?"
)
_COMPARED = r"[ \t]{0,5}(?:===?|!==?)[ \t]{0,5}[\w.]{0,40}?"  # "value" == name
# A name ending so holds where or what the credential is, not the credential.
NOT_SECRET_NAMES = (  # matched against the name in lower case
    r"[_.\-](?:file|path|dir|name|type|length|len|size|count|limit|hash|sha\d*|digest|id"
    r"|url|uri|env|var|field|prefix|header|endpoint|format|ttl|timeout|expiry|expires|policy"
    r"|mode|source|store|count|max|min)$"
)
_N = str(MAX_VALUE)
_DQ = r"\"(?P<dq>[^\"\n]{1," + _N + r"})\""
_VALUE = (
    r"(?:" + _DQ + r"|'(?P<sq>[^'\n]{1," + _N + r"})'|`(?P<bq>[^`\n]{1," + _N + r"})`"
    r"|(?P<bare>[^\s\"'`,;:=][^\s\"'`,;]{0," + str(MAX_VALUE - 1) + r"}))"
)

RULES: tuple[Rule, ...] = (
    Rule("private-key", _rx(r"-----BEGIN[ A-Z0-9]{0,40} PRIVATE KEY(?: BLOCK)?-----")),
    Rule("aws-access-key-id", _rx(_B + r"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}" + _E)),
    Rule("github-token", _rx(_B + r"(?:gh[pousr]_[A-Za-z0-9]{36,251}|github_pat_\w{22,240})" + _E)),
    Rule("gitlab-token", _rx(
        _B + r"(?:glpat|gldt|glrt|glptt|glsoat|glcbt|glimt|glagent|gloas|glft|glffct|glsa)-"
        r"[A-Za-z0-9_\-]{20,250}" + _E + r"|" + _B + r"GR1348941[A-Za-z0-9_\-]{20,250}" + _E)),
    Rule("slack-token", _rx(
        _B + r"(?:xox(?:[abposre]|e\.xox[bp])|xapp-\d)-[A-Za-z0-9\-]{10,250}" + _E)),
    Rule("slack-webhook", _rx(
        r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/+\-]{20,200}")),
    Rule("stripe-key", _rx(_B + r"(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{10,247}" + _E)),
    Rule("google-api-key", _rx(_B + r"AIza[A-Za-z0-9_\-]{35}" + _E)),
    Rule("openai-key", _rx(
        _B + r"sk-(?:(?:proj|svcacct|admin)-)?[A-Za-z0-9_\-]{20,200}T3BlbkFJ[A-Za-z0-9_\-]{20,200}"
        + _E + r"|" + _B + r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{80,300}" + _E)),
    Rule("anthropic-key", _rx(_B + r"sk-ant-(?:api|admin|sid)\d{2}-[A-Za-z0-9_\-]{80,120}" + _E)),
    Rule("huggingface-token", _rx(_B + r"(?:hf_|api_org_)[A-Za-z]{34}" + _E), not_placeholder),
    Rule("sendgrid-key", _rx(_B + r"SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}" + _E)),
    Rule("twilio-key", _rx(_B + r"(?:SK|AC)[0-9a-f]{32}" + _E)),
    Rule("mailchimp-key", _rx(_B + r"[0-9a-f]{32}-us\d{1,2}" + _E)),
    Rule("pypi-token", _rx(_B + r"pypi-AgE[A-Za-z0-9_\-]{50,1000}" + _E)),
    Rule("npm-token", _rx(_B + r"npm_[A-Za-z0-9]{36}" + _E)),
    Rule("telegram-bot-token", _rx(r"(?<![\w:])\d{8,10}:AA[A-Za-z0-9_\-]{33}" + _E)),
    Rule("discord-bot-token", _rx(
        _B + r"[MNO][A-Za-z0-9_\-]{23,25}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,38}" + _E)),
    Rule("sourcegraph-token", _rx(
        _B + r"sgp_(?:local_|[A-Fa-f0-9]{16}_)?[A-Fa-f0-9]{40}" + _E)),
    Rule("notion-token", _rx(_B + r"ntn_\d{11}[A-Za-z0-9]{35}" + _E)),
    Rule("vault-token", _rx(_B + r"hv[sb]\.[A-Za-z0-9_\-]{24,400}" + _E)),
    Rule("facebook-token", _rx(_B + r"EAA[A-Za-z0-9]{90,400}" + _E)),
    Rule("heroku-key", _rx(_B + r"HRKU-[A-Za-z0-9_\-]{60}" + _E)),
    Rule("grafana-token", _rx(
        _B + r"(?:glc_[A-Za-z0-9+/]{32,400}={0,2}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8})" + _E)),
    Rule("sentry-token", _rx(_B + r"(?:sntrys_eyJ[A-Za-z0-9+/=_\-]{30,1000}|sntryu_[a-f0-9]{64})" + _E)),
    Rule("square-token", _rx(_B + r"sq0(?:csp|atp)-[A-Za-z0-9_\-]{22,60}" + _E)),
    Rule("azure-storage-key", _rx(r"AccountKey=(?P<secret>[A-Za-z0-9+/]{86}==)")),
    Rule("json-web-token", _rx(
        _B + r"eyJ[A-Za-z0-9_\-]{10,4000}\.eyJ[A-Za-z0-9_\-]{2,8000}(?:\.[A-Za-z0-9_\-]{0,4000})?"
        + r"(?![A-Za-z0-9_\-.])"), jwt_like),
    Rule("bearer-token", _rx(
        r"(?i:\bbearer)[ \t]{1,5}(?P<secret>[A-Za-z0-9._~+/\-]{16,2000}=*)(?![A-Za-z0-9._~+/=\-])"),
        random_looking),
    Rule("basic-auth", _rx(
        r"(?i:\bbasic)[ \t]{1,5}(?P<secret>[A-Za-z0-9+/]{12,2000}={0,2})(?![A-Za-z0-9+/=])"),
        lambda v: _basic_credentials(v)),
    Rule("url-password", _rx(
        r"\b[A-Za-z][A-Za-z0-9+.\-]{0,20}://[^\s:/@\"'<>]{0,128}:(?P<secret>[^\s/@\"'<>]{1,256})@"
        r"(?=[A-Za-z0-9\[])"), not_placeholder),
    Rule("npm-auth-token", _rx(r":_auth(?:Token)?[ \t]{0,5}=[ \t]{0,5}(?P<secret>[^\s\"']{8,512})"),
        not_placeholder),
    Rule("password-assignment", _rx(
        r"(?i:" + _PASSWORD_NAMES + r")" + _ASSIGN + _VALUE), password_like),
    Rule("credential-assignment", _rx(
        r"(?i:" + _KEY_NAMES + r")" + _ASSIGN + _VALUE), random_looking),
    Rule("password-comparison", _rx(
        _DQ + _COMPARED + r"(?i:" + _PASSWORD_NAMES + r")"), password_like),
    Rule("credential-comparison", _rx(_DQ + _COMPARED + r"(?i:" + _KEY_NAMES + r")"),
        random_looking),
)  # fmt: skip


def _basic_credentials(value: str) -> bool:
    """An ``Authorization: Basic`` value: base64 of ``user:password``."""
    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
    except (ValueError, binascii.Error):
        return False
    text = decoded.decode("utf-8", "replace")
    return ":" in text and not placeholder(text.split(":", 1)[1])


_PEM_END = r"-----END[ A-Z0-9]{0,40} PRIVATE KEY(?: BLOCK)?-----"


def _span(rule: Rule, match: re.Match[str], text: str) -> tuple[int, int] | None:
    """Where the secret of ``match`` is, or None when the rule's check refuses it."""
    groups = match.re.groupindex
    if "name" in groups and _regex(NOT_SECRET_NAMES).search(match.group("name").lower()):
        return None
    name = next(
        (g for g in ("secret", "dq", "sq", "bq", "bare") if g in groups and match.group(g)), None
    )
    start, end = match.span(name) if name else match.span()
    if rule.kind == "private-key":
        closing = _regex(_PEM_END).search(text, end)
        stop = closing.end() if closing else len(text)
        body = text[end : closing.start() if closing else len(text)]
        return (start, stop) if body.strip(" \t\r\n.") else None
    value = text[start:end]
    if not (rule.check or not_placeholder)(value):
        return None
    return start, end


def find_secrets(text: str) -> list[Finding]:
    """The secrets in ``text``, in order, none overlapping another (the first found of two
    that overlap, in `RULES` order, is kept)."""
    found: list[Finding] = []  # sorted by start, none overlapping
    starts: list[int] = []
    lowered = text.lower() if text.isascii() else None
    for rule, needles in _plan():
        if needles is not None and needles.absent(text, lowered):
            continue
        covered = 0  # a private key runs to its END line: a BEGIN before that is inside it
        for match in rule.pattern.finditer(text):
            if match.start() < covered:
                continue
            span = _span(rule, match, text)
            if span is None:
                continue
            start, end = span
            covered = end
            at = bisect.bisect_left(starts, start)
            if (at > 0 and found[at - 1].end > start) or (
                at < len(found) and found[at].start < end
            ):
                continue  # inside a secret found by an earlier rule
            starts.insert(at, start)
            found.insert(at, Finding(rule.kind, start, end))
    return found


@functools.cache
def _plan() -> tuple[tuple[Rule, Needles | None], ...]:
    """Each rule with its `Rule.needles`, worked out once."""
    return tuple((rule, rule.needles) for rule in RULES)


def redact(text: str, findings: list[Finding] | None = None) -> str:
    """``text`` with each secret replaced by its `MARKER` (``[REDACTED:github-token]``)."""
    findings = find_secrets(text) if findings is None else findings
    if not findings:
        return text
    parts: list[str] = []
    at = 0
    for f in findings:
        parts += [text[at : f.start], MARKER.format(kind=f.kind)]
        at = f.end
    parts.append(text[at:])
    return "".join(parts)


def iter_kinds() -> Iterator[str]:
    """The kinds `find_secrets` reports, in `RULES` order."""
    return (rule.kind for rule in RULES)
