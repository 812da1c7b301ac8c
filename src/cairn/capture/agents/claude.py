"""Claude Code: hook payloads as its hooks documentation describes them.

Every payload carries ``session_id``, ``transcript_path``, ``cwd`` and
``hook_event_name``. Context goes back to the agent on SessionStart and UserPromptSubmit as
``{"hookSpecificOutput": {"hookEventName": ..., "additionalContext": ...}}``; Claude Code
caps it at 10,000 characters, so the reply is cut well below that.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from cairn.capture.agents import AgentAdapter, Captured, event_name, register
from cairn.capture.agents._common import (
    additional_context,
    first_text,
    kind_of,
    leftover_text,
    one_event,
    scalars,
    text_of,
)

__all__ = ["EVENT_KINDS", "adapter", "claude_style"]

# event name → kind
EVENT_KINDS = {
    "SessionStart": "session_start",
    "UserPromptSubmit": "user_message",
    "PreToolUse": "tool_call",
    "PostToolUse": "tool_result",
    "PostToolUseFailure": "tool_failure",
    "Stop": "assistant_message",
    "SubagentStart": "subagent_start",
    "SubagentStop": "subagent_stop",
    "PreCompact": "compaction",
    "PostCompact": "compaction",
    "Notification": "notification",
    "SessionEnd": "session_end",
}

# fields kept as metadata when present (small, and useful to filter on)
_META = (
    "source",
    "model",
    "reason",
    "trigger",
    "permission_mode",
    "tool_name",
    "tool_use_id",
    "duration_ms",
    "agent_id",
    "agent_type",
    "notification_type",
    "stop_hook_active",
    "is_interrupt",
    "prompt_id",  # the user turn the event belongs to (newer Claude Code versions)
)


def _text(name: str, payload: Mapping[str, Any]) -> str:
    if name == "UserPromptSubmit":
        return first_text(payload, "prompt")
    if name == "PreToolUse":
        return f"{payload.get('tool_name') or 'tool'}: {text_of(payload.get('tool_input'))}"
    if name == "PostToolUse":
        return first_text(payload, "tool_response", "tool_output")
    if name == "PostToolUseFailure":
        return first_text(payload, "error", "tool_response")
    if name in {"Stop", "SubagentStop"}:
        return first_text(payload, "last_assistant_message")
    if name == "SubagentStart":
        return first_text(payload, "prompt", "agent_type")
    if name == "PreCompact":
        return first_text(payload, "custom_instructions")
    if name == "PostCompact":
        return first_text(payload, "compact_summary", "summary")
    if name == "Notification":
        return first_text(payload, "message")
    if name == "SessionEnd":
        return first_text(payload, "reason")
    if name == "SessionStart":
        return first_text(payload, "source")
    # an event this adapter does not know: keep what it said, minus the envelope
    return leftover_text(payload, _ENVELOPE)


_ENVELOPE = {"session_id", "transcript_path", "cwd", "hook_event_name", "permission_mode"}


def claude_style(
    name: str,
    kinds: Mapping[str, str],
    meta: tuple[str, ...],
    text: Callable[[str, Mapping[str, Any]], str],
) -> AgentAdapter:
    """An adapter for hooks shaped like Claude Code's (the envelope, ``tool_use_id``,
    ``hookSpecificOutput`` for context): Claude Code's own, and Codex CLI's, which copies
    them. Each agent brings its own event table, metadata fields and texts."""

    def events(payload: Mapping[str, Any]) -> list[Captured]:
        event = event_name(payload)
        metadata = scalars(payload, meta)
        if event in {"PreCompact", "PostCompact"}:
            metadata["phase"] = "before" if event == "PreCompact" else "after"
        return one_event(
            payload,
            event,
            kind_of(kinds, event),
            text=text(event, payload),
            metadata=metadata,
            own_id=payload.get("tool_use_id"),
        )

    def reply(payload: Mapping[str, Any], context: str | None) -> str | None:
        event = event_name(payload)
        if not context or event not in _CONTEXT_EVENTS:
            return None
        return additional_context(event, context)

    return AgentAdapter(name, events, reply=reply, context_events=_CONTEXT_EVENTS)


_CONTEXT_EVENTS = frozenset({"SessionStart", "UserPromptSubmit"})


def adapter() -> AgentAdapter:
    return claude_style("claude", EVENT_KINDS, _META, _text)


register("claude", adapter)
