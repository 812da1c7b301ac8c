"""OpenCode: the JSON objects cairn's OpenCode plugin (plugins/opencode/cairn.js) sends.

OpenCode has no command hooks, only JavaScript plugins, so cairn ships one: it listens to
OpenCode's plugin hooks (``chat.message``, ``tool.execute.before``, ``tool.execute.after``)
and bus events (``session.created``, ``session.compacted``, ``session.deleted``,
``session.error``, and the assistant's text, gathered from ``message.part.updated`` until
``message.updated`` says the message completed, sent as ``assistant.message``), and hands
each to ``cairn hook --agent opencode`` as one object: ``hook_event_name`` (the OpenCode
name), ``session_id``, ``cwd`` (the plugin's project folder), ``timestamp`` (ISO 8601) and
the event's own fields. The plugin never reads the hook's output, so there is no reply.
"""

from __future__ import annotations

from cairn.capture.agents import AgentAdapter, register
from cairn.capture.agents._common import Hooks, TextRule, tool_call

__all__ = ["adapter"]

# event name → kind
_KINDS = {
    "session.created": "session_start",
    "chat.message": "user_message",
    "tool.execute.before": "tool_call",
    "tool.execute.after": "tool_result",
    "assistant.message": "assistant_message",
    "session.compacted": "compaction",
    "session.deleted": "session_end",
}

_META = ("tool", "call_id", "message_id", "agent", "model", "title")

_ENVELOPE = {"hook_event_name", "session_id", "cwd", "timestamp"}

# what names each event on its own, when the plugin sent it
_OWN_ID = {
    "tool.execute.before": "call_id",
    "tool.execute.after": "call_id",
    "chat.message": "message_id",
    "assistant.message": "message_id",
}


# event name → where its text is
_TEXTS: dict[str, TextRule] = {
    "chat.message": ("text",),
    "assistant.message": ("text",),
    "tool.execute.before": tool_call(tool=("tool",), args=("args",)),
    "tool.execute.after": ("output", "title"),
    "session.created": ("title",),
    "session.deleted": lambda payload: "deleted",
    "session.compacted": lambda payload: "compacted",
}

_HOOKS = Hooks(
    _KINDS,
    _TEXTS,
    _META,
    _ENVELOPE,
    implied={"session.compacted": {"phase": "after"}, "session.deleted": {"reason": "deleted"}},
    own_id=_OWN_ID,
    time="timestamp",
)


def adapter() -> AgentAdapter:
    return AgentAdapter("opencode", _HOOKS.events)  # the plugin reads no reply


register("opencode", adapter)
