"""The rollup job: events → segments → day → week → month → year, incrementally.

The job follows the event outbox. For each piece of it, it marks the days the new events
fall in, rebuilds those days from *all* their stored events (so a late, out-of-order event
re-cuts only its own day), then the week, month and year above each, from their children's
latest versions. A node whose content came out unchanged is not written; a changed one
gets a new version. A piece's nodes are committed, then the outbox cursor moves past the
piece: the cursor is the checkpoint. Killed anywhere, the job resumes at the first piece
not acknowledged and, since a build is a pure function of the stored events, writes
exactly what an uninterrupted run would have written (nodes it had already written come
out unchanged and are skipped).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields
from datetime import date, datetime

from pydantic import BaseModel, Field

from cairn.governance.gate import Gate
from cairn.limits import MAX_EVENT_BATCH
from cairn.model import Acl, Event, EventCursor, Principal, TocLevel, TocNode
from cairn.store.base import (
    AclRow,
    ChunkDraft,
    EventFilter,
    PutTocNode,
    Store,
    TocFilter,
)
from cairn.timeline import ids
from cairn.timeline.calendar import LAST_MOMENT, Period, day_of, day_period, parent_of, period_label
from cairn.timeline.segmenter import Segment, segment_events
from cairn.timeline.settings import TimelineSettings
from cairn.timeline.summarize import Summarizer, Summary

__all__ = [
    "CONSUMER",
    "Partition",
    "RollupProgress",
    "RollupReport",
    "rebuild_all",
    "run_rollup",
]

CONSUMER = "timeline"
# Nodes per transaction: large enough to amortise a commit, small enough to keep one short.
WRITE_BATCH = 500
# How much of a stretch's conversation a bullet's index entry carries.
MAX_INDEXED_CHARS = 1500
_MAX_CHILDREN = 100_000


@dataclass(frozen=True)
class Partition:
    """One hierarchy: a scope's events under one ACL (and one agent when agents keep
    separate timelines), with the ids the store interned them under."""

    key: str
    scope: str
    acl: Acl
    agent: str | None
    scope_id: int
    acl_id: int


class RollupReport(BaseModel):
    """What a rollup did: events read, days rebuilt, node versions written (by level)."""

    events: int = 0
    days: int = 0
    nodes_written: int = 0
    pieces: int = 0
    levels: dict[str, int] = Field(default_factory=dict)


@dataclass(frozen=True)
class RollupProgress:
    """Where a run stands, after each committed batch of nodes. ``total``: the events that
    were waiting when the run began (0 when not known)."""

    pieces: int
    events: int
    nodes_written: int
    acknowledged: bool
    total: int = 0


def run_rollup(
    store: Store,
    gate: Gate,
    settings: TimelineSettings,
    summarizer: Summarizer,
    principal: Principal,
    *,
    piece: int = 20_000,
    max_pieces: int | None = None,
    on_progress: Callable[[RollupProgress], None] | None = None,
) -> RollupReport:
    """Bring the timeline up to date with the event log (see the module docstring)."""
    report = RollupReport()
    builder = _Builder(store, settings, summarizer, gate.clock())
    total = store.outbox_lag(CONSUMER) if on_progress is not None else 0
    while max_pieces is None or report.pieces < max_pieces:
        batch = store.outbox(CONSUMER, limit=piece)
        if not batch:
            break
        dirty = builder.dirty_days(e for _, e in batch)
        nodes = builder.build(dirty)
        _write(store, gate, principal, nodes, report, on_progress, total)
        store.ack_outbox(CONSUMER, batch[-1][0])
        report.pieces += 1
        report.events += len(batch)
        report.days += sum(len(days) for days in dirty.values())
        if on_progress is not None:
            on_progress(
                RollupProgress(report.pieces, report.events, report.nodes_written, True, total)
            )
    return report


def rebuild_all(
    store: Store,
    gate: Gate,
    settings: TimelineSettings,
    summarizer: Summarizer,
    principal: Principal,
    *,
    on_progress: Callable[[RollupProgress], None] | None = None,
) -> RollupReport:
    """Rebuild every day that holds events (and everything above), from the events alone."""
    report = RollupReport()
    builder = _Builder(store, settings, summarizer, gate.clock())
    every = EventFilter(acl_ids=frozenset(row.id for row in store.acls()), scope_ids=None)
    dirty: dict[str, set[date]] = defaultdict(set)
    after: EventCursor | None = None
    while True:
        page = store.list_events(every, after=after, limit=MAX_EVENT_BATCH)
        for key, days in builder.dirty_days(page).items():
            dirty[key] |= days
        report.events += len(page)
        if len(page) < MAX_EVENT_BATCH:
            break
        # (every scope: the same id may stand at the same time in two)
        after = (page[-1].ts, page[-1].event_id, page[-1].scope)
    _write(store, gate, principal, builder.build(dirty), report, on_progress, report.events)
    report.days = sum(len(days) for days in dirty.values())
    return report


def _write(
    store: Store,
    gate: Gate,
    principal: Principal,
    nodes: Sequence[tuple[TocNode, tuple[ChunkDraft, ...]]],
    report: RollupReport,
    on_progress: Callable[[RollupProgress], None] | None,
    total: int,
) -> None:
    heads = store.toc_heads([n.node_id for n, _ in nodes])
    writes: list[PutTocNode] = []
    for node, chunks in nodes:
        head = heads.get(node.node_id)
        if head is not None and head[1] == node.digest():
            continue
        version = head[0] + 1 if head is not None else 1
        writes.append(PutTocNode(node.model_copy(update={"version": version}), chunks))
    for start in range(0, len(writes), WRITE_BATCH):
        part = writes[start : start + WRITE_BATCH]
        gate.write_timeline(part, principal)
        report.nodes_written += len(part)
        for write in part:
            level = write.node.level.value
            report.levels[level] = report.levels.get(level, 0) + 1
        if on_progress is not None:
            on_progress(
                RollupProgress(report.pieces, report.events, report.nodes_written, False, total)
            )


class _Builder:
    def __init__(
        self, store: Store, settings: TimelineSettings, summarizer: Summarizer, now: datetime
    ) -> None:
        self.store = store
        self.settings = settings
        self.summarizer = summarizer
        self.now = now
        self.rules = settings.rules()
        self.partitions: dict[str, Partition] = {}

    # ---- which days changed ---------------------------------------------------------

    def partition_of(self, event: Event) -> Partition:
        agent = event.agent if self.settings.agents == "separate" else None
        key = ids.partition_key(event.scope, event.acl, agent)
        known = self.partitions.get(key)
        if known is None:
            known = Partition(
                key, event.scope, event.acl, agent, *self._interned(event.scope, event.acl)
            )
            self.partitions[key] = known
        return known

    def _interned(self, scope: str, acl: Acl) -> tuple[int, int]:
        scope_id = next(i for i, s in self.store.scopes().items() if s == scope)
        wanted = AclRow(
            0, tuple(sorted(acl.roles)), tuple(sorted(acl.labels)), acl.sensitivity.rank
        )
        acl_id = next(
            row.id
            for row in self.store.acls()
            if (row.roles, row.labels, row.sensitivity)
            == (wanted.roles, wanted.labels, wanted.sensitivity)
        )
        return scope_id, acl_id

    def dirty_days(self, events: Iterable[Event]) -> dict[str, set[date]]:
        dirty: dict[str, set[date]] = defaultdict(set)
        for event in events:
            dirty[self.partition_of(event).key].add(
                day_of(event.ts, self.settings.timezone).first_day
            )
        return dirty

    # ---- building ---------------------------------------------------------------------

    def build(self, dirty: dict[str, set[date]]) -> list[tuple[TocNode, tuple[ChunkDraft, ...]]]:
        built: list[tuple[TocNode, tuple[ChunkDraft, ...]]] = []
        for key in sorted(dirty):
            part = self.partitions[key]
            fresh: dict[str, TocNode] = {}
            periods: dict[str, Period] = {}
            for day in sorted(dirty[key]):
                period = day_period(day, self.settings.timezone)
                for node, chunks in self._build_day(part, period):
                    built.append((node, chunks))
                    fresh[node.node_id] = node
                periods[ids.node_id(part.key, TocLevel.DAY, period.key)] = period
            # Then each level above, from its children's latest versions and the fresh ones.
            for _level in (TocLevel.WEEK, TocLevel.MONTH, TocLevel.YEAR):
                parents: dict[str, Period] = {}
                for period in periods.values():
                    above = parent_of(period)
                    assert above is not None
                    parents[ids.node_id(part.key, above.level, above.key)] = above
                for node_id, period in sorted(parents.items()):
                    rolled = self._rollup(part, node_id, period, fresh)
                    if rolled is not None:
                        built.append((rolled, _summary_chunks(rolled)))
                        fresh[rolled.node_id] = rolled
                periods = parents
        return built

    def _events(self, part: Partition, period: Period) -> list[Event]:
        where = EventFilter(
            acl_ids=frozenset({part.acl_id}),
            scope_ids=frozenset({part.scope_id}),
            since=period.starts_at,
            # the last day a date holds runs to the end of time, its last microsecond too
            until=None if period.ends_at == LAST_MOMENT else period.ends_at,
            agent=part.agent,
        )
        found: list[Event] = []
        after: tuple[datetime, str] | None = None
        while True:
            page = self.store.list_events(where, after=after, limit=MAX_EVENT_BATCH)
            # Only this partition's: the ACL and scope are the filter, the agent too when
            # agents keep separate timelines.
            found.extend(e for e in page if e.scope == part.scope and e.acl == part.acl)
            if len(page) < MAX_EVENT_BATCH:
                return found
            after = (page[-1].ts, page[-1].event_id)

    def _children(self, part: Partition, parent_id: str, level: TocLevel) -> list[TocNode]:
        return self.store.toc_nodes(
            TocFilter(
                acl_ids=frozenset({part.acl_id}),
                scope_ids=frozenset({part.scope_id}),
                levels=frozenset({level.value}),
                parent_id=parent_id,
            ),
            limit=_MAX_CHILDREN,
        )

    def _build_day(
        self, part: Partition, period: Period
    ) -> list[tuple[TocNode, tuple[ChunkDraft, ...]]]:
        day_id = ids.node_id(part.key, TocLevel.DAY, period.key)
        events = self._events(part, period)
        out: list[tuple[TocNode, tuple[ChunkDraft, ...]]] = []
        segments: list[TocNode] = []
        for segment in segment_events(events, self.rules):
            node = self._segment_node(part, day_id, segment)
            segments.append(node)
            out.append((node, _segment_chunks(node, segment)))
        kept = {n.node_id for n in segments}
        for old in self._children(part, day_id, TocLevel.SEGMENT):
            if old.node_id not in kept:
                # Later events joined it to another segment: it leaves the hierarchy (and the
                # index) by a new version; its earlier versions stay readable.
                out.append((old.model_copy(update={"retired": True, "built_at": self.now}), ()))
        if segments:
            summary = self.summarizer.summarize_children(period_label(period), segments)
            day = self._node(part, day_id, period, summary, segments)
            out.append((day, _summary_chunks(day)))
        return out

    def _segment_node(self, part: Partition, day_id: str, segment: Segment) -> TocNode:
        first, last = segment.events[0], segment.events[-1]
        summary = self.summarizer.summarize_events(segment.events, segment.overlap)
        return TocNode(
            node_id=ids.node_id(part.key, TocLevel.SEGMENT, ids.segment_slug(first.event_id)),
            version=0,
            level=TocLevel.SEGMENT,
            key=first.ts.isoformat(),
            scope=part.scope,
            acl=part.acl,
            agent=part.agent,
            parent_id=day_id,
            starts_at=first.ts,
            ends_at=last.ts,
            first_ts=first.ts,
            last_ts=last.ts,
            event_count=len(segment.events),
            sessions=tuple(sorted({e.session_id for e in segment.events})),
            **_summary_fields(summary),
            built_at=self.now,
        )

    def _rollup(
        self, part: Partition, node_id: str, period: Period, fresh: dict[str, TocNode]
    ) -> TocNode | None:
        below = {
            TocLevel.WEEK: TocLevel.DAY,
            TocLevel.MONTH: TocLevel.WEEK,
            TocLevel.YEAR: TocLevel.MONTH,
        }[period.level]
        children = {n.node_id: n for n in self._children(part, node_id, below)}
        children.update(
            {k: n for k, n in fresh.items() if n.parent_id == node_id and n.level is below}
        )
        ordered = sorted(
            (n for n in children.values() if not n.retired), key=lambda n: (n.starts_at, n.node_id)
        )
        if not ordered:
            return None
        summary = self.summarizer.summarize_children(period_label(period), ordered)
        return self._node(part, node_id, period, summary, ordered)

    def _node(
        self,
        part: Partition,
        node_id: str,
        period: Period,
        summary: Summary,
        children: Sequence[TocNode],
    ) -> TocNode:
        above = parent_of(period)
        firsts = [c.first_ts for c in children if c.first_ts is not None]
        lasts = [c.last_ts for c in children if c.last_ts is not None]
        return TocNode(
            node_id=node_id,
            version=0,
            level=period.level,
            key=period.key,
            scope=part.scope,
            acl=part.acl,
            agent=part.agent,
            parent_id=ids.node_id(part.key, above.level, above.key) if above else None,
            starts_at=period.starts_at,
            ends_at=period.ends_at,
            first_ts=min(firsts) if firsts else None,
            last_ts=max(lasts) if lasts else None,
            event_count=sum(c.event_count for c in children),
            children=tuple(c.node_id for c in children),
            sessions=tuple(sorted({s for c in children for s in c.sessions}))[:64],
            **_summary_fields(summary),
            built_at=self.now,
        )


def _summary_fields(summary: Summary) -> dict[str, object]:
    """Each field of ``summary``, as is (a node has a field of each name)."""
    return {f.name: getattr(summary, f.name) for f in fields(summary)}


def _summary_chunks(node: TocNode) -> tuple[ChunkDraft, ...]:
    """A node is found by its title and keywords (chunk ``s``)."""
    text = f"{node.title}\n{' '.join(node.keywords)}"
    return (ChunkDraft("s", node.title, 0, len(text), text),)


def _segment_chunks(node: TocNode, segment: Segment) -> tuple[ChunkDraft, ...]:
    """A segment is also found by each bullet's stretch of conversation (chunk ``b<i>``):
    the bullet, then the text of the events its grip covers."""
    position = {e.event_id: i for i, e in enumerate(segment.events)}
    grips = {g.grip_id: g for g in node.grips}
    chunks = list(_summary_chunks(node))
    for i, bullet in enumerate(node.bullets):
        grip = grips[bullet.grip_ids[0]]
        stretch = segment.events[position[grip.event_id_start] : position[grip.event_id_end] + 1]
        spoken = "\n".join(e.text for e in stretch if e.text and e.text != bullet.text)
        text = f"{bullet.text}\n{spoken}"[:MAX_INDEXED_CHARS]
        chunks.append(ChunkDraft(f"b{i}", node.title, 0, len(text), text))
    return tuple(chunks)
