"""Time in queries: the window of time a query speaks of ("last week", "in May 2023", "a
couple of days ago", "on 13 October 2023"), read against the moment it is asked.

Search uses the window as a soft boost (``ranking.py``): a candidate whose source time
falls inside gains, one near it gains less, and nothing is ever cut, since the words of a
query say when something was *said* less reliably than what was said ("I went camping last
month", told in July, answers "when did she go camping in June?").

Written by hand because the libraries that find dates in text do not give what a window
needs. Tried on this module's test phrases: ``dateparser.search.search_dates`` and
``parsedatetime``'s ``Calendar.nlp`` both return a single instant without its granularity
(``in 2023`` and ``in June`` come back as a day, so the window's width is lost), read
ordinary words as dates ("May I ask …" as May, "we" as Wednesday, "dinner" as 19:00,
"in 2023" as 20:23), miss "a couple of days ago", and ``search_dates`` took up to 160 ms
on one query, more than a whole search may take. The patterns below are the few ways a
question to a memory names a time; anything else leaves the query without a window.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

__all__ = ["TimeWindow", "closeness", "query_window"]

_DAY = timedelta(days=1)


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """``[start, end)``, both time-zone aware; ``phrase`` is the query's words for it."""

    start: datetime
    end: datetime
    phrase: str

    @property
    def width(self) -> timedelta:
        return max(self.end - self.start, _DAY)


def closeness(moment: datetime | None, window: TimeWindow) -> float:
    """1 inside the window, falling off outside it by ``e^(-distance / width)`` (so a month
    forgives days where a day forgives hours); 0 for no moment."""
    if moment is None:
        return 0.0
    if window.start <= moment < window.end:
        return 1.0
    distance = window.start - moment if moment < window.start else moment - window.end
    return float(2.718281828459045 ** -(distance / window.width))


_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"),
            ("may",), ("june", "jun"), ("july", "jul"), ("august", "aug"),
            ("september", "sep", "sept"), ("october", "oct"), ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}  # fmt: skip
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_ORDINAL = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "a couple of": 2, "a couple": 2, "couple of": 2, "a few": 3, "few": 3, "several": 4,
}  # fmt: skip
# How far a count's window reaches either side of it: vague counts reach further.
_SPREAD = {"a couple of": 1.0, "a couple": 1.0, "couple of": 1.0, "a few": 1.5, "few": 1.5,
           "several": 2.5}  # fmt: skip
_COUNT = (
    r"(?P<count>\d{1,3}|"
    + "|".join(re.escape(word) for word in sorted(_NUMBERS, key=len, reverse=True))
    + ")"
)
_UNIT = r"(?P<unit>day|week|month|year)s?"
_PREPOSITION = "in|during|since|throughout|of|early|late|mid|before|after|until|by"
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, re.IGNORECASE))
    for name, pattern in (
        ("iso", r"\b(?P<year>(?:19|20)\d\d)-(?P<month>[01]\d)-(?P<day>[0-3]\d)\b"),
        ("month_day_year", rf"\b{_MONTH}\s+{_ORDINAL},?\s+{_YEAR}\b"),
        ("day_month_year", rf"\b{_ORDINAL}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b"),
        ("month_year", rf"\b{_MONTH},?\s+(?:of\s+)?{_YEAR}\b"),
        ("month_day", rf"\b(?:on\s+)?{_MONTH}\s+{_ORDINAL}\b(?!\s*(?:,\s*)?\d)"),
        ("day_month", rf"\b(?:on\s+)?(?:the\s+)?{_ORDINAL}\s+(?:of\s+)?{_MONTH}\b"),
        # A month or year alone counts only after a preposition: "May I…", "march on".
        ("in_month", rf"\b(?:{_PREPOSITION})[\s-]+{_MONTH}\b"),
        ("in_year", rf"\b(?:{_PREPOSITION})\s+{_YEAR}\b"),
        ("ago", rf"\b{_COUNT}\s+{_UNIT}\s+ago\b"),
        ("past_n", rf"\b(?:the\s+)?(?:past|last|previous)\s+(?P<count>\d{{1,3}}|"
                   rf"{'|'.join(w for w in _NUMBERS if ' ' not in w)})\s+{_UNIT}\b"),
        ("last_unit",
         r"\b(?P<which>last|past|previous|this)\s+(?P<unit>week|month|year|weekend)\b"),
        ("weekday", r"\b(?:on|last|this past)\s+(?P<weekday>" + "|".join(_WEEKDAYS) + r")\b"),
        ("day_word", r"\b(?P<word>the day before yesterday|yesterday|today|tonight)\b"),
        ("recently", r"\b(?:recently|lately|these days|the other day)\b"),
    )
)  # fmt: skip
# "before X" / "after X": the word right before an expression, or opening it.
_SIDE_BEFORE = re.compile(r"\b(?P<side>before|after|since|until|by)\s+$", re.IGNORECASE)
_SIDE_OPENING = re.compile(r"(?P<side>before|after|since|until|by)\s", re.IGNORECASE)


