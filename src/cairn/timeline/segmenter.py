"""Cutting a day's events into segments: a pure function of the events and the rules.

A segment closes before an event that comes ``gap`` or more after the previous one, or that
would take the segment past ``max_tokens`` (an event larger than that is a segment of its
own), and always at the end of the day, so a day's segments depend on that day's events
only. Each segment after the first of its day starts with an *overlap*: the previous
segment's last events, as many as fit within ``overlap`` of the segment's first event and
within ``overlap_tokens``; they are context for its summary, not part of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from cairn.model import Event
from cairn.retrieval.budget import estimate_tokens

__all__ = ["Segment", "SegmentRules", "event_tokens", "segment_events"]


@dataclass(frozen=True)
class SegmentRules:
    gap: timedelta = timedelta(minutes=30)
    max_tokens: int = 4000
    overlap: timedelta = timedelta(minutes=5)
    overlap_tokens: int = 500


@dataclass(frozen=True)
class Segment:
    events: tuple[Event, ...]
    overlap: tuple[Event, ...] = ()

    @property
    def tokens(self) -> int:
        return sum(event_tokens(e) for e in self.events)


def event_tokens(event: Event) -> int:
    """An event costs its text's tokens, and at least one (a tool call with no text still
    takes room in a conversation)."""
    return max(1, estimate_tokens(event.text))


def segment_events(events: Sequence[Event], rules: SegmentRules) -> list[Segment]:
    """``events`` (one day's, in source-time order) cut into segments."""
    groups: list[list[Event]] = []
    tokens = 0
    for event in events:
        cost = event_tokens(event)
        current = groups[-1] if groups else None
        if (
            current is None
            or event.ts - current[-1].ts >= rules.gap
            or tokens + cost > rules.max_tokens
        ):
            groups.append([event])
            tokens = cost
        else:
            current.append(event)
            tokens += cost
    segments: list[Segment] = []
    for i, group in enumerate(groups):
        overlap = _overlap(groups[i - 1], group[0], rules) if i else ()
        segments.append(Segment(tuple(group), overlap))
    return segments


def _overlap(previous: list[Event], first: Event, rules: SegmentRules) -> tuple[Event, ...]:
    taken: list[Event] = []
    tokens = 0
    for event in reversed(previous):
        cost = event_tokens(event)
        if first.ts - event.ts > rules.overlap or tokens + cost > rules.overlap_tokens:
            break
        taken.append(event)
        tokens += cost
    return tuple(reversed(taken))
