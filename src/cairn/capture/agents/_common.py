"""Small helpers every adapter uses (standard library only): the tables an adapter is
made of (``Hooks``), the rules they name for texts and metadata, and the replies."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, NamedTuple

from cairn.capture.agents import ROLES, Captured, event_name, hook_kind

__all__ = [
    "CONTEXT_CAP",
    "Hooks",
    "TextRule",
    "additional_context",
    "canonical",
    "context_reply",
    "first_text",
    "first_value",
    "leftover_text",
    "parse_time",
    "scalars",
    "text_of",
    "tool_call",
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


def first_value(payload: Mapping[str, Any], *names: str) -> Any:
    """The value of the first of ``names`` present in ``payload`` (agents renamed fields
    between versions, and some send one field under two spellings), or None."""
    for name in names:
        if payload.get(name) is not None:
            return payload[name]
    return None


def first_text(payload: Mapping[str, Any], *names: str) -> str:
    """The first of ``names`` present in ``payload``, as text; empty when none is."""
    return text_of(first_value(payload, *names))


# Where an adapter finds an event's text: the fields to try in turn (the first present gives
# it), or a function of the payload for a text made of several fields.
TextRule = tuple[str, ...] | Callable[[Mapping[str, Any]], str]


def tool_call(
    tool: tuple[str, ...] = ("tool_name",), args: tuple[str, ...] = ("tool_input",)
) -> Callable[[Mapping[str, Any]], str]:
    """The text rule of a tool call, ``tool: its input``, given the fields that may name the
    tool and those that may hold its input."""

    def text(payload: Mapping[str, Any]) -> str:
        return f"{first_value(payload, *tool) or 'tool'}: {first_text(payload, *args)}"

    return text


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


def scalars(
    payload: Mapping[str, Any], keys: Iterable[str] | Mapping[str, tuple[str, ...]]
) -> dict[str, Any]:
    """The ``keys`` of ``payload`` whose values are plain scalars (kept as metadata: small,
    and useful to filter on). A mapping names the fields each key may arrive as, the first
    present giving its value."""
    fields = keys if isinstance(keys, Mapping) else {key: (key,) for key in keys}
    out: dict[str, Any] = {}
    for key, names in fields.items():
        value = first_value(payload, *names)
        if isinstance(value, str | int | float | bool):
            out[key] = value
    return out


def leftover_text(payload: Mapping[str, Any], envelope: Iterable[str]) -> str:
    """What an event no adapter knows said, minus the envelope every event carries."""
    skip = set(envelope)
    rest = {k: v for k, v in payload.items() if k not in skip}
    return canonical(rest) if rest else ""


class Hooks(NamedTuple):
    """One agent's hook payloads as tables: what sets one adapter apart from the others.
    ``event`` reads a payload by them."""

    kinds: Mapping[str, str]  # event name → the common kind
    texts: Mapping[str, TextRule]  # event name → where its text is
    meta: Iterable[str] | Mapping[str, tuple[str, ...]]  # kept as metadata (see ``scalars``)
    # the fields every payload carries: left out of the text of an event no table knows
    envelope: Collection[str]
    # event name → metadata the event has unless its payload says otherwise (the phase of a
    # compaction, the tool a shell event stands for)
    implied: Mapping[str, Mapping[str, Any]]
    # the field holding an event's own id: one for every event, or one per event name
    own_id: str | Mapping[str, str] | None = None
    # the fields the session's id may be in, the first present winning (``session_id`` last)
    session: tuple[str, ...] = ()
    # the field holding the agent's own time stamp, when it sends one
    time: str | None = None

    def events(self, payload: Mapping[str, Any]) -> list[Captured]:
        """The event of a payload named by its ``hook_event_name``, by these tables alone."""
        return self.event(payload, event_name(payload))

    def event(
        self,
        payload: Mapping[str, Any],
        name: str,
        *,
        kind: str | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> list[Captured]:
        """The one event a hook call is: ``kind`` and ``extra`` metadata are what the adapter
        read beyond the tables (a failure only the result tells, say).

        A call's own id (a tool call's, a message's) names the event; without one the whole
        payload does, so the same hook call sent twice is the same event. Who speaks follows
        from the kind (``ROLES``); an event the tables do not know is ``hook_…``, its text
        what it said minus the envelope."""
        kind = kind or self.kinds.get(name) or hook_kind(name)
        rule = self.texts.get(name)
        if rule is None:
            text = leftover_text(payload, self.envelope)
        else:
            text = first_text(payload, *rule) if isinstance(rule, tuple) else rule(payload)
        metadata = {"hook_event": name, **scalars(payload, self.meta), **(extra or {})}
        for key, value in self.implied.get(name, {}).items():
            metadata.setdefault(key, value)
        id_field = self.own_id if not isinstance(self.own_id, Mapping) else self.own_id.get(name)
        own_id = payload.get(id_field) if id_field else None
        unique = isinstance(own_id, str) and bool(own_id)
        session = first_value(payload, *self.session) if self.session else None
        return [
            Captured(
                kind=kind,
                role=ROLES.get(kind, "system"),
                text=text,
                session_id=str(session or payload.get("session_id") or "unknown-session"),
                identity=f"{name}:{own_id}" if unique else f"{name}:{canonical(dict(payload))}",
                unique_identity=unique,
                metadata=metadata,
                ts=parse_time(payload.get(self.time)) if self.time else None,
            )
        ]


def additional_context(name: str, context: str) -> str:
    """Context in the ``hookSpecificOutput`` shape Claude Code, Codex and Gemini CLI read."""
    return json.dumps(
        {"hookSpecificOutput": {"hookEventName": name, "additionalContext": context[:CONTEXT_CAP]}},
        ensure_ascii=False,
    )


def context_reply(
    context_events: frozenset[str], silence: str | None
) -> Callable[[Mapping[str, Any], str | None], str | None]:
    """The reply of an agent that takes context in the ``hookSpecificOutput`` shape on
    ``context_events``; ``silence`` is its reply otherwise (None: print nothing)."""

    def reply(payload: Mapping[str, Any], context: str | None) -> str | None:
        name = event_name(payload)
        if not context or name not in context_events:
            return silence
        return additional_context(name, context)

    return reply
