"""Agent adapters: one module per coding agent, each turning that agent's hook payload
(already parsed JSON) into ``Captured`` events in the common vocabulary below.

Adapters are pure functions of the payload, standard library only (they run inside the
lean hook process; named tuples rather than dataclasses, whose import costs the hook about
10 ms), and lenient: an unknown event or a missing optional field is recorded,
never an error. The hook core (``cairn.capture.hook``) does the rest: redaction, event ids,
the project's scope, the time stamp when the payload has none, sending or spooling.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, NamedTuple

__all__ = [
    "KINDS",
    "ROLES",
    "AgentAdapter",
    "Captured",
    "adapter_for",
    "event_name",
    "hook_kind",
    "no_reply",
    "payload_cwd",
    "register",
    "text_field",
]

# The common event kinds every adapter maps onto (one agent's event names → these):
KINDS = {
    "session_start": "a session began (metadata: source — startup, resume, clear, compact)",
    "user_message": "the user's prompt",
    "tool_call": "a tool is about to run (tool name and input)",
    "tool_result": "a tool ran (its output)",
    "tool_failure": "a tool failed (its error)",
    "assistant_message": "the agent's answer at the end of a turn",
    "subagent_start": "a sub-agent began",
    "subagent_stop": "a sub-agent finished (its last message)",
    "compaction": "the context is compacted (before: trigger; after: the summary)",
    "notification": "the agent asked for attention",
    "session_end": "a session ended (reason)",
}

# Who speaks in each kind of event, whatever the agent: an adapter's table names only the
# kind, and a kind no adapter knows (``hook_…``) is the system's.
ROLES = {
    "session_start": "system",
    "user_message": "user",
    "tool_call": "assistant",
    "tool_result": "tool",
    "tool_failure": "tool",
    "assistant_message": "assistant",
    "subagent_start": "system",
    "subagent_stop": "assistant",
    "compaction": "system",
    "notification": "system",
    "session_end": "system",
}


def hook_kind(event_name: str) -> str:
    """The kind for an event no adapter knows: ``hook_`` + its name in lower snake case
    (``FancyNewEvent`` → ``hook_fancy_new_event``), cut to the kernel's 64 characters."""
    out: list[str] = []
    for i, ch in enumerate(event_name):
        if ch.isupper() and i and (event_name[i - 1].islower() or event_name[i - 1].isdigit()):
            out.append("_")
        out.append(ch.lower() if ch.isalnum() and ch.isascii() else "_")
    snake = "_".join(part for part in "".join(out).split("_") if part) or "unknown"
    return ("hook_" + snake)[:64]


class Captured(NamedTuple):
    """One event as an adapter sees it, before redaction and before it has an id.

    ``identity`` is what makes this event itself, stable when the same hook call is
    retried with the same payload (a tool call's own id, or the canonical payload): the hook
    core derives the event id from it (see ``unique_identity``). ``ts`` is the agent's own
    time when the payload carries one (timezone-aware), else None (the hook stamps the time
    it ran)."""

    kind: str
    role: str  # user | assistant | tool | system
    text: str
    session_id: str
    identity: str
    metadata: dict[str, Any] = {}  # noqa: RUF012 - never changed in place: the hook copies it
    ts: datetime | None = None
    # True when ``identity`` names the event on its own (a tool call's id, a turn id); when
    # False the hook core also mixes in how far the session's transcript has grown, so two
    # equal prompts sent at different moments of a session stay two events
    unique_identity: bool = False


def text_field(payload: Mapping[str, Any], key: str) -> str | None:
    """A field that should be non-empty text, or None."""
    value = payload.get(key)
    return value if isinstance(value, str) and value else None


def event_name(payload: Mapping[str, Any]) -> str:
    """The ``hook_event_name`` most agents send (``Unknown`` without one)."""
    return text_field(payload, "hook_event_name") or "Unknown"


def payload_cwd(payload: Mapping[str, Any]) -> str | None:
    """The ``cwd`` most agents send."""
    return text_field(payload, "cwd")


def no_reply(payload: Mapping[str, Any], context: str | None) -> str | None:
    """The reply of an agent that reads nothing back from its hooks."""
    return None


class AgentAdapter(NamedTuple):
    """How cairn speaks one agent's hooks.

    ``to_events`` maps a payload; ``cwd`` finds the project folder in it (None: use the
    hook process's own working folder); ``reply`` is what the hook prints on stdout for a
    payload given the context text to hand back (None when there is none or the agent
    takes none): some agents read stdout as context, and some require JSON only there.
    The defaults are what most agents send: ``cwd`` and ``hook_event_name`` fields, and no
    use for a reply."""

    name: str
    to_events: Callable[[Mapping[str, Any]], list[Captured]]
    cwd: Callable[[Mapping[str, Any]], str | None] = payload_cwd
    reply: Callable[[Mapping[str, Any], str | None], str | None] = no_reply
    # the payload's event name (for diagnostics and for choosing when to answer with context)
    event_name: Callable[[Mapping[str, Any]], str] = event_name
    # event names on which the agent accepts context back from the hook
    context_events: frozenset[str] = frozenset()


_ADAPTERS: dict[str, Callable[[], AgentAdapter]] = {}


def register(name: str, factory: Callable[[], AgentAdapter]) -> None:
    _ADAPTERS[name] = factory


def adapter_for(name: str) -> AgentAdapter:
    """The adapter called ``name``; modules are imported on demand so the hook process
    loads only the one it needs."""
    import importlib

    known = ("claude", "gemini", "codex", "copilot", "cursor", "opencode")
    if name not in _ADAPTERS and name in known:
        importlib.import_module(f"cairn.capture.agents.{name}")
    if name not in _ADAPTERS:
        raise KeyError(f"no adapter for agent {name!r}; known: {', '.join(known)}")
    return _ADAPTERS[name]()
