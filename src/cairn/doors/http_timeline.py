"""The timeline's HTTP routes (``/v1/timeline/...``): a thin door over ``Memory``'s verbs,
trimmed by permission like every other route."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Depends, Query
from fastapi import Path as PathParam
from pydantic import Field

from cairn.doors.http_common import StrictBody, Who, api_router
from cairn.limits import MAX_EVENT_BATCH, MAX_TIMELINE_HITS
from cairn.memory import Memory
from cairn.model import (
    AppendReport,
    Event,
    EventCursor,
    EventDraft,
    Id,
    Name,
    QueryText,
    Timestamp,
    TocNode,
    event_cursor,
)
from cairn.timeline import views
from cairn.timeline.rollup import RollupReport

__all__ = ["timeline_router"]

NodeId = Annotated[str, PathParam(min_length=1, max_length=256, description="a timeline node id")]
GripId = Annotated[str, PathParam(min_length=1, max_length=128, description="a grip id, grp_…")]
Scope = Annotated[Name | None, Query(description="a scope glob")]


class AppendBody(StrictBody):
    events: list[EventDraft] = Field(min_length=1, max_length=MAX_EVENT_BATCH)


@dataclass(frozen=True)
class EventPaging:
    """Which page of ``GET /v1/timeline/events``: the one after the previous page's last
    event, this many long (FastAPI reads a dataclass dependency's fields as query
    parameters)."""

    after_ts: Annotated[
        Timestamp | None, Query(description="the ts of the last event of the previous page")
    ] = None
    after_id: Annotated[
        Id | None, Query(description="the event_id of the last event of the previous page")
    ] = None
    after_scope: Annotated[
        Name | None,
        Query(
            description="the scope of the last event of the previous page (the same id "
            "may stand at the same time in two scopes)"
        ),
    ] = None
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100

    def after(self) -> EventCursor | None:
        return event_cursor(self.after_ts, self.after_id, self.after_scope)


class RollupBody(StrictBody):
    piece: int = Field(default=20_000, ge=1, le=100_000, description="events per step")


def timeline_router(memory: Memory) -> APIRouter:
    router = api_router(under="/timeline", tags=["timeline"])

    @router.post(
        "/events",
        summary="Append events (idempotent by event id; the same id with other content is refused)",
    )
    def append(body: AppendBody, who: Who) -> AppendReport:
        return memory.append_events(body.events, principal=who)

    @router.get(
        "/events", summary="Events the caller may read, in source-time order, a page at a time"
    )
    def events(
        who: Who,
        scope: Scope = None,
        session_id: Name | None = None,
        since: Timestamp | None = None,
        until: Timestamp | None = None,
        *,  # keyword-only: a dependency with no default may follow the defaulted filters
        page: Annotated[EventPaging, Depends()],
    ) -> list[Event]:
        return memory.events(
            principal=who,
            scope=scope,
            session_id=session_id,
            since=since,
            until=until,
            after=page.after(),
            limit=page.limit,
        )

    @router.get("/root", summary="The years the caller may see")
    def root(who: Who, scope: Scope = None) -> list[TocNode]:
        return memory.timeline_root(principal=who, scope=scope)

    @router.get(
        "/nodes/{node_id}",
        summary="One node with its summary, grips and children (latest, or a version)",
    )
    def node(
        node_id: NodeId, who: Who, version: Annotated[int | None, Query(ge=1)] = None
    ) -> TocNode:
        return memory.timeline_node(node_id, principal=who, version=version)

    @router.get(
        "/nodes/{node_id}/children", summary="A node's children in time order, a page at a time"
    )
    def browse(
        node_id: NodeId,
        who: Who,
        after: Annotated[str | None, Query(max_length=256)] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 20,
    ) -> views.NodePage:
        return memory.timeline_browse(node_id, principal=who, after=after, limit=limit)

    @router.get("/grips/{grip_id}", summary="The events behind a grip, with context on either side")
    def expand(
        grip_id: GripId,
        who: Who,
        before: Annotated[int, Query(ge=0, le=50)] = 3,
        after: Annotated[int, Query(ge=0, le=50)] = 3,
    ) -> views.ExpandedGrip:
        return memory.expand_grip(grip_id, principal=who, before=before, after=after)

    @router.get("/search", summary="Teleport: the summaries and grips that best match a query")
    def search(
        who: Who,
        q: QueryText,
        scope: Scope = None,
        k: Annotated[int, Query(ge=1, le=MAX_TIMELINE_HITS)] = 10,
        since: Timestamp | None = None,
        until: Timestamp | None = None,
    ) -> views.TimelineHits:
        return memory.timeline_search(q, principal=who, scope=scope, k=k, since=since, until=until)

    @router.get("/recent", summary="What an agent starting work should read, within a token budget")
    def recent(
        who: Who,
        scope: Scope = None,
        session_id: Name | None = None,
        max_tokens: Annotated[int, Query(ge=50, le=100_000)] = 2000,
    ) -> views.RecentContext:
        return memory.timeline_recent(
            principal=who, scope=scope, session_id=session_id, max_tokens=max_tokens
        )

    @router.get(
        "/scan", summary="Read the raw events of a node's span (or a time range) for a query"
    )
    def scan(
        who: Who,
        q: QueryText,
        node_id: Annotated[str | None, Query(max_length=256)] = None,
        since: Timestamp | None = None,
        until: Timestamp | None = None,
        scope: Scope = None,
        k: Annotated[int, Query(ge=1, le=MAX_TIMELINE_HITS)] = 10,
    ) -> views.ScanReport:
        return memory.timeline_scan(
            q, principal=who, scope=scope, node_id=node_id, since=since, until=until, k=k
        )

    @router.post(
        "/rollup", summary="Summarise the events appended since the last rollup (curators)"
    )
    def rollup(who: Who, body: RollupBody | None = None) -> RollupReport:
        return memory.rollup(principal=who, piece=(body or RollupBody()).piece)

    @router.post("/rebuild", summary="Rebuild every summary from the stored events (curators)")
    def rebuild(who: Who) -> RollupReport:
        return memory.rebuild_timeline(principal=who)

    @router.get(
        "/status", summary="How far the timeline lags the event log (curators of every scope)"
    )
    def status(who: Who) -> views.TimelineStatus:
        return memory.timeline_status(principal=who)

    return router
