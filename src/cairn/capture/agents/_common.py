"""Small helpers every adapter uses (standard library only)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

__all__ = ["canonical", "first_text", "parse_time", "text_of"]


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
