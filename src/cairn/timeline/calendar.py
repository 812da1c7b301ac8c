"""The calendar periods of the hierarchy in the timeline's time zone.

A week is an ISO week cut at month ends, so every level nests exactly inside the one above
it: a day lies in one week, a week in one month, a month in one year.

An event may lie anywhere from the year 1 to the year 9999 in UTC, and the periods around it
must never step past either end (a year 9999 ends on 10000-01-01, which no date holds; the
first hour of the year 1 falls on a day of the year 0 west of UTC). So the first and last
days a date can hold stretch to the ends of time: everything before the first day's start
in the zone belongs to it, and everything after the last day's start to that one.
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from cairn.model import TocLevel

__all__ = [
    "FIRST_MOMENT",
    "LAST_MOMENT",
    "Period",
    "day_of",
    "day_period",
    "parent_of",
    "period_label",
]


@dataclass(frozen=True)
class Period:
    level: TocLevel
    key: str
    first_day: date
    last_day: date  # inclusive
    zone: str

    @property
    def starts_at(self) -> datetime:
        if self.first_day == date.min:
            return FIRST_MOMENT
        return _start(self.first_day, self.zone)

    @property
    def ends_at(self) -> datetime:
        """The end of the period (excluded), or the last moment a time can hold."""
        if self.last_day == date.max:
            return LAST_MOMENT
        return _start(self.last_day + timedelta(days=1), self.zone)


FIRST_MOMENT = datetime.min.replace(tzinfo=UTC)
LAST_MOMENT = datetime.max.replace(tzinfo=UTC)


def _start(day: date, zone: str) -> datetime:
    try:
        return datetime.combine(day, time(), tzinfo=ZoneInfo(zone)).astimezone(UTC)
    except OverflowError:  # the zone puts it before the year 1 or after 9999 in UTC
        return FIRST_MOMENT if day.year == 1 else LAST_MOMENT


def local_day(moment: datetime, zone: str) -> date:
    try:
        return moment.astimezone(ZoneInfo(zone)).date()
    except OverflowError:  # a day before the year 1 or after 9999 in the zone
        return date.min if moment.year == 1 else date.max


def day_of(moment: datetime, zone: str) -> Period:
    return day_period(local_day(moment, zone), zone)


def day_period(day: date, zone: str) -> Period:
    return Period(TocLevel.DAY, day.isoformat(), day, day, zone)


def _month_bounds(day: date) -> tuple[date, date]:
    return day.replace(day=1), day.replace(day=calendar.monthrange(day.year, day.month)[1])


def parent_of(period: Period) -> Period | None:
    """The period one level up (None for a year)."""
    day, zone = period.first_day, period.zone
    if period.level is TocLevel.DAY:
        month_first, month_last = _month_bounds(day)
        monday = day - timedelta(days=day.weekday())  # date.min is a Monday
        first = max(monday, month_first)
        last = month_last if month_last - monday < timedelta(days=6) else monday + timedelta(days=6)
        week = day.isocalendar().week
        return Period(TocLevel.WEEK, f"{day:%Y-%m}-W{week:02d}", first, last, zone)
    if period.level is TocLevel.WEEK:
        first, last = _month_bounds(day)
        return Period(TocLevel.MONTH, f"{day:%Y-%m}", first, last, zone)
    if period.level is TocLevel.MONTH:
        return Period(
            TocLevel.YEAR, f"{day:%Y}", date(day.year, 1, 1), date(day.year, 12, 31), zone
        )
    return None


def period_label(period: Period) -> str:
    """How a title names the period: ``Wed 25 Nov 2026``, ``Week 48 of Nov 2026``, …"""
    day = period.first_day
    if period.level is TocLevel.DAY:
        return f"{day:%a} {day.day} {day:%b %Y}"
    if period.level is TocLevel.WEEK:
        return f"Week {period.key.rsplit('W', 1)[1]} of {day:%b %Y}"
    if period.level is TocLevel.MONTH:
        return f"{day:%B %Y}"
    return f"{day:%Y}"
