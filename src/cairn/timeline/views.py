"""What timeline reads answer with: the same objects on every door."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from cairn.model import CairnModel, Event, Grip, TocLevel, TocNode

__all__ = [
    "ExpandedGrip",
    "NodeHeader",
    "NodePage",
    "RecentContext",
    "RecentItem",
    "ScanReport",
    "TeleportHit",
    "TimelineHits",
    "TimelineStatus",
]


class NodeHeader(CairnModel):
    """A node as a child listing shows it."""

    node_id: str
    version: int
    level: TocLevel
    key: str
    title: str
    starts_at: datetime
    ends_at: datetime
    event_count: int

    @classmethod
    def of(cls, node: TocNode) -> NodeHeader:
        # every field of a header is the node's field of the same name
        return cls(**{name: getattr(node, name) for name in cls.model_fields})


class NodePage(CairnModel):
    """A node's children, a page at a time; ``next_after`` continues the listing."""

    node_id: str
    children: tuple[NodeHeader, ...]
    next_after: str | None = None


class TeleportHit(CairnModel):
    """A node (at its latest version) that matched, the text that matched, and the grips
    behind it."""

    node_id: str
    version: int
    level: TocLevel
    title: str
    text: str
    grip_ids: tuple[str, ...]
    starts_at: datetime
    ends_at: datetime
    score: float
    signals: dict[str, int] = Field(default_factory=dict)


class TimelineHits(CairnModel):
    """What a timeline search found, and what its caller should know about how it searched."""

    hits: tuple[TeleportHit, ...] = Field(description="best match first")
    warnings: tuple[str, ...] = Field(
        (),
        description="what made this answer weaker than usual (the vector index busy: keyword "
        "search answered alone)",
    )


class ExpandedGrip(CairnModel):
    """A grip with the events it covers and some on either side."""

    grip: Grip
    before: tuple[Event, ...]
    events: tuple[Event, ...]
    after: tuple[Event, ...]


class RecentItem(CairnModel):
    """One line of recent context, cited to the node version it came from and the grips
    (event ranges) behind it."""

    node_id: str
    version: int
    level: TocLevel
    text: str
    grip_ids: tuple[str, ...]
    starts_at: datetime
    ends_at: datetime
    tokens: int


class RecentContext(CairnModel):
    items: tuple[RecentItem, ...]
    tokens: int
    max_tokens: int
    clipped: bool = Field(description="whether the budget ran out before the history did")


class ScanReport(CairnModel):
    """What a scan of raw events found: grips (one event each), best first."""

    grips: tuple[Grip, ...]
    scores: tuple[float, ...]
    scanned: int
    truncated: bool = Field(description="the range held more events than one scan reads")


class TimelineStatus(CairnModel):
    lag: int = Field(description="events appended since the last rollup")
    nodes: dict[str, int]
    vector_lag: int = Field(description="index entries still waiting for a vector")
    vector_index_busy: bool = Field(
        False,
        description="the vector index is being built or saved: searches answer by keyword "
        "alone meanwhile",
    )
