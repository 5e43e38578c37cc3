"""Dates in memories and questions, normalized so that "what did she do in June 2023"
meets the memory that says "(8 June, 2023) ... yesterday ...".

`memory_dates` finds the calendar dates a memory's text is about: explicit
dates (``8 May, 2023``, ``May 8, 2023``, ``2023-05-08``, ``May 2023``) and
relative times resolved against the first full explicit date of the text
(its session or writing date: ``yesterday``, ``today``, ``last week``,
``last weekend``, ``last Friday``, ``N days/weeks/months/years ago``,
``last month``, ``last year``). `query_dates` finds the date constraints of a
question (``in June``, ``in July 2023``, ``on October 13, 2023``, ``in
2023``). `matches` says whether a memory's dates satisfy a constraint.

A date is ``(year, month, day)``; 0 stands for a part that is not known (a
month-level date has day 0). A constraint is the same with 0 for a part the
question leaves open.
"""

from __future__ import annotations

import re
from datetime import date, timedelta

Day = tuple[int, int, int]

MONTHS = {
    name: i + 1
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ]
    )
    for name in names
}
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
MAX_TEXT_CHARS = 20_000
_M = r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
_DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+{_M}\.?,?\s+(\d{{4}})\b", re.I)
_MONTH_DAY_YEAR = re.compile(rf"\b{_M}\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I)
_ISO = re.compile(r"\b(\d{4})[-/](\d{1,2})[-/](\d{1,2})\b")
_MONTH_YEAR = re.compile(rf"\b{_M}\.?,?\s+(?:of\s+)?(\d{{4}})\b", re.I)
_MONTH = re.compile(rf"\b(?:in|during|of|since|early|late|mid|last)\s+{_M}\b", re.I)
_YEAR = re.compile(r"\b(?:in|during|of|since)\s+((?:19|20)\d\d)\b", re.I)
_AGO = re.compile(
    r"\b(\d+|a|an|one|two|three|four|five|six)\s+(day|week|month|year)s?\s+ago\b", re.I
)
_LAST = re.compile(r"\blast\s+(week|weekend|month|year|" + "|".join(WEEKDAYS) + r")\b", re.I)
_SIMPLE = {"yesterday": -1, "today": 0, "tonight": 0, "this morning": 0, "tomorrow": 1}
_SIMPLE_RE = re.compile(r"\b(yesterday|today|tonight|this morning|tomorrow)\b", re.I)
_ANY_YEAR = re.compile(r"\d{4}")  # no date is found in a text without one
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


def _valid(y: int, m: int, d: int) -> bool:
    try:
        date(y, m or 1, d or 1)
    except ValueError:
        return False
    return True


def _explicit(text: str) -> list[tuple[int, Day]]:
    """(offset, date) of the full and month-level dates written out in ``text``."""
    out: list[tuple[int, Day]] = []
    for m in _DAY_MONTH_YEAR.finditer(text):
        out.append((m.start(), (int(m[3]), MONTHS[m[2].casefold()[:3]], int(m[1]))))
    for m in _MONTH_DAY_YEAR.finditer(text):
        out.append((m.start(), (int(m[3]), MONTHS[m[1].casefold()[:3]], int(m[2]))))
    for m in _ISO.finditer(text):
        out.append((m.start(), (int(m[1]), int(m[2]), int(m[3]))))
    covered = {o for o, _ in out}
    for m in _MONTH_YEAR.finditer(text):
        if not any(abs(m.start() - o) < 12 for o in covered):
            out.append((m.start(), (int(m[2]), MONTHS[m[1].casefold()[:3]], 0)))
    return sorted((o, d) for o, d in out if _valid(*d))


def _month_shift(anchor: date, months: int) -> Day:
    index = anchor.year * 12 + anchor.month - 1 + months
    return (index // 12, index % 12 + 1, 0)


def _relative(text: str, anchor: date) -> set[Day]:  # noqa: C901
    out: set[Day] = set()

    def day(d: date) -> None:
        out.add((d.year, d.month, d.day))

    for m in _SIMPLE_RE.finditer(text):
        day(anchor + timedelta(days=_SIMPLE[m[1].casefold()]))
    for m in _AGO.finditer(text):
        n = int(m[1]) if m[1].isdigit() else _NUMBERS[m[1].casefold()]
        unit = m[2].casefold()
        if unit in ("day", "week"):
            day(anchor - timedelta(days=n * (7 if unit == "week" else 1)))
        elif unit == "month":
            out.add(_month_shift(anchor, -n))
        else:
            out.add((anchor.year - n, 0, 0))
    for m in _LAST.finditer(text):
        what = m[1].casefold()
        if what == "week":
            # The days of the previous calendar week, Monday to Sunday.
            start = anchor - timedelta(days=anchor.weekday() + 7)
            for i in range(7):
                day(start + timedelta(days=i))
        elif what == "weekend":
            saturday = anchor - timedelta(days=(anchor.weekday() - 5) % 7 or 7)
            day(saturday)
            day(saturday + timedelta(days=1))
        elif what == "month":
            out.add(_month_shift(anchor, -1))
        elif what == "year":
            out.add((anchor.year - 1, 0, 0))
        else:
            back = (anchor.weekday() - WEEKDAYS.index(what)) % 7 or 7
            day(anchor - timedelta(days=back))
    return out


def memory_dates(text: str) -> frozenset[Day]:
    """The dates ``text`` is about: written out, and relative ones resolved against its
    first full date (none without one)."""
    text = text[:MAX_TEXT_CHARS]
    if not _ANY_YEAR.search(text):
        return frozenset()
    explicit = _explicit(text)
    out = {d for _, d in explicit}
    full = next((d for _, d in explicit if d[2]), None)
    if full is not None:
        out |= _relative(text, date(*full))
    return frozenset(out)


def query_dates(text: str) -> list[Day]:
    """The date constraints of a question (0 = left open); relative times are not resolved
    (a question has no date of its own)."""
    found = [d for _, d in _explicit(text)]
    taken = bool(found)
    if not taken:
        for m in _MONTH.finditer(text):
            found.append((0, MONTHS[m[1].casefold()[:3]], 0))
        for m in _YEAR.finditer(text):
            found.append((int(m[1]), 0, 0))
    return found


def matches(constraint: Day, dates: frozenset[Day]) -> bool:
    """Whether one of ``dates`` satisfies ``constraint`` in every part it fixes."""
    return any(
        all(want == 0 or have == want for want, have in zip(constraint, d, strict=True))
        for d in dates
    )
