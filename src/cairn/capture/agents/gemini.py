"""Gemini CLI: hook payloads as its hooks reference (docs/hooks/reference.md) describes them.

Every payload carries ``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name`` and
``timestamp`` (ISO 8601). Gemini CLI parses a hook's stdout as JSON and nothing else: any
other text breaks the parse, so the reply is always a JSON object, ``{}`` when there is
nothing to say. Context goes back on SessionStart and BeforeAgent as
``{"hookSpecificOutput": {"hookEventName": ..., "additionalContext": ...}}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cairn.capture.agents import AgentAdapter, Captured, event_name, register
from cairn.capture.agents._common import (
    additional_context,
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
    "SessionStart": "session_start",
    "BeforeAgent": "user_message",
    "AfterAgent": "assistant_message",
    "BeforeTool": "tool_call",
    "AfterTool": "tool_result",
    "PreCompress": "compaction",
    "Notification": "notification",
    "SessionEnd": "session_end",
}

_META = (
    "source",
    "reason",
    "trigger",
    "tool_name",
    "original_request_name",
    "notification_type",
    "stop_hook_active",
)

_ENVELOPE = {"session_id", "transcript_path", "cwd", "hook_event_name", "timestamp"}


def _tool_error(payload: Mapping[str, Any]) -> str:
    response = payload.get("tool_response")
    if isinstance(response, Mapping) and response.get("error"):
        return text_of(response["error"])
    return ""


def _text(name: str, payload: Mapping[str, Any]) -> str:
    if name == "BeforeAgent":
        return first_text(payload, "prompt")
    if name == "AfterAgent":
        return first_text(payload, "prompt_response")
    if name == "BeforeTool":
        return f"{payload.get('tool_name') or 'tool'}: {text_of(payload.get('tool_input'))}"
    if name == "AfterTool":
        error = _tool_error(payload)
        if error:
            return error
        response = payload.get("tool_response")
        if isinstance(response, Mapping):
            # llmContent is what the model read; returnDisplay what the user saw
            return first_text(response, "llmContent", "returnDisplay") or text_of(response)
        return text_of(response)
    if name == "Notification":
        return first_text(payload, "message")
    if name in _KINDS:
        return first_text(payload, "source", "reason", "trigger")
    return leftover_text(payload, _ENVELOPE)


def _events(payload: Mapping[str, Any]) -> list[Captured]:
    name = event_name(payload)
    kind = kind_of(_KINDS, name)
    if name == "AfterTool" and _tool_error(payload):
        kind = "tool_failure"
    metadata = scalars(payload, _META)
    mcp = payload.get("mcp_context")
    if isinstance(mcp, Mapping) and isinstance(mcp.get("server_name"), str):
        metadata["mcp_server"] = mcp["server_name"]
    if name == "PreCompress":
        metadata["phase"] = "before"
    # Gemini gives tool calls no id of their own: the whole payload (its time stamp
    # included) names the event, so a retried hook call is the same event.
    return one_event(
        payload,
        name,
        kind,
        text=_text(name, payload),
        metadata=metadata,
        ts=parse_time(payload.get("timestamp")),
    )


def _reply(payload: Mapping[str, Any], context: str | None) -> str:
    name = event_name(payload)
    if not context or name not in _CONTEXT_EVENTS:
        return "{}"  # Gemini CLI reads stdout as JSON, always
    return additional_context(name, context)


_CONTEXT_EVENTS = frozenset({"SessionStart", "BeforeAgent"})


def adapter() -> AgentAdapter:
    return AgentAdapter("gemini", _events, reply=_reply, context_events=_CONTEXT_EVENTS)


register("gemini", adapter)
