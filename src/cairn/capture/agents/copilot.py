"""GitHub Copilot CLI: hook payloads as its CLI hooks reference describes them.

Copilot sends one of two shapes, chosen by how the event is named in
``.github/hooks/*.json``: camelCase names (``preToolUse``) give camelCase fields
(``sessionId``, ``toolName``, ``toolArgs``, ``timestamp`` in Unix milliseconds) and carry no
event name; PascalCase names (``PreToolUse``) give the VS Code compatible shape, with
``hook_event_name``, snake_case fields and an ISO 8601 ``timestamp``. Both are read here;
a camelCase payload's event is recognised by the fields only it has. Copilot processes
no context from hooks on the events cairn answers, so the reply is always empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cairn.capture.agents import AgentAdapter, Captured, register
from cairn.capture.agents._common import (
    Hooks,
    TextRule,
    first_text,
    first_value,
    text_of,
    tool_call,
)

__all__ = ["adapter", "event_of"]

# canonical (camelCase) event name → kind
_KINDS = {
    "sessionStart": "session_start",
    "userPromptSubmitted": "user_message",
    "preToolUse": "tool_call",
    "postToolUse": "tool_result",
    "postToolUseFailure": "tool_failure",
    "agentStop": "assistant_message",
    "subagentStart": "subagent_start",
    "subagentStop": "subagent_stop",
    "preCompact": "compaction",
    "notification": "notification",
    "sessionEnd": "session_end",
}

# the VS Code compatible (PascalCase) names → the camelCase ones
_PASCAL = {
    "SessionStart": "sessionStart",
    "SessionEnd": "sessionEnd",
    "UserPromptSubmit": "userPromptSubmitted",
    "PreToolUse": "preToolUse",
    "PostToolUse": "postToolUse",
    "PostToolUseFailure": "postToolUseFailure",
    "Stop": "agentStop",
    "SubagentStart": "subagentStart",
    "SubagentStop": "subagentStop",
    "ErrorOccurred": "errorOccurred",
    "PreCompact": "preCompact",
    "Notification": "notification",
    "PermissionRequest": "permissionRequest",
}

# metadata key → the field names it has in the two shapes
_META: dict[str, tuple[str, ...]] = {
    "source": ("source",),
    "reason": ("reason",),
    "trigger": ("trigger",),
    "tool_name": ("toolName", "tool_name"),
    "stop_reason": ("stopReason", "stop_reason"),
    "agent_name": ("agentName", "agent_name"),
    "notification_type": ("notification_type", "notificationType"),
    "error_context": ("errorContext", "error_context"),
    "recoverable": ("recoverable",),
}

# the fields that name a tool, its input and a sub-agent, in the two shapes
_TOOL = ("toolName", "tool_name")
_ARGS = ("toolArgs", "tool_input")
_AGENT = ("agentDisplayName", "agent_display_name", "agentName", "agent_name")

_ENVELOPE = {
    "sessionId",
    "session_id",
    "timestamp",
    "cwd",
    "hook_event_name",
    "transcriptPath",
    "transcript_path",
}


def event_of(payload: Mapping[str, Any]) -> str:
    """The payload's event, as its camelCase name: from ``hook_event_name`` when present,
    else from the fields only that event's camelCase payload carries; ``unknown`` when
    neither tells."""
    named = payload.get("hook_event_name")
    if isinstance(named, str) and named:
        return _PASCAL.get(named, named)
    if "toolResult" in payload:
        return "postToolUse"
    if "toolName" in payload or "toolArgs" in payload:
        return "postToolUseFailure" if isinstance(payload.get("error"), str) else "preToolUse"
    if "errorContext" in payload or isinstance(payload.get("error"), Mapping):
        return "errorOccurred"
    if "agentName" in payload:
        return "subagentStop" if "stopReason" in payload else "subagentStart"
    if "stopReason" in payload:
        return "agentStop"
    if "trigger" in payload:
        return "preCompact"
    if "prompt" in payload:
        return "userPromptSubmitted"
    if "source" in payload:
        return "sessionStart"
    if "reason" in payload:
        return "sessionEnd"
    return "unknown"


def _tool_result(payload: Mapping[str, Any]) -> tuple[str, str | None]:
    """(text, result type) of a postToolUse's result, in either shape."""
    result = first_value(payload, "toolResult", "tool_result")
    if not isinstance(result, Mapping):
        return text_of(result), None
    text = first_value(result, "textResultForLlm", "text_result_for_llm")
    kind = first_value(result, "resultType", "result_type")
    return text_of(text if text is not None else result), kind if isinstance(kind, str) else None


def _error(payload: Mapping[str, Any]) -> str:
    error = payload.get("error")
    if isinstance(error, Mapping):
        return first_text(error, "message", "name")
    return text_of(error)


# event name → where its text is; an event of the table above not named here says why it
# stopped (agentStop carries no answer text, only the transcript's path), ended or compacted
_TEXTS: dict[str, TextRule] = {
    **dict.fromkeys(_KINDS, ("stopReason", "stop_reason", "trigger", "reason")),
    "userPromptSubmitted": ("prompt",),
    "sessionStart": ("initialPrompt", "initial_prompt", "source"),
    "preToolUse": tool_call(tool=_TOOL, args=_ARGS),
    "permissionRequest": tool_call(tool=_TOOL, args=_ARGS),
    "postToolUse": lambda payload: _tool_result(payload)[0],
    "postToolUseFailure": ("error",),
    "errorOccurred": _error,
    "notification": ("message", "title"),
    "subagentStart": _AGENT,
    "subagentStop": _AGENT,
}

# Copilot gives tool calls no id: the whole payload (its millisecond time stamp included)
# names the event, so a retried hook call is the same event.
_HOOKS = Hooks(
    _KINDS,
    _TEXTS,
    _META,
    _ENVELOPE,
    implied={"preCompact": {"phase": "before"}},
    session=("sessionId", "session_id"),
    time="timestamp",
)


def _events(payload: Mapping[str, Any]) -> list[Captured]:
    event = event_of(payload)
    if event != "postToolUse":
        return _HOOKS.event(payload, event)
    result_type = _tool_result(payload)[1]
    return _HOOKS.event(
        payload,
        event,
        kind="tool_failure" if result_type in {"failure", "error", "denied"} else None,
        extra={"result_type": result_type} if result_type else None,
    )


def adapter() -> AgentAdapter:
    # no reply: sessionStart and userPromptSubmitted output is not processed by Copilot CLI
    return AgentAdapter("copilot", _events, event_name=event_of)


register("copilot", adapter)
