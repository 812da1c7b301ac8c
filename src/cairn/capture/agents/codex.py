"""Codex CLI: hook payloads as Codex's hooks documentation and its generated input schemas
(codex-rs/hooks/schema/generated/*.command.input.schema.json) describe them.

The shapes follow Claude Code's (``session_id``, ``transcript_path``, ``cwd``,
``hook_event_name``, ``tool_use_id``…) and add ``model`` and, on every turn-scoped event,
the ``turn_id`` of the turn it belongs to. Context goes back on SessionStart and
UserPromptSubmit as ``{"hookSpecificOutput": {"hookEventName": ..., "additionalContext": ...}}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cairn.capture.agents import AgentAdapter, Captured, hook_kind, register
from cairn.capture.agents._common import (
    additional_context,
    event_name,
    first_text,
    leftover_text,
    one_event,
    payload_cwd,
    scalars,
    text_of,
)

__all__ = ["CONTEXT_CAP", "adapter"]

CONTEXT_CAP = 9_500

# event name → (kind, role)
_KINDS: dict[str, tuple[str, str]] = {
    "SessionStart": ("session_start", "system"),
    "UserPromptSubmit": ("user_message", "user"),
    "PreToolUse": ("tool_call", "assistant"),
    "PostToolUse": ("tool_result", "tool"),
    "Stop": ("assistant_message", "assistant"),
    "SubagentStart": ("subagent_start", "system"),
    "SubagentStop": ("subagent_stop", "assistant"),
    "PreCompact": ("compaction", "system"),
    "PostCompact": ("compaction", "system"),
    "SessionEnd": ("session_end", "system"),
}

_META = (
    "turn_id",
    "model",
    "source",
    "reason",
    "trigger",
    "permission_mode",
    "tool_name",
    "tool_use_id",
    "agent_id",
    "agent_type",
    "stop_hook_active",
    "error",
)

_ENVELOPE = {
    "session_id",
    "transcript_path",
    "cwd",
    "hook_event_name",
    "permission_mode",
    "model",
    "turn_id",
}


def _text(name: str, payload: Mapping[str, Any]) -> str:
    if name == "UserPromptSubmit":
        return first_text(payload, "prompt")
    if name in {"PreToolUse", "PermissionRequest"}:
        return f"{payload.get('tool_name') or 'tool'}: {text_of(payload.get('tool_input'))}"
    if name == "PostToolUse":
        return first_text(payload, "tool_response")
    if name in {"Stop", "SubagentStop"}:
        return first_text(payload, "last_assistant_message")
    if name == "StopFailure":
        return first_text(payload, "error_details", "error")
    if name in _KINDS:
        return first_text(payload, "prompt", "source", "reason", "trigger", "agent_type")
    return leftover_text(payload, _ENVELOPE)


def _events(payload: Mapping[str, Any]) -> list[Captured]:
    name = _event_name(payload)
    metadata = scalars(payload, _META)
    if name in {"PreCompact", "PostCompact"}:
        metadata["phase"] = "before" if name == "PreCompact" else "after"
    # without a tool call's id, the whole payload (which holds the turn id) names the event
    return one_event(
        payload,
        name,
        _KINDS.get(name, (hook_kind(name), "system")),
        text=_text(name, payload),
        metadata=metadata,
        own_id=payload.get("tool_use_id"),
    )


_event_name = event_name


_cwd = payload_cwd


def _reply(payload: Mapping[str, Any], context: str | None) -> str | None:
    name = _event_name(payload)
    if not context or name not in _CONTEXT_EVENTS:
        return None
    return additional_context(name, context, CONTEXT_CAP)


_CONTEXT_EVENTS = frozenset({"SessionStart", "UserPromptSubmit"})


def adapter() -> AgentAdapter:
    return AgentAdapter(
        name="codex",
        to_events=_events,
        cwd=_cwd,
        reply=_reply,
        event_name=_event_name,
        context_events=_CONTEXT_EVENTS,
    )


register("codex", adapter)
