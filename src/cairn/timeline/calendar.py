"""The calendar periods of the hierarchy in the timeline's time zone.

A week is an ISO week cut at month ends, so every level nests exactly inside the one above
it: a day lies in one week, a week in one month, a month in one year.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from cairn.model import TocLevel

__all__ = ["Period", "day_of", "parent_of", "period_label"]


@dataclass(frozen=True)
class Period:
    level: TocLevel
    key: str
    first_day: date
    last_day: date  # inclusive
    zone: str

    @property
    def starts_at(self) -> datetime:
        return _start(self.first_day, self.zone)

    @property
    def ends_at(self) -> datetime:
        return _start(self.last_day + timedelta(days=1), self.zone)


def _start(day: date, zone: str) -> datetime:
    return datetime.combine(day, time(), tzinfo=ZoneInfo(zone)).astimezone(UTC)


def local_day(moment: datetime, zone: str) -> date:
    return moment.astimezone(ZoneInfo(zone)).date()


def day_of(moment: datetime, zone: str) -> Period:
    day = local_day(moment, zone)
    return Period(TocLevel.DAY, day.isoformat(), day, day, zone)


def _month_bounds(day: date) -> tuple[date, date]:
    first = day.replace(day=1)
    following = (first + timedelta(days=32)).replace(day=1)
    return first, following - timedelta(days=1)


def parent_of(period: Period) -> Period | None:
    """The period one level up (None for a year)."""
    day, zone = period.first_day, period.zone
    if period.level is TocLevel.DAY:
        month_first, month_last = _month_bounds(day)
        monday = day - timedelta(days=day.weekday())
        first = max(monday, month_first)
        last = min(monday + timedelta(days=6), month_last)
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
