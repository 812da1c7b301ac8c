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

from cairn.capture.agents import AgentAdapter, register
from cairn.capture.agents._common import (
    first_text,
    leftover_text,
    text_of,
)
from cairn.capture.agents.claude import EVENT_KINDS, claude_style

__all__ = ["adapter"]


# event name → kind: Claude Code's events, but for the two Codex does not send
_KINDS = {
    name: kind
    for name, kind in EVENT_KINDS.items()
    if name not in {"PostToolUseFailure", "Notification"}
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


def adapter() -> AgentAdapter:
    # Codex's hooks copy Claude Code's: the same builder, with Codex's events and fields
    return claude_style("codex", _KINDS, _META, _text)


register("codex", adapter)
