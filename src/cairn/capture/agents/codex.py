"""Codex CLI: hook payloads as Codex's hooks documentation and its generated input schemas
(codex-rs/hooks/schema/generated/*.command.input.schema.json) describe them.

The shapes follow Claude Code's (``session_id``, ``transcript_path``, ``cwd``,
``hook_event_name``, ``tool_use_id``…) and add ``model`` and, on every turn-scoped event,
the ``turn_id`` of the turn it belongs to. Context goes back on SessionStart and
UserPromptSubmit as ``{"hookSpecificOutput": {"hookEventName": ..., "additionalContext": ...}}``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cairn.capture.agents import AgentAdapter, Captured, hook_kind, register
from cairn.capture.agents._common import canonical, first_text, text_of

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
    rest = {k: v for k, v in payload.items() if k not in _ENVELOPE}
    return canonical(rest) if rest else ""


def _events(payload: Mapping[str, Any]) -> list[Captured]:
    name = _event_name(payload)
    kind, role = _KINDS.get(name, (hook_kind(name), "system"))
    metadata: dict[str, Any] = {"hook_event": name}
    for key in _META:
        value = payload.get(key)
        if isinstance(value, str | int | float | bool):
            metadata[key] = value
    if name in {"PreCompact", "PostCompact"}:
        metadata["phase"] = "before" if name == "PreCompact" else "after"
    tool_use_id = payload.get("tool_use_id")
    # A tool call's own id names it; anything else is named by the whole payload (which
    # holds the turn id), so the same hook call sent twice is the same event.
    identity = (
        f"{name}:{tool_use_id}"
        if isinstance(tool_use_id, str) and tool_use_id
        else f"{name}:{canonical(dict(payload))}"
    )
    return [
        Captured(
            kind=kind,
            role=role,
            text=_text(name, payload),
            session_id=str(payload.get("session_id") or "unknown-session"),
            identity=identity,
            unique_identity=isinstance(tool_use_id, str) and bool(tool_use_id),
            metadata=metadata,
        )
    ]


def _event_name(payload: Mapping[str, Any]) -> str:
    name = payload.get("hook_event_name")
    return name if isinstance(name, str) and name else "Unknown"


def _cwd(payload: Mapping[str, Any]) -> str | None:
    cwd = payload.get("cwd")
    return cwd if isinstance(cwd, str) and cwd else None


def _reply(payload: Mapping[str, Any], context: str | None) -> str | None:
    name = _event_name(payload)
    if not context or name not in _CONTEXT_EVENTS:
        return None
    return json.dumps(
        {"hookSpecificOutput": {"hookEventName": name, "additionalContext": context[:CONTEXT_CAP]}},
        ensure_ascii=False,
    )


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
