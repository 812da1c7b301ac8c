"""The timeline through the public API, on both stores: the hierarchy a rollup builds from
events, node versions, grips that point at real events, incremental and late events,
determinism, and what a reader without permission sees (nothing)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cairn.errors import InvalidInput, NotFound, PermissionDenied
from cairn.governance.gate import Gate
from cairn.memory import Memory
from cairn.model import AuditQuery, EventRole, TocLevel, TocNode
from cairn.store.base import Store
from cairn.timeline.settings import TimelineSettings
from tests.factories import CURATOR
from tests.timeline.events import AGENT, OUTSIDER, READER, T0, conversation, event


def _all_nodes(memory: Memory) -> list[TocNode]:
    """Every node reachable from the root, depth first."""
    found: list[TocNode] = []

    def walk(node: TocNode) -> None:
        found.append(node)
        for child in node.children:
            walk(memory.timeline_node(child, principal=CURATOR))

    for year in memory.timeline_root(principal=CURATOR):
        walk(year)
    return found


def _content(node: TocNode) -> dict[str, object]:
    return node.model_dump(mode="json", exclude={"built_at"})


def _summary(node: TocNode) -> dict[str, object]:
    return node.model_dump(mode="json", exclude={"built_at", "version"})


def test_a_rollup_builds_the_hierarchy_from_events(memory: Memory) -> None:
    # two conversations on Monday (an hour apart: two segments), one on Tuesday
    memory.append_events(
        conversation("a", T0, 7)
        + conversation("b", T0 + timedelta(hours=1), 5)
        + conversation("c", T0 + timedelta(days=1), 4),
        principal=AGENT,
    )
    report = memory.rollup(principal=CURATOR)
    assert report.events == 16 and report.days == 2
    assert report.levels == {"segment": 3, "day": 2, "week": 1, "month": 1, "year": 1}

    (year,) = memory.timeline_root(principal=READER)
    assert (year.level, year.key, year.event_count) == (TocLevel.YEAR, "2026", 16)
    month = memory.timeline_node(year.children[0], principal=READER)
    assert (month.key, month.parent_id) == ("2026-03", year.node_id)
    week = memory.timeline_node(month.children[0], principal=READER)
    assert week.key == "2026-03-W10"
    monday, tuesday = (memory.timeline_node(c, principal=READER) for c in week.children)
    assert (monday.key, monday.event_count, len(monday.children)) == ("2026-03-02", 12, 2)
    assert (tuesday.key, tuesday.event_count, len(tuesday.children)) == ("2026-03-03", 4, 1)
    first, second = (memory.timeline_node(c, principal=READER) for c in monday.children)
    assert (first.event_count, second.event_count) == (7, 5)
    assert first.starts_at == T0 and first.ends_at == T0 + timedelta(minutes=12)
    assert second.first_ts == T0 + timedelta(hours=1)
    # a segment's summary: a title, 3 to 7 bullets each with a grip, keywords
    assert first.title.startswith("We should move the nightly build")
    assert 3 <= len(first.bullets) <= 7 and all(b.grip_ids for b in first.bullets)
    assert "jenkins" in first.keywords and first.summarizer == "extractive"
    # day bounds are the calendar day in the timeline's time zone
    assert monday.starts_at == datetime(2026, 3, 2, tzinfo=UTC)
    assert monday.ends_at == datetime(2026, 3, 3, tzinfo=UTC)
    # one audit entry per committed batch of nodes, by the system
    rollups = [
        a for a in memory.audit(AuditQuery(limit=100), principal=CURATOR) if a.action == "rollup"
    ]
    assert [a.details["nodes"] for a in rollups] == [8]


def test_browse_pages_through_children_in_time_order(memory: Memory) -> None:
    memory.append_events(
        [event(f"e{i}", T0 + timedelta(hours=i)) for i in range(5)], principal=AGENT
    )
    memory.rollup(principal=CURATOR)
    day = memory.timeline_node(
        memory.timeline_browse(
            memory.timeline_browse(
                memory.timeline_root(principal=READER)[0].children[0], principal=READER
            )
            .children[0]
            .node_id,
            principal=READER,
        )
        .children[0]
        .node_id,
        principal=READER,
    )
    assert day.level is TocLevel.DAY and len(day.children) == 5
    first = memory.timeline_browse(day.node_id, principal=READER, limit=2)
    second = memory.timeline_browse(day.node_id, principal=READER, after=first.next_after, limit=2)
    third = memory.timeline_browse(day.node_id, principal=READER, after=second.next_after, limit=2)
    listed = [c.node_id for page in (first, second, third) for c in page.children]
    assert listed == list(day.children)
    assert [c.starts_at for page in (first, second, third) for c in page.children] == [
        T0 + timedelta(hours=i) for i in range(5)
    ]
    assert third.next_after is None
    with pytest.raises(InvalidInput):
        memory.timeline_browse(day.node_id, principal=READER, after=day.node_id)


def test_every_grip_points_at_events_that_exist_and_hold_its_excerpt(memory: Memory) -> None:
    memory.append_events(
        conversation("a", T0, 20)
        + conversation("b", T0 + timedelta(days=3), 9, session="s2")
        + [
            event(
                "t1", T0 + timedelta(days=3, minutes=30), "", role=EventRole.TOOL, kind="tool_call"
            )
        ],
        principal=AGENT,
    )
    memory.rollup(principal=CURATOR)
    _assert_grips_hold(memory)


def _assert_grips_hold(memory: Memory) -> None:
    nodes = _all_nodes(memory)
    assert nodes
    for node in nodes:
        grips = {g.grip_id: g for g in node.grips}
        for bullet in node.bullets:
            assert bullet.grip_ids, f"a bullet of {node.node_id} has no grip"
            for grip_id in bullet.grip_ids:
                grip = grips[grip_id]
                expanded = memory.expand_grip(grip_id, principal=READER, before=0, after=0)
                covered = [e.event_id for e in expanded.events]
                assert covered[0] == grip.event_id_start and covered[-1] == grip.event_id_end
                holder = next(e for e in expanded.events if e.event_id == grip.event_id)
                assert grip.excerpt in holder.text
                assert node.starts_at <= holder.ts <= max(node.ends_at, node.last_ts or holder.ts)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=4 * 24 * 60),  # minute of four days
            st.text(
                alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")),
                max_size=120,
            ),
        ),
        min_size=1,
        max_size=40,
    )
)
def test_grips_hold_for_any_events(
    store: Store, tmp_path: Path, batch: list[tuple[int, str]]
) -> None:
    memory = Memory(store, _policy(), root=tmp_path, embedder=None)
    start = len(memory.events(principal=CURATOR, limit=10_000))
    memory.append_events(
        [
            event(f"p{start + i}", T0 + timedelta(minutes=m), text)
            for i, (m, text) in enumerate(batch)
        ],
        principal=AGENT,
    )
    memory.rollup(principal=CURATOR)
    _assert_grips_hold(memory)


def _policy():  # type: ignore[no-untyped-def]
    from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy

    return parse_policy(DEFAULT_POLICY_YAML)


def test_a_late_event_re_versions_only_its_ancestors(memory: Memory) -> None:
    memory.append_events(
        conversation("a", T0, 6)
        + conversation("b", T0 + timedelta(hours=2), 6)
        + conversation("c", T0 + timedelta(days=10), 6),
        principal=AGENT,
    )
    memory.rollup(principal=CURATOR)
    before = {n.node_id: n for n in _all_nodes(memory)}
    # arrives late, out of order, inside the second segment of the first day
    memory.append_events(
        [event("late9", T0 + timedelta(hours=2, minutes=3), "A late remark about flaky runners.")],
        principal=AGENT,
    )
    report = memory.rollup(principal=CURATOR)
    after = {n.node_id: n for n in _all_nodes(memory)}
    changed = {i for i in after if after[i].version != before[i].version}
    late_segment = next(
        n
        for n in after.values()
        if n.level is TocLevel.SEGMENT and n.first_ts == T0 + timedelta(hours=2)
    )
    ancestors = {late_segment.node_id}
    parent = late_segment.parent_id
    while parent is not None:
        ancestors.add(parent)
        parent = after[parent].parent_id
    assert changed == ancestors and len(changed) == 5
    assert report.nodes_written == 5
    assert all(after[i].version == 2 for i in changed)
    assert late_segment.event_count == 7
    # the earlier version is still readable, unchanged
    old = memory.timeline_node(late_segment.node_id, principal=READER, version=1)
    assert _content(old) == _content(before[late_segment.node_id])


def test_a_late_event_that_bridges_two_segments_retires_one(memory: Memory) -> None:
    memory.append_events(
        conversation("a", T0, 3) + conversation("b", T0 + timedelta(minutes=40), 3),
        principal=AGENT,
    )
    memory.rollup(principal=CURATOR)
    (day,) = [n for n in _all_nodes(memory) if n.level is TocLevel.DAY]
    assert len(day.children) == 2
    retired_id = day.children[1]
    # 4 + 20 + 20 minutes: the 36-minute pause becomes two short ones
    memory.append_events([event("x20", T0 + timedelta(minutes=24))], principal=AGENT)
    memory.rollup(principal=CURATOR)
    day = memory.timeline_node(day.node_id, principal=READER)
    assert len(day.children) == 1 and day.event_count == 7
    with pytest.raises(NotFound):
        memory.timeline_node(retired_id, principal=READER)
    assert not any(
        h.node_id == retired_id
        for h in memory.timeline_search("nightly build", principal=READER).hits
    )
    # a citation of it still shows what was cited, and its last version says it retired;
    # to a reader outside its scope it does not exist, at any version
    cited = memory.timeline_node(retired_id, principal=READER, version=1)
    assert (cited.version, cited.retired, cited.event_count) == (1, False, 3)
    assert memory.timeline_node(retired_id, principal=READER, version=2).retired
    for version in (1, 2):
        with pytest.raises(NotFound, match="no timeline node"):
            memory.timeline_node(retired_id, principal=OUTSIDER, version=version)


def test_a_rollup_with_nothing_new_writes_nothing(memory: Memory) -> None:
    memory.append_events(conversation("a", T0, 5), principal=AGENT)
    memory.rollup(principal=CURATOR)
    again = memory.rollup(principal=CURATOR)
    assert (again.events, again.nodes_written) == (0, 0)
    # a rebuild from the events alone comes out the same
    rebuilt = memory.rebuild_timeline(principal=CURATOR)
    assert rebuilt.nodes_written == 0 and rebuilt.events == 5


def test_summaries_are_the_same_on_two_runs(store: Store, tmp_path: Path) -> None:
    from cairn.store.sqlite import SqliteStore

    events = (
        conversation("a", T0, 11)
        + conversation("b", T0 + timedelta(hours=5), 8, session="s2")
        + conversation("c", T0 + timedelta(days=40), 6)
    )
    first = Memory(store, _policy(), root=tmp_path, embedder=None)
    second = Memory(SqliteStore(tmp_path / "other.db"), _policy(), root=tmp_path, embedder=None)
    for memory, order in ((first, events), (second, list(reversed(events)))):
        for start in range(0, len(order), 7):
            memory.append_events(order[start : start + 7], principal=AGENT)
        memory.rollup(principal=CURATOR, piece=5)
    # the versions differ (the two runs saw the events arrive in a different order); what
    # every node says does not
    assert [_summary(n) for n in _all_nodes(first)] == [_summary(n) for n in _all_nodes(second)]
    second.close()


def test_only_curators_build_and_nobody_sends_nodes(memory: Memory, store: Store) -> None:
    memory.append_events(conversation("a", T0, 3), principal=AGENT)
    with pytest.raises(PermissionDenied):
        memory.rollup(principal=AGENT)
    with pytest.raises(PermissionDenied):
        Gate(store, memory.policy_in_force).write_timeline([], CURATOR)
    with pytest.raises(PermissionDenied):
        memory.timeline_status(principal=READER)
    # a curator of some scopes neither reads the status nor builds: both report counts of
    # every scope's events
    scoped = CURATOR.model_copy(update={"id": "cur-acme", "scopes": ("acme/*",)})
    for verb in (memory.timeline_status, memory.rollup, memory.rebuild_timeline):
        with pytest.raises(PermissionDenied, match="curator of every scope"):
            verb(principal=scoped)
    status = memory.timeline_status(principal=CURATOR)
    assert status.lag == 3 and status.nodes == {}
    memory.rollup(principal=CURATOR)
    status = memory.timeline_status(principal=CURATOR)
    assert status.lag == 0 and status.nodes["segment"] == 1


def test_a_reader_outside_the_scope_sees_nothing_of_it(memory: Memory) -> None:
    memory.append_events(conversation("a", T0, 6), principal=AGENT)
    insider = AGENT.model_copy(update={"id": "other-bot", "scopes": ("other/*",)})
    memory.append_events(
        [
            *conversation("z", T0, 4, scope="other/secret"),
            event(
                "z9", T0 + timedelta(minutes=9), "zebra quartz secret plan", scope="other/secret"
            ),
        ],
        principal=insider,
    )
    memory.rollup(principal=CURATOR)
    secret = {n.node_id for n in _all_nodes(memory) if n.scope == "other/secret"}
    assert len(secret) == 5  # a segment, its day, week, month and year
    ours = memory.timeline_root(principal=READER)
    assert [n.scope for n in ours] == ["acme/app"]
    assert all(n.event_count == 6 for n in ours)
    for node_id in secret:
        with pytest.raises(NotFound) as caught:
            memory.timeline_node(node_id, principal=READER)
        assert "secret" not in str(caught.value)
        with pytest.raises(NotFound):
            memory.timeline_browse(node_id, principal=READER)
    secret_grips = {
        g.grip_id for n in _all_nodes(memory) if n.scope == "other/secret" for g in n.grips
    }
    for grip_id in secret_grips:
        with pytest.raises(NotFound):
            memory.expand_grip(grip_id, principal=READER)
    assert memory.timeline_search("zebra quartz", principal=READER).hits == ()
    # and the other way round
    assert [n.scope for n in memory.timeline_root(principal=OUTSIDER)] == ["other/secret"]
    assert all(
        h.node_id in secret
        for h in memory.timeline_search("nightly build", principal=OUTSIDER).hits
    )
    assert all("zebra" not in i.text for i in memory.timeline_recent(principal=READER).items)
    scan = memory.timeline_scan(
        "zebra quartz", principal=READER, since=T0, until=T0 + timedelta(days=1)
    )
    assert scan.grips == () and scan.scanned == 6
    # the insider does see it
    hits = memory.timeline_search("zebra quartz", principal=insider).hits
    assert hits and all(h.node_id in secret for h in hits)


def test_teleport_finds_the_segment_and_its_grip(memory: Memory) -> None:
    memory.append_events(
        [
            *conversation("a", T0, 7),
            event("k0", T0 + timedelta(days=2), "The invoice service leaks file handles."),
            event("k1", T0 + timedelta(days=2, minutes=1), "Close the handles in the retry loop."),
            *conversation("c", T0 + timedelta(days=5), 7),
        ],
        principal=AGENT,
    )
    memory.rollup(principal=CURATOR)
    memory.index_pending()  # the background worker's job in a server
    found = memory.timeline_search("invoice handles leak", principal=READER)
    assert found.warnings == ()  # the index was free and every entry had its vector
    hits = found.hits
    best = hits[0]
    assert best.level is TocLevel.SEGMENT and best.starts_at == T0 + timedelta(days=2)
    assert set(best.signals) == {"keyword", "vector"}
    expanded = memory.expand_grip(best.grip_ids[0], principal=READER, before=0, after=0)
    assert {e.event_id for e in expanded.events} & {"k0", "k1"}
    # limited to a time range at the source
    late = memory.timeline_search(
        "invoice handles leak", principal=READER, since=T0 + timedelta(days=3)
    )
    assert all(h.starts_at >= T0 + timedelta(days=3) for h in late.hits)


def test_expand_grip_gives_context_on_both_sides(memory: Memory) -> None:
    memory.append_events(conversation("a", T0, 21), principal=AGENT)
    memory.rollup(principal=CURATOR)
    (segment,) = [n for n in _all_nodes(memory) if n.level is TocLevel.SEGMENT]
    middle = segment.grips[len(segment.grips) // 2]
    expanded = memory.expand_grip(middle.grip_id, principal=READER, before=2, after=3)
    ids = [e.event_id for e in (*expanded.before, *expanded.events, *expanded.after)]
    numbers = [int(i[1:]) for i in ids]
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))
    assert len(expanded.before) == 2 and len(expanded.after) == 3
    with pytest.raises(InvalidInput):
        memory.expand_grip(middle.grip_id, principal=READER, before=51)
    with pytest.raises(NotFound):
        memory.expand_grip("grp_nothing", principal=READER)


def test_recent_context_is_newest_first_within_the_budget(memory: Memory) -> None:
    memory.append_events(
        conversation("a", T0, 7)
        + conversation("b", T0 + timedelta(days=1), 7, session="s2")
        + conversation("c", T0 + timedelta(days=2), 7, session="s3"),
        principal=AGENT,
    )
    memory.rollup(principal=CURATOR)
    recent = memory.timeline_recent(principal=READER, max_tokens=400)
    assert recent.tokens <= 400 and recent.clipped
    starts = [i.starts_at for i in recent.items if i.level is TocLevel.SEGMENT]
    assert starts and starts[0] == T0 + timedelta(days=2)
    assert starts == sorted(starts, reverse=True)
    for item in recent.items:
        node = memory.timeline_node(item.node_id, principal=READER, version=item.version)
        assert item.text == node.title or item.text in {b.text for b in node.bullets}
    only_s2 = memory.timeline_recent(principal=READER, session_id="s2", max_tokens=5000)
    assert {i.starts_at.date() for i in only_s2.items if i.level is TocLevel.SEGMENT} == {
        (T0 + timedelta(days=1)).date()
    }


def test_scan_reads_raw_events_of_a_node(memory: Memory) -> None:
    memory.append_events(
        [
            *conversation("a", T0, 7),
            event("m1", T0 + timedelta(days=1), "The mango deploy failed twice."),
        ],
        principal=AGENT,
    )
    memory.rollup(principal=CURATOR)
    (year,) = memory.timeline_root(principal=READER)
    found = memory.timeline_scan("mango deploy", principal=READER, node_id=year.node_id)
    assert [g.event_id for g in found.grips] == ["m1"]
    assert found.grips[0].excerpt == "The mango deploy failed twice."
    assert found.scanned == 8 and not found.truncated
    with pytest.raises(InvalidInput):
        memory.timeline_scan("mango", principal=READER)


def test_separate_agents_get_separate_timelines(store: Store, tmp_path: Path) -> None:
    memory = Memory(
        store, _policy(), root=tmp_path, embedder=None,
        timeline=TimelineSettings(agents="separate"),
    )  # fmt: skip
    memory.append_events(
        conversation("a", T0, 4, agent="claude-code") + conversation("b", T0, 4, agent="codex"),
        principal=AGENT,
    )
    memory.rollup(principal=CURATOR)
    years = memory.timeline_root(principal=READER)
    assert sorted(y.agent or "" for y in years) == ["claude-code", "codex"]
    assert all(y.event_count == 4 for y in years)


def test_days_follow_the_configured_time_zone(store: Store, tmp_path: Path) -> None:
    memory = Memory(
        store, _policy(), root=tmp_path, embedder=None,
        timeline=TimelineSettings(timezone="America/New_York"),
    )  # fmt: skip
    # 01:00 UTC on 3 March is still 2 March in New York
    memory.append_events([event("e0", datetime(2026, 3, 3, 1, 0, tzinfo=UTC))], principal=AGENT)
    memory.rollup(principal=CURATOR)
    (day,) = [n for n in _all_nodes(memory) if n.level is TocLevel.DAY]
    assert day.key == "2026-03-02"
    assert day.starts_at == datetime(2026, 3, 2, 5, 0, tzinfo=UTC)


def test_the_background_rollup_follows_appends(store: Store, tmp_path: Path) -> None:
    off = Memory(
        store, _policy(), root=tmp_path, embedder=None,
        timeline=TimelineSettings(rollup_every_seconds=0),
    )  # fmt: skip
    assert off.start_timeline() is None
    memory = Memory(
        store, _policy(), root=tmp_path, embedder=None,
        timeline=TimelineSettings(rollup_every_seconds=3600),
    )  # fmt: skip
    worker = memory.start_timeline()
    assert worker is not None and worker.wait_idle(30)
    memory.append_events(conversation("a", T0, 5), principal=AGENT)
    # woken by the append, not by the hourly poll
    assert worker.wait_idle(30)
    assert memory.timeline_status(principal=CURATOR).lag == 0
    assert [y.event_count for y in memory.timeline_root(principal=READER)] == [5]
    memory.close()
    assert not worker._thread.is_alive()


@pytest.mark.parametrize("k", [0, 101, 10_000])
def test_a_timeline_search_or_scan_returns_1_to_100_hits_at_the_kernel(
    memory: Memory, k: int
) -> None:
    # the bound is the kernel's, not only the doors': a library caller meets it too
    with pytest.raises(InvalidInput, match="k must be between 1 and 100") as caught:
        memory.timeline_search("nightly build", principal=READER, k=k)
    assert caught.value.field == "k"
    with pytest.raises(InvalidInput, match="k must be between 1 and 100"):
        memory.timeline_scan(
            "nightly build", principal=READER, since=T0, until=T0 + timedelta(days=1), k=k
        )
