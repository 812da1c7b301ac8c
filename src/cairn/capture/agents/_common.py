"""Small helpers every adapter uses (standard library only)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from cairn.capture.agents import ROLES, Captured, hook_kind

__all__ = [
    "CONTEXT_CAP",
    "additional_context",
    "canonical",
    "first_text",
    "kind_of",
    "leftover_text",
    "one_event",
    "parse_time",
    "scalars",
    "text_of",
]


# The most context handed back to an agent on one hook call, in characters: below Claude
# Code's own cap of 10,000; Cursor and Gemini CLI document none, and the same bound keeps
# one turn's context small there too.
CONTEXT_CAP = 9_500


def canonical(value: Any) -> str:
    """The payload as one canonical JSON text (sorted keys, no spaces): equal payloads give
    equal text, whatever order the agent wrote their fields in."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def text_of(value: Any, depth: int = 0) -> str:
    """A field as text a person (and the redactor, and the search index) can read: strings
    as they are; objects as ``key: value`` lines with string values unescaped (a tool's
    output arrives as ``{"stdout": "...", "stderr": ""}``, and JSON escaping would glue
    ``\\n`` to the next word and hide it from word-bounded patterns); empty values left out."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if depth > 8:
        return json.dumps(value, ensure_ascii=False, default=str)
    if isinstance(value, Mapping):
        lines = []
        for key, item in value.items():
            if item is None or item == "" or item is False or item == [] or item == {}:
                continue
            text = text_of(item, depth + 1)
            lines.append(f"{key}: {text}" if "\n" not in text else f"{key}:\n{text}")
        return "\n".join(lines)
    if isinstance(value, list | tuple):
        return "\n".join(text_of(item, depth + 1) for item in value)
    return json.dumps(value, ensure_ascii=False, default=str)


def first_text(payload: Mapping[str, Any], *names: str) -> str:
    """The first of ``names`` present in ``payload`` (agents renamed fields between
    versions), as text; empty when none is."""
    for name in names:
        if payload.get(name) is not None:
            return text_of(payload[name])
    return ""


def parse_time(value: Any) -> datetime | None:
    """An agent's own time stamp, when it sends one: ISO 8601 text with a zone offset, or
    Unix time in milliseconds or seconds. Naive or unparsable times give None (the hook then
    stamps its own time): a time without a zone cannot be placed on the timeline."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        seconds = value / 1000 if value > 1e11 else float(value)
        try:
            return datetime.fromtimestamp(seconds, UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        if parsed.tzinfo is None:
            return None
        try:
            # an offset can carry a time past the calendar's ends (0001-01-01T00:00+05:00),
            # which the hook could not then put in UTC
            return parsed.astimezone(UTC)
        except OverflowError:
            return None
    return None


def scalars(payload: Mapping[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    """The ``keys`` of ``payload`` whose values are plain scalars (kept as metadata: small,
    and useful to filter on)."""
    out: dict[str, Any] = {}
    for key in keys:
        value = payload.get(key)
        if isinstance(value, str | int | float | bool):
            out[key] = value
    return out


def leftover_text(payload: Mapping[str, Any], envelope: Iterable[str]) -> str:
    """What an event no adapter knows said, minus the envelope every event carries."""
    skip = set(envelope)
    rest = {k: v for k, v in payload.items() if k not in skip}
    return canonical(rest) if rest else ""


def kind_of(kinds: Mapping[str, str], name: str) -> str:
    """The common kind of the event ``name`` from an agent's table (event name → kind);
    ``hook_…`` for one the table does not know."""
    return kinds.get(name) or hook_kind(name)


def one_event(
    payload: Mapping[str, Any],
    name: str,
    kind: str,
    *,
    text: str,
    metadata: dict[str, Any],
    own_id: Any = None,
    session: Any = None,
    ts: datetime | None = None,
) -> list[Captured]:
    """The one event most hook calls are. A call's own id (a tool call's, a message's) names
    it; without one the whole payload does, so the same hook call sent twice is the same
    event. Who speaks follows from the kind (``ROLES``)."""
    unique = isinstance(own_id, str) and bool(own_id)
    return [
        Captured(
            kind=kind,
            role=ROLES.get(kind, "system"),
            text=text,
            session_id=str(session or payload.get("session_id") or "unknown-session"),
            identity=f"{name}:{own_id}" if unique else f"{name}:{canonical(dict(payload))}",
            unique_identity=unique,
            metadata={"hook_event": name, **metadata},
            ts=ts,
        )
    ]


def additional_context(name: str, context: str) -> str:
    """Context in the ``hookSpecificOutput`` shape Claude Code, Codex and Gemini CLI read."""
    return json.dumps(
        {"hookSpecificOutput": {"hookEventName": name, "additionalContext": context[:CONTEXT_CAP]}},
        ensure_ascii=False,
    )
