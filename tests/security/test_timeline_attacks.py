"""Attacks on the timeline by an agent-key holder that are not about one door's input: events
that wedge the rollup for everyone, reads that cost more than they should, counts and
builds that only curators may see or run, and reads that would write.

(Hostile input on each door: ``test_timeline_inputs``; what a reader may not see, across
every door: ``test_leak_property``.)
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from cairn.memory import Memory
from cairn.model import TocNode
from cairn.timeline.settings import TimelineSettings
from tests.factories import CURATOR
from tests.timeline.events import AGENT, T0, conversation, event


def _nodes(memory: Memory) -> list[TocNode]:
    found: list[TocNode] = []
    stack = list(memory.timeline_root(principal=CURATOR))
    while stack:
        node = stack.pop()
        found.append(node)
        stack += [memory.timeline_node(c, principal=CURATOR) for c in node.children]
    return found


# ---- the ends of time --------------------------------------------------------------------

EDGES = [
    datetime(1, 1, 1, tzinfo=UTC),
    datetime(1, 1, 1, 0, 30, tzinfo=UTC),
    datetime(1, 1, 1, 23, 59, tzinfo=timezone(timedelta(hours=-5))),
    datetime(9999, 12, 31, 12, tzinfo=UTC),
    datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    datetime(9999, 12, 31, 20, tzinfo=timezone(timedelta(hours=3))),
]


@pytest.mark.parametrize("zone", ["UTC", "America/New_York", "Pacific/Kiritimati", "Etc/GMT+12"])
def test_events_at_the_ends_of_time_do_not_wedge_the_rollup(memory: Memory, zone: str) -> None:
    """One event in the last hours of the year 9999 (or the first of the year 1, west of
    UTC) made every rollup fail with OverflowError at the same piece: the timeline stopped
    for every scope, for good."""
    memory.timeline_settings = TimelineSettings(timezone=zone)
    memory.append_events(
        [event(f"edge{n}", at, f"edge of time {n}") for n, at in enumerate(EDGES)],
        principal=AGENT,
    )
    memory.rollup(principal=CURATOR)
    memory.append_events(conversation("a", T0, 3), principal=AGENT)
    report = memory.rollup(principal=CURATOR)
    assert report.events == 3 and memory.timeline_status(principal=CURATOR).lag == 0
    years = memory.timeline_root(principal=AGENT)
    assert sum(y.event_count for y in years) == len(EDGES) + 3
    for node in _nodes(memory):
        assert node.starts_at <= node.ends_at  # (a segment of one event: equal)
        if node.first_ts is not None:
            assert node.starts_at <= node.first_ts <= node.last_ts  # type: ignore[operator]
    # every event is in exactly one segment, and a scan of its node finds it
    segments = [n for n in _nodes(memory) if n.level.value == "segment"]
    assert sum(s.event_count for s in segments) == len(EDGES) + 3
    for year in years:
        scanned = memory.timeline_scan("edge", node_id=year.node_id, principal=AGENT)
        assert scanned.scanned == year.event_count
    assert memory.rebuild_timeline(principal=CURATOR).nodes_written == 0
