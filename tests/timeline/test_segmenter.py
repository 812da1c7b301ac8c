"""Segment boundaries, as a pure function: the gap rule, the token rule, and the overlap
each segment starts with (bounded by time and by tokens)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cairn.model import Acl, Event, EventRole
from cairn.timeline.segmenter import SegmentRules, event_tokens, segment_events

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def _event(i: int, minute: float, chars: int = 40) -> Event:
    return Event(
        event_id=f"e{i:03d}",
        ts=T0 + timedelta(minutes=minute),
        session_id="s",
        scope="acme/app",
        role=EventRole.USER,
        kind="user_message",
        text="x" * chars,
        acl=Acl(),
        appended_at=T0,
        appended_by="bot",
    )


def _ids(events: tuple[Event, ...]) -> list[str]:
    return [e.event_id for e in events]


def test_a_gap_of_the_threshold_closes_a_segment_and_a_shorter_one_does_not() -> None:
    rules = SegmentRules(gap=timedelta(minutes=30))
    events = [_event(0, 0), _event(1, 29.99), _event(2, 59.99), _event(3, 100)]
    segments = segment_events(events, rules)
    # 0→1: 29.99 min (kept); 1→2: exactly 30 (closes); 2→3: 40.01 (closes)
    assert [_ids(s.events) for s in segments] == [["e000", "e001"], ["e002"], ["e003"]]
    # a 30-minute pause leaves nothing within the 5-minute overlap
    assert all(s.overlap == () for s in segments)


def test_the_token_rule_closes_before_an_event_that_would_pass_the_limit() -> None:
    rules = SegmentRules(max_tokens=100, overlap=timedelta(0), overlap_tokens=0)
    events = [_event(i, i, chars=160) for i in range(6)]  # 40 tokens each
    assert event_tokens(events[0]) == 40
    segments = segment_events(events, rules)
    assert [_ids(s.events) for s in segments] == [
        ["e000", "e001"],
        ["e002", "e003"],
        ["e004", "e005"],
    ]
    assert all(s.tokens <= 100 for s in segments)
    # an event larger than the limit is a segment of its own
    big = [_event(0, 0, chars=40), _event(1, 1, chars=4000), _event(2, 2, chars=40)]
    assert [_ids(s.events) for s in segment_events(big, rules)] == [["e000"], ["e001"], ["e002"]]


def test_the_overlap_is_bounded_by_minutes() -> None:
    rules = SegmentRules(max_tokens=100, overlap=timedelta(minutes=5), overlap_tokens=10_000)
    # 40 tokens every 3 minutes: the token rule cuts after every second event
    events = [_event(i, 3 * i, chars=160) for i in range(4)]
    first, second = segment_events(events, rules)
    assert _ids(second.events) == ["e002", "e003"]
    # e001 is 3 minutes before e002 (within 5), e000 is 6 minutes before (outside)
    assert _ids(second.overlap) == ["e001"]
    assert first.overlap == ()


def test_the_overlap_is_bounded_by_tokens() -> None:
    rules = SegmentRules(max_tokens=120, overlap=timedelta(minutes=60), overlap_tokens=90)
    events = [_event(i, i, chars=160) for i in range(6)]  # 40 tokens a minute
    segments = segment_events(events, rules)
    assert [_ids(s.events) for s in segments] == [
        ["e000", "e001", "e002"],
        ["e003", "e004", "e005"],
    ]
    # within the hour all three would fit; 90 tokens admit two of the previous events
    assert _ids(segments[1].overlap) == ["e001", "e002"]
    none = SegmentRules(max_tokens=120, overlap=timedelta(minutes=60), overlap_tokens=39)
    assert segment_events(events, none)[1].overlap == ()


def test_no_events_no_segments() -> None:
    assert segment_events([], SegmentRules()) == []
