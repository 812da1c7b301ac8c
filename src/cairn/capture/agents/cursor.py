"""Cursor: hook payloads as its agent hooks documentation describes them.

Every payload carries ``conversation_id``, ``generation_id``, ``hook_event_name`` (camelCase,
e.g. ``beforeSubmitPrompt``), ``workspace_roots`` and, in recent versions, ``model``,
``cursor_version``, ``user_email`` and ``transcript_path``. Cursor reads a hook's stdout as
JSON, so the reply is always a JSON object: ``{"continue": true}`` for beforeSubmitPrompt
(which must say whether the prompt goes on), ``{"additional_context": ...}`` for
sessionStart when there is context, ``{}`` otherwise. Cursor's permission hooks
(beforeShellExecution, beforeMCPExecution, beforeReadFile, preToolUse) are mapped when they
arrive but cairn does not install them: an answer there would take a decision that is the
user's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cairn.capture.agents import AgentAdapter, event_name, register
from cairn.capture.agents._common import (
    CONTEXT_CAP,
    Hooks,
    TextRule,
    first_text,
    text_of,
    tool_call,
)

__all__ = ["adapter"]

# event name → kind
_KINDS = {
    "sessionStart": "session_start",
    "beforeSubmitPrompt": "user_message",
    "preToolUse": "tool_call",
    "beforeShellExecution": "tool_call",
    "beforeMCPExecution": "tool_call",
    "postToolUse": "tool_result",
    "afterShellExecution": "tool_result",
    "afterMCPExecution": "tool_result",
    "afterFileEdit": "tool_result",
    "postToolUseFailure": "tool_failure",
    "afterAgentResponse": "assistant_message",
    "subagentStart": "subagent_start",
    "subagentStop": "subagent_stop",
    "preCompact": "compaction",
    "sessionEnd": "session_end",
}

# what an event implies when its payload does not say: the tool it stands for, its phase
_IMPLIED = {
    "beforeShellExecution": {"tool_name": "Shell"},
    "afterShellExecution": {"tool_name": "Shell"},
    "afterFileEdit": {"tool_name": "Edit"},
    "preCompact": {"phase": "before"},
}

_META = (
    "generation_id",
    "model",
    "cursor_version",
    "tool_name",
    "tool_use_id",
    "status",
    "loop_count",
    "reason",
    "trigger",
    "failure_type",
    "subagent_type",
    "composer_mode",
    "is_background_agent",
    "duration",
    "duration_ms",
    "file_path",
)

_ENVELOPE = {
    "conversation_id",
    "generation_id",
    "hook_event_name",
    "workspace_roots",
    "model",
    "cursor_version",
    "user_email",
    "transcript_path",
    "session_id",
}


def _edits(payload: Mapping[str, Any]) -> str:
    lines = [str(payload.get("file_path") or "file")]
    edits = payload.get("edits")
    for edit in edits if isinstance(edits, list) else []:
        if isinstance(edit, Mapping):
            old, new = text_of(edit.get("old_string")), text_of(edit.get("new_string"))
            lines.append(f"- {old}\n+ {new}")
    return "\n".join(lines)


def _shell(payload: Mapping[str, Any]) -> str:
    command = first_text(payload, "command")
    output = first_text(payload, "output")
    return f"$ {command}\n{output}" if output else f"$ {command}"


# event name → where its text is; sessionStart and preCompact, not named below, say what
# started or compacted them
_TEXTS: dict[str, TextRule] = {
    **dict.fromkeys(_KINDS, ("trigger", "composer_mode", "status")),
    "beforeSubmitPrompt": ("prompt",),
    "beforeShellExecution": _shell,
    "afterShellExecution": _shell,
    "preToolUse": tool_call(),
    "beforeMCPExecution": tool_call(),
    "postToolUse": ("tool_output", "result_json"),
    "afterMCPExecution": ("tool_output", "result_json"),
    "postToolUseFailure": ("error_message", "failure_type"),
    "afterFileEdit": _edits,
    "afterAgentResponse": ("text",),
    "subagentStart": ("prompt", "subagent_type"),
    "subagentStop": ("result", "status"),
    "sessionEnd": ("reason", "final_status"),
}

_HOOKS = Hooks(
    _KINDS,
    _TEXTS,
    _META,
    _ENVELOPE,
    implied=_IMPLIED,
    own_id="tool_use_id",
    session=("conversation_id", "session_id"),
)


def _cwd(payload: Mapping[str, Any]) -> str | None:
    # the first workspace root is the project; a shell event's own cwd may be a sub-folder
    roots = payload.get("workspace_roots")
    if isinstance(roots, list) and roots and isinstance(roots[0], str) and roots[0]:
        return roots[0]
    cwd = payload.get("cwd")
    return cwd if isinstance(cwd, str) and cwd else None


def _reply(payload: Mapping[str, Any], context: str | None) -> str:
    name = event_name(payload)
    if name == "beforeSubmitPrompt":
        return json.dumps({"continue": True})
    if context and name in _CONTEXT_EVENTS:
        return json.dumps({"additional_context": context[:CONTEXT_CAP]}, ensure_ascii=False)
    return "{}"


_CONTEXT_EVENTS = frozenset({"sessionStart"})


def adapter() -> AgentAdapter:
    return AgentAdapter(
        "cursor", _HOOKS.events, cwd=_cwd, reply=_reply, context_events=_CONTEXT_EVENTS
    )


register("cursor", adapter)