def query_window(query: str, *, now: datetime) -> TimeWindow | None:
    """The time ``query`` speaks of, read at ``now`` (aware), or None when it names none.

    Where expressions overlap the more precise one is read ("in July 2023" is July 2023,
    not July); of the rest the first in the query wins. "before X", "after X" and "since X"
    turn X's window into the time before it, or from it up to ``now``."""
    if now.tzinfo is None:
        raise ValueError("now must be time-zone aware")
    taken: list[tuple[int, int, str, re.Match[str]]] = []
    for name, pattern in _PATTERNS:  # most precise first
        for match in pattern.finditer(query):
            start, end = match.span()
            if all(end <= s or start >= e for s, e, _, _ in taken):
                taken.append((start, end, name, match))
    for start, _, name, match in sorted(taken, key=lambda t: t[0]):
        window = _window(name, match, now)
        if window is None:
            continue
        phrase = match.group(0)
        side = _SIDE_OPENING.match(phrase)
        if side is None:
            side = _SIDE_BEFORE.search(query[:start])
            phrase = query[side.start() : match.end()] if side is not None else phrase
        if side is None:
            return window
        word = side["side"].lower()
        if word in ("before", "until", "by"):
            return TimeWindow(window.start - 20 * window.width, window.start, phrase)
        begin = window.start if word == "since" else window.end
        return TimeWindow(begin, max(now, begin + window.width), phrase)
    return None


def _window(name: str, m: re.Match[str], now: datetime) -> TimeWindow | None:
    phrase = m.group(0).strip()
    tz = now.tzinfo or UTC
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    try:
        if name in ("iso", "month_day_year", "day_month_year"):
            month = int(m["month"]) if name == "iso" else _MONTHS[m["month"].lower()]
            start = datetime(int(m["year"]), month, int(m["day"]), tzinfo=tz)
            return TimeWindow(start, start + _DAY, phrase)
        if name in ("month_day", "day_month"):
            month = _MONTHS[m["month"].lower()]
            start = datetime(now.year, month, int(m["day"]), tzinfo=tz)
            if start > now:  # "on May 3" asked in April means last year's
                start = start.replace(year=now.year - 1)
            return TimeWindow(start, start + _DAY, phrase)
        if name in ("month_year", "in_month"):
            month = _MONTHS[m["month"].lower()]
            year = int(m["year"]) if name == "month_year" else now.year
            start = datetime(year, month, 1, tzinfo=tz)
            if name == "in_month" and start > now:
                start = start.replace(year=year - 1)
            return TimeWindow(start, _next_month(start), phrase)
        if name == "in_year":
            start = datetime(int(m["year"]), 1, 1, tzinfo=tz)
            return TimeWindow(start, start.replace(year=start.year + 1), phrase)
    except ValueError:  # "February 30": no such day
        return None
    if name == "ago":
        word = m["count"].lower()
        count = float(word) if word.isdigit() else float(_NUMBERS[word])
        unit = _unit(m["unit"].lower())
        spread = _SPREAD.get(word, 0.5)
        return TimeWindow(
            now - (count + spread) * unit, now - max(count - spread, 0.0) * unit, phrase
        )
    if name == "past_n":
        word = m["count"].lower()
        count = float(word) if word.isdigit() else float(_NUMBERS[word])
        return TimeWindow(now - count * _unit(m["unit"].lower()), now, phrase)
    if name == "last_unit":
        return _calendar(m["which"].lower(), m["unit"].lower(), now, today, phrase)
    if name == "weekday":
        wanted = _WEEKDAYS.index(m["weekday"].lower())
        back = (today.weekday() - wanted) % 7 or 7
        start = today - back * _DAY
        return TimeWindow(start, start + _DAY, phrase)
    if name == "day_word":
        back = {"the day before yesterday": 2, "yesterday": 1}.get(m["word"].lower(), 0)
        start = today - back * _DAY
        return TimeWindow(start, start + _DAY, phrase)
    if name == "recently":
        return TimeWindow(now - 30 * _DAY, now, phrase)
    return None


def _unit(unit: str) -> timedelta:
    return {"day": _DAY, "week": 7 * _DAY, "month": 30 * _DAY, "year": 365 * _DAY}[unit]


def _next_month(start: datetime) -> datetime:
    return start.replace(year=start.year + start.month // 12, month=start.month % 12 + 1)


def _calendar(which: str, unit: str, now: datetime, today: datetime, phrase: str) -> TimeWindow:
    """ "last week" is the calendar week before this one (weeks start on Monday); "this
    month" runs from its first day to now; "last weekend" is the Saturday and Sunday
    before this week."""
    if unit in ("week", "weekend"):
        this = today - today.weekday() * _DAY
    elif unit == "month":
        this = today.replace(day=1)
    else:
        this = today.replace(month=1, day=1)
    if which == "this":
        return TimeWindow(this, now, phrase)
    if unit == "weekend":
        return TimeWindow(this - 2 * _DAY, this, phrase)
    if unit == "week":
        return TimeWindow(this - 7 * _DAY, this, phrase)
    if unit == "month":
        previous = (this - _DAY).replace(day=1)
        return TimeWindow(previous, this, phrase)
    return TimeWindow(this.replace(year=this.year - 1), this, phrase)
