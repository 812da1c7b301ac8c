"""Codex CLI: hook payloads as Codex's hooks documentation and its generated input schemas
(codex-rs/hooks/schema/generated/*.command.input.schema.json) describe them.

The shapes follow Claude Code's (``session_id``, ``transcript_path``, ``cwd``,
``hook_event_name``, ``tool_use_id``…) and add ``model`` and, on every turn-scoped event,
the ``turn_id`` of the turn it belongs to. Context goes back on SessionStart and
UserPromptSubmit as ``{"hookSpecificOutput": {"hookEventName": ..., "additionalContext": ...}}``.
"""

from __future__ import annotations

from cairn.capture.agents import AgentAdapter, register
from cairn.capture.agents._common import TextRule, tool_call
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


# event name → where its text is; an event of the table above not named here says what
# started, ended or was compacted
_TEXTS: dict[str, TextRule] = {
    **dict.fromkeys(_KINDS, ("prompt", "source", "reason", "trigger", "agent_type")),
    "UserPromptSubmit": ("prompt",),
    "PreToolUse": tool_call(),
    "PermissionRequest": tool_call(),
    "PostToolUse": ("tool_response",),
    "Stop": ("last_assistant_message",),
    "SubagentStop": ("last_assistant_message",),
    "StopFailure": ("error_details", "error"),
}


def adapter() -> AgentAdapter:
    # Codex's hooks copy Claude Code's: the same builder, with Codex's events and fields
    return claude_style("codex", _KINDS, _META, _TEXTS, _ENVELOPE)


register("codex", adapter)
