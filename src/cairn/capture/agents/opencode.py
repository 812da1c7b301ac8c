"""OpenCode: the JSON objects cairn's OpenCode plugin (plugins/opencode/cairn.js) sends.

OpenCode has no command hooks, only JavaScript plugins, so cairn ships one: it listens to
OpenCode's plugin hooks (``chat.message``, ``tool.execute.before``, ``tool.execute.after``)
and bus events (``session.created``, ``session.compacted``, ``session.deleted``,
``session.error``, and the assistant's text, gathered from ``message.part.updated`` until
``message.updated`` says the message completed, sent as ``assistant.message``), and hands
each to ``cairn hook --agent opencode`` as one object: ``hook_event_name`` (the OpenCode
name), ``session_id``, ``cwd`` (the plugin's project folder), ``timestamp`` (ISO 8601) and
the event's own fields. The plugin never reads the hook's output, so there is no reply.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cairn.capture.agents import AgentAdapter, Captured, event_name, register
from cairn.capture.agents._common import (
    first_text,
    kind_of,
    leftover_text,
    one_event,
    parse_time,
    scalars,
    text_of,
)

__all__ = ["adapter"]

# event name → kind
_KINDS = {
    "session.created": "session_start",
    "chat.message": "user_message",
    "tool.execute.before": "tool_call",
    "tool.execute.after": "tool_result",
    "assistant.message": "assistant_message",
    "session.compacted": "compaction",
    "session.deleted": "session_end",
}

_META = ("tool", "call_id", "message_id", "agent", "model", "title")

_ENVELOPE = {"hook_event_name", "session_id", "cwd", "timestamp"}

# what names each event on its own, when the plugin sent it
_OWN_ID = {
    "tool.execute.before": "call_id",
    "tool.execute.after": "call_id",
    "chat.message": "message_id",
    "assistant.message": "message_id",
}


def _text(name: str, payload: Mapping[str, Any]) -> str:
    if name in {"chat.message", "assistant.message"}:
        return first_text(payload, "text")
    if name == "tool.execute.before":
        return f"{payload.get('tool') or 'tool'}: {text_of(payload.get('args'))}"
    if name == "tool.execute.after":
        return first_text(payload, "output", "title")
    if name == "session.created":
        return first_text(payload, "title")
    if name == "session.deleted":
        return "deleted"
    if name == "session.compacted":
        return "compacted"
    return leftover_text(payload, _ENVELOPE)


def _events(payload: Mapping[str, Any]) -> list[Captured]:
    name = event_name(payload)
    metadata = scalars(payload, _META)
    if name == "session.compacted":
        metadata["phase"] = "after"
    if name == "session.deleted":
        metadata["reason"] = "deleted"
    return one_event(
        payload,
        name,
        kind_of(_KINDS, name),
        text=_text(name, payload),
        metadata=metadata,
        own_id=payload.get(_OWN_ID.get(name, "")),
        ts=parse_time(payload.get("timestamp")),
    )


def adapter() -> AgentAdapter:
    return AgentAdapter("opencode", _events)  # the plugin reads no reply


register("opencode", adapter)
