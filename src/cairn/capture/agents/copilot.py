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
    kind_of,
    leftover_text,
    one_event,
    parse_time,
    text_of,
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

_ENVELOPE = {
    "sessionId",
    "session_id",
    "timestamp",
    "cwd",
    "hook_event_name",
    "transcriptPath",
    "transcript_path",
}


def _get(payload: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        if payload.get(name) is not None:
            return payload[name]
    return None


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
    result = _get(payload, "toolResult", "tool_result")
    if not isinstance(result, Mapping):
        return text_of(result), None
    text = _get(result, "textResultForLlm", "text_result_for_llm")
    kind = _get(result, "resultType", "result_type")
    return text_of(text if text is not None else result), kind if isinstance(kind, str) else None


def _text(event: str, payload: Mapping[str, Any]) -> str:
    if event == "userPromptSubmitted":
        return text_of(_get(payload, "prompt"))
    if event == "sessionStart":
        return text_of(_get(payload, "initialPrompt", "initial_prompt", "source"))
    if event in {"preToolUse", "permissionRequest"}:
        tool = _get(payload, "toolName", "tool_name") or "tool"
        return f"{tool}: {text_of(_get(payload, 'toolArgs', 'tool_input'))}"
    if event == "postToolUse":
        return _tool_result(payload)[0]
    if event == "postToolUseFailure":
        return text_of(_get(payload, "error"))
    if event == "errorOccurred":
        error = payload.get("error")
        if isinstance(error, Mapping):
            return text_of(_get(error, "message", "name"))
        return text_of(error)
    if event == "notification":
        return text_of(_get(payload, "message", "title"))
    if event in {"subagentStart", "subagentStop"}:
        return text_of(
            _get(payload, "agentDisplayName", "agent_display_name", "agentName", "agent_name")
        )
    if event in _KINDS:
        # agentStop carries no answer text (only the transcript's path): say why it stopped
        return text_of(_get(payload, "stopReason", "stop_reason", "trigger", "reason"))
    return leftover_text(payload, _ENVELOPE)


def _events(payload: Mapping[str, Any]) -> list[Captured]:
    event = event_of(payload)
    kind = kind_of(_KINDS, event)
    if event == "postToolUse" and _tool_result(payload)[1] in {"failure", "error", "denied"}:
        kind = "tool_failure"
    metadata: dict[str, Any] = {}
    for key, names in _META.items():
        value = _get(payload, *names)
        if isinstance(value, str | int | float | bool):
            metadata[key] = value
    result_type = _tool_result(payload)[1] if event == "postToolUse" else None
    if result_type:
        metadata["result_type"] = result_type
    if event == "preCompact":
        metadata["phase"] = "before"
    # Copilot gives tool calls no id: the whole payload (its millisecond time stamp
    # included) names the event, so a retried hook call is the same event.
    return one_event(
        payload,
        event,
        kind,
        text=_text(event, payload),
        metadata=metadata,
        session=_get(payload, "sessionId", "session_id"),
        ts=parse_time(payload.get("timestamp")),
    )


def adapter() -> AgentAdapter:
    # no reply: sessionStart and userPromptSubmitted output is not processed by Copilot CLI
    return AgentAdapter("copilot", _events, event_name=event_of)


register("copilot", adapter)
