"""Gemini CLI: hook payloads as its hooks reference (docs/hooks/reference.md) describes them.

Every payload carries ``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name`` and
``timestamp`` (ISO 8601). Gemini CLI parses a hook's stdout as JSON and nothing else: any
other text breaks the parse, so the reply is always a JSON object, ``{}`` when there is
nothing to say. Context goes back on SessionStart and BeforeAgent as
``{"hookSpecificOutput": {"hookEventName": ..., "additionalContext": ...}}``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cairn.capture.agents import AgentAdapter, Captured, hook_kind, register
from cairn.capture.agents._common import canonical, first_text, parse_time, text_of

__all__ = ["CONTEXT_CAP", "adapter"]

# Gemini documents no cap; the same bound as Claude Code's keeps one turn's context small.
CONTEXT_CAP = 9_500

# event name → (kind, role)
_KINDS: dict[str, tuple[str, str]] = {
    "SessionStart": ("session_start", "system"),
    "BeforeAgent": ("user_message", "user"),
    "AfterAgent": ("assistant_message", "assistant"),
    "BeforeTool": ("tool_call", "assistant"),
    "AfterTool": ("tool_result", "tool"),
    "PreCompress": ("compaction", "system"),
    "Notification": ("notification", "system"),
    "SessionEnd": ("session_end", "system"),
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
    rest = {k: v for k, v in payload.items() if k not in _ENVELOPE}
    return canonical(rest) if rest else ""


def _events(payload: Mapping[str, Any]) -> list[Captured]:
    name = _event_name(payload)
    kind, role = _KINDS.get(name, (hook_kind(name), "system"))
    if name == "AfterTool" and _tool_error(payload):
        kind = "tool_failure"
    metadata: dict[str, Any] = {"hook_event": name}
    for key in _META:
        value = payload.get(key)
        if isinstance(value, str | int | float | bool):
            metadata[key] = value
    mcp = payload.get("mcp_context")
    if isinstance(mcp, Mapping) and isinstance(mcp.get("server_name"), str):
        metadata["mcp_server"] = mcp["server_name"]
    if name == "PreCompress":
        metadata["phase"] = "before"
    return [
        Captured(
            kind=kind,
            role=role,
            text=_text(name, payload),
            session_id=str(payload.get("session_id") or "unknown-session"),
            # Gemini gives tool calls no id of their own: the whole payload (its time
            # stamp included) names the event, so a retried hook call is the same event.
            identity=f"{name}:{canonical(dict(payload))}",
            metadata=metadata,
            ts=parse_time(payload.get("timestamp")),
        )
    ]


def _event_name(payload: Mapping[str, Any]) -> str:
    name = payload.get("hook_event_name")
    return name if isinstance(name, str) and name else "Unknown"


def _cwd(payload: Mapping[str, Any]) -> str | None:
    cwd = payload.get("cwd")
    return cwd if isinstance(cwd, str) and cwd else None


def _reply(payload: Mapping[str, Any], context: str | None) -> str:
    name = _event_name(payload)
    if not context or name not in _CONTEXT_EVENTS:
        return "{}"
    return json.dumps(
        {"hookSpecificOutput": {"hookEventName": name, "additionalContext": context[:CONTEXT_CAP]}},
        ensure_ascii=False,
    )


_CONTEXT_EVENTS = frozenset({"SessionStart", "BeforeAgent"})


def adapter() -> AgentAdapter:
    return AgentAdapter(
        name="gemini",
        to_events=_events,
        cwd=_cwd,
        reply=_reply,
        event_name=_event_name,
        context_events=_CONTEXT_EVENTS,
    )


register("gemini", adapter)
