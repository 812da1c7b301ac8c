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
    Hooks,
    TextRule,
    context_reply,
    first_text,
    text_of,
    tool_call,
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


def _tool_result(payload: Mapping[str, Any]) -> str:
    error = _tool_error(payload)
    if error:
        return error
    response = payload.get("tool_response")
    if isinstance(response, Mapping):
        # llmContent is what the model read; returnDisplay what the user saw
        return first_text(response, "llmContent", "returnDisplay") or text_of(response)
    return text_of(response)


# event name → where its text is; an event of the table above not named here says why it
# started, ended or compressed
_TEXTS: dict[str, TextRule] = {
    **dict.fromkeys(_KINDS, ("source", "reason", "trigger")),
    "BeforeAgent": ("prompt",),
    "AfterAgent": ("prompt_response",),
    "BeforeTool": tool_call(),
    "AfterTool": _tool_result,
    "Notification": ("message",),
}

# Gemini gives tool calls no id of their own: the whole payload (its time stamp included)
# names the event, so a retried hook call is the same event.
_HOOKS = Hooks(
    _KINDS, _TEXTS, _META, _ENVELOPE, implied={"PreCompress": {"phase": "before"}}, time="timestamp"
)


def _events(payload: Mapping[str, Any]) -> list[Captured]:
    name = event_name(payload)
    failed = name == "AfterTool" and bool(_tool_error(payload))
    mcp = payload.get("mcp_context")
    server = mcp.get("server_name") if isinstance(mcp, Mapping) else None
    return _HOOKS.event(
        payload,
        name,
        kind="tool_failure" if failed else None,
        extra={"mcp_server": server} if isinstance(server, str) else None,
    )


_CONTEXT_EVENTS = frozenset({"SessionStart", "BeforeAgent"})


def adapter() -> AgentAdapter:
    reply = context_reply(_CONTEXT_EVENTS, silence="{}")  # Gemini CLI reads stdout as JSON, always
    return AgentAdapter("gemini", _events, reply=reply, context_events=_CONTEXT_EVENTS)


register("gemini", adapter)
