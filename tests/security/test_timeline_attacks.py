"""Attacks on the timeline by an agent-key holder that are not about one door's input: events
that wedge the rollup for everyone, reads that cost more than they should, counts and
builds that only curators may see or run, and reads that would write.

(Hostile input on each door: ``test_timeline_inputs``; what a reader may not see, across
every door: ``test_leak_property``.)
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, cast

import pytest

from cairn.memory import Memory
from cairn.model import Event, Principal, PrincipalKind, TocNode
from cairn.store.base import EventText, Store
from cairn.timeline import reads
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


# ---- the scan's cost ---------------------------------------------------------------------


class Counting:
    """A store that counts the characters of event text and metadata its reads hand over."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.chars = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def list_events(self, *args: Any, **kwargs: Any) -> list[Event]:
        found: list[Event] = self.inner.list_events(*args, **kwargs)
        self.chars += sum(len(e.text) + len(json.dumps(e.metadata)) for e in found)
        return found

    def event_texts(self, *args: Any, **kwargs: Any) -> list[EventText]:
        found: list[EventText] = self.inner.event_texts(*args, **kwargs)
        self.chars += sum(len(e.text) for e in found)
        return found


def test_a_scan_reads_a_bounded_amount_of_text(memory: Memory, store: Store) -> None:
    """A scan read every event of its range whole, text and metadata: an agent that
    appended a day of megabyte events made every scan of that day read gigabytes."""
    big = {f"k{n}": "v" * 1_000 for n in range(60)}
    drafts = [
        event(f"huge{n}", T0 + timedelta(minutes=n), "backup " * 140_000).model_copy(
            update={"metadata": big}
        )
        for n in range(30)
    ]
    memory.append_events(drafts, principal=AGENT)
    counting = Counting(store)
    counted = Memory(cast(Store, counting), memory.policy_in_force, embedder=None)
    report = counted.timeline_scan(
        "backup", since=T0, until=T0 + timedelta(days=1), principal=AGENT
    )
    assert report.scanned == 30 and len(report.grips) == 10
    assert counting.chars <= 30 * reads.SCAN_EVENT_CHARS, counting.chars


def test_a_scan_stops_at_its_character_budget(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory.append_events(
        [event(f"e{n}", T0 + timedelta(minutes=n), "backup " * 600) for n in range(100)],
        principal=AGENT,
    )
    monkeypatch.setattr(reads, "MAX_SCAN_CHARS", 40 * 4_200)
    report = memory.timeline_scan(
        "backup", since=T0, until=T0 + timedelta(hours=12), principal=AGENT
    )
    assert report.truncated and 40 <= report.scanned < 100


# ---- the same ids in two scopes ----------------------------------------------------------


def test_the_same_event_ids_in_two_scopes_make_two_timelines(memory: Memory) -> None:
    """Producers choose event ids; two scopes may use the same ones. Each scope's grips
    point at its own events (a grip named only ids, so the second scope's grips were the
    first's rows, and expanding them answered "not found" to the second scope's readers)."""
    ours = conversation("e", T0, 6, scope="acme/app")
    theirs = [e.model_copy(update={"scope": "other/app"}) for e in ours]
    wide = Principal(id="wide", kind=PrincipalKind.AGENT, roles=("agent",), scopes=("*",))
    memory.append_events(ours, principal=AGENT)
    memory.append_events(theirs, principal=wide)
    memory.rollup(principal=CURATOR)
    outsider = Principal(id="oz", kind=PrincipalKind.AGENT, roles=("agent",), scopes=("other/*",))
    for reader, scope in ((AGENT, "acme/app"), (outsider, "other/app")):
        (year,) = memory.timeline_root(principal=reader)
        assert year.scope == scope and year.event_count == 6
        for grip in year.grips:
            expanded = memory.expand_grip(grip.grip_id, principal=reader)
            assert {e.scope for e in expanded.events} == {scope}
            assert grip.excerpt in " ".join(e.text for e in expanded.events)
    mine = {g.grip_id for n in _nodes(memory) if n.scope == "acme/app" for g in n.grips}
    yours = {g.grip_id for n in _nodes(memory) if n.scope == "other/app" for g in n.grips}
    assert mine and yours and not mine & yours
    scanned = memory.timeline_scan("jenkins", since=T0, until=T0 + timedelta(days=1),
                                   principal=CURATOR, k=100)  # fmt: skip
    assert len({g.grip_id for g in scanned.grips}) == len(scanned.grips) == 4  # 2 a scope
