"""Claude Code: hook payloads as its hooks documentation describes them.

Every payload carries ``session_id``, ``transcript_path``, ``cwd`` and
``hook_event_name``. Context goes back to the agent on SessionStart and UserPromptSubmit as
``{"hookSpecificOutput": {"hookEventName": ..., "additionalContext": ...}}``; Claude Code
caps it at 10,000 characters, so the reply is cut well below that.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from cairn.capture.agents import AgentAdapter, register
from cairn.capture.agents._common import Hooks, TextRule, context_reply, tool_call

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


# event name → where its text is
_TEXTS: dict[str, TextRule] = {
    "SessionStart": ("source",),
    "UserPromptSubmit": ("prompt",),
    "PreToolUse": tool_call(),
    "PostToolUse": ("tool_response", "tool_output"),
    "PostToolUseFailure": ("error", "tool_response"),
    "Stop": ("last_assistant_message",),
    "SubagentStart": ("prompt", "agent_type"),
    "SubagentStop": ("last_assistant_message",),
    "PreCompact": ("custom_instructions",),
    "PostCompact": ("compact_summary", "summary"),
    "Notification": ("message",),
    "SessionEnd": ("reason",),
}

_ENVELOPE = {"session_id", "transcript_path", "cwd", "hook_event_name", "permission_mode"}


def claude_style(
    name: str,
    kinds: Mapping[str, str],
    meta: Iterable[str],
    texts: Mapping[str, TextRule],
    envelope: Collection[str],
) -> AgentAdapter:
    """An adapter for hooks shaped like Claude Code's (the envelope, ``tool_use_id``,
    ``hookSpecificOutput`` for context): Claude Code's own, and Codex CLI's, which copies
    them. Each agent brings its own event table, metadata fields, texts and envelope."""
    phases = {"PreCompact": {"phase": "before"}, "PostCompact": {"phase": "after"}}
    hooks = Hooks(kinds, texts, meta, envelope, implied=phases, own_id="tool_use_id")
    reply = context_reply(_CONTEXT_EVENTS, silence=None)
    return AgentAdapter(name, hooks.events, reply=reply, context_events=_CONTEXT_EVENTS)


_CONTEXT_EVENTS = frozenset({"SessionStart", "UserPromptSubmit"})


def adapter() -> AgentAdapter:
    return claude_style("claude", EVENT_KINDS, _META, _TEXTS, _ENVELOPE)


register("claude", adapter)
