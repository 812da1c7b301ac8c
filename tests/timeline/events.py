"""Events for timeline tests: a small conversation builder shared by the test modules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from cairn.model import EventDraft, EventRole, Principal, PrincipalKind

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)  # a Monday
AGENT = Principal(id="bot", kind=PrincipalKind.AGENT, roles=("agent",), scopes=("acme/*",))
READER = Principal(id="rita", kind=PrincipalKind.HUMAN, roles=("reader",), scopes=("acme/*",))
OUTSIDER = Principal(id="oz", kind=PrincipalKind.HUMAN, roles=("reader",), scopes=("other/*",))

LINES = (
    "We should move the nightly build from Jenkins to GitHub Actions.",
    "Agreed. The Jenkins box is flaky and the queue is slow.",
    "Keep the pip wheel cache between runs, it saves four minutes.",
    "I ran the suite: three failures in test_http, all timeouts.",
    "Raise the fixture timeout and mark the slow ones.",
    "Done, the pipeline is green again.",
    "Next we migrate the events table on PostgreSQL.",
)


def event(
    event_id: str,
    at: datetime,
    text: str = "",
    *,
    scope: str = "acme/app",
    session: str = "s1",
    role: EventRole | None = None,
    kind: str | None = None,
    agent: str = "claude-code",
) -> EventDraft:
    n = int("".join(c for c in event_id if c.isdigit()) or 0)
    chosen = role or (EventRole.USER if n % 2 == 0 else EventRole.ASSISTANT)
    return EventDraft(
        event_id=event_id,
        ts=at,
        session_id=session,
        scope=scope,
        agent=agent,
        role=chosen,
        kind=kind or ("user_message" if chosen is EventRole.USER else "assistant_message"),
        text=text or f"{LINES[n % len(LINES)]} (turn {n})",
    )


def conversation(
    prefix: str,
    start: datetime,
    count: int,
    *,
    every: timedelta = timedelta(minutes=2),
    **kw: object,
) -> list[EventDraft]:
    return [
        event(f"{prefix}{i}", start + i * every, **kw)  # type: ignore[arg-type]
        for i in range(count)
    ]


def event_json(
    event_id: str, minute: int, text: str, scope: str = "acme/app", day: str = "2026-03-02"
) -> dict[str, Any]:
    """An event as a door takes it (JSON): at 09:<minute> on ``day``, the user on even
    minutes and the assistant on odd ones."""
    return {
        "event_id": event_id,
        "ts": f"{day}T09:{minute:02d}:00Z",
        "session_id": "s-1",
        "scope": scope,
        "agent": "claude-code",
        "role": "user" if minute % 2 == 0 else "assistant",
        "kind": "user_message" if minute % 2 == 0 else "assistant_message",
        "text": text,
    }
