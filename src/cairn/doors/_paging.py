"""Paging the doors share: where the next page of timeline events starts."""

from __future__ import annotations

from datetime import datetime

from cairn.model import EventCursor

__all__ = ["event_cursor"]


def event_cursor(
    ts: datetime | None, event_id: str | None, scope: str | None
) -> EventCursor | None:
    """The cursor after a page's last event, from its ts and event_id and, when given, its
    scope (the same id may stand at the same time in two scopes); None without both the ts
    and the id, for the first page."""
    if ts is None or event_id is None:
        return None
    return (ts, event_id) if scope is None else (ts, event_id, scope)
