"""Every recorded payload of every agent becomes the right event, with a stable identity,
and every agent gets a reply it can read.

The fixtures (tests/capture/fixtures/<agent>/*.json, each folder's README names its sources)
are payloads as the agents send them; the table below says what each must become.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from cairn.capture.agents import KINDS, Captured, adapter_for

FIXTURES = Path(__file__).parent / "fixtures"
AGENTS = ("claude", "gemini", "codex", "copilot", "cursor", "opencode")

CLAUDE_SESSION = "5f1c2a9e-3b7d-4e21-9c0a-7d4e2b1f8a60"
GEMINI_SESSION = "c1d2e3f4-0000-4a5b-8c9d-1234567890ab"
CODEX_SESSION = "019a7e2c-4b1f-7c30-9e8d-5a6b7c8d9e0f"
COPILOT_SESSION = "8e2d4c10-55aa-4f0b-9b1e-77c3d2a1f0e9"
CURSOR_SESSION = "b7e3a1f2-6c4d-4e8f-a0b1-c2d3e4f5a6b7"
OPENCODE_SESSION = "ses_6b1f2c3d4e5fA1b2C3d4E5f6"
PROJECT = "/home/dev/projects/shop"


@dataclass(frozen=True)
class Want:
    kind: str
    role: str
    text: str  # the whole text, or (with ``contains``) a piece of it
    session: str
    meta: dict[str, Any] = field(default_factory=dict)
    contains: bool = False
    ts: datetime | None = None


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


C, G, X, P, K, OC = (
    CLAUDE_SESSION,
    GEMINI_SESSION,
    CODEX_SESSION,
    COPILOT_SESSION,
    CURSOR_SESSION,
    OPENCODE_SESSION,
)
PYTEST = "pytest tests/test_checkout.py -q"

EXPECTED: dict[tuple[str, str], Want] = {
    # ---- Claude Code ----
    ("claude", "session_start"): Want(
        "session_start", "system", "startup", C, {"source": "startup", "model": "claude-sonnet-4-5"}
    ),
    ("claude", "session_start_minimal"): Want("session_start", "system", "", C),
    ("claude", "user_prompt_submit"): Want(
        "user_message",
        "user",
        "Why does the checkout test fail on Mondays?",
        C,
        {"permission_mode": "default", "prompt_id": "0b6f7c1e-0d4a-4b55-8d0e-2f9c3a1b7e42"},
    ),
    ("claude", "pre_tool_use"): Want(
        "tool_call", "assistant", "Bash: ", C, {"tool_name": "Bash"}, contains=True
    ),
    ("claude", "post_tool_use"): Want(
        "tool_result",
        "tool",
        "1 failed, 11 passed",
        C,
        {"tool_use_id": "toolu_01ABCcheckout", "duration_ms": 2140},
        contains=True,
    ),
    ("claude", "post_tool_use_other_call"): Want(
        "tool_result", "tool", "1 failed, 11 passed", C, {"tool_use_id": "toolu_02XYZrerun"}, True
    ),
    ("claude", "post_tool_use_failure"): Want(
        "tool_failure", "tool", "File does not exist.", C, {"is_interrupt": False}
    ),
    ("claude", "stop"): Want(
        "assistant_message",
        "assistant",
        "The test builds its date with the local time zone",
        C,
        {"stop_hook_active": False},
        contains=True,
    ),
    ("claude", "subagent_start"): Want(
        "subagent_start",
        "system",
        "Explore",
        C,
        {"agent_id": "agent_7f3e", "agent_type": "Explore"},
    ),
    ("claude", "subagent_stop"): Want(
        "subagent_stop",
        "assistant",
        "Found 3 call sites of discount_window().",
        C,
        {"agent_type": "Explore"},
    ),
    ("claude", "pre_compact"): Want(
        "compaction", "system", "", C, {"trigger": "manual", "phase": "before"}
    ),
    ("claude", "post_compact"): Want(
        "compaction",
        "system",
        "We traced the Monday failure to a time zone bug",
        C,
        {"trigger": "auto", "phase": "after"},
        contains=True,
    ),
    ("claude", "notification"): Want(
        "notification",
        "system",
        "Claude needs your permission to use Bash",
        C,
        {"notification_type": "permission_prompt"},
    ),
    ("claude", "session_end"): Want(
        "session_end", "system", "prompt_input_exit", C, {"reason": "prompt_input_exit"}
    ),
    ("claude", "unknown_event"): Want(
        "hook_task_completed", "system", '"task_id":"task_12"', C, contains=True
    ),
    # ---- Gemini CLI ----
    ("gemini", "session_start"): Want(
        "session_start",
        "system",
        "startup",
        G,
        {"source": "startup"},
        ts=_at("2026-03-02T10:15:00.120Z"),
    ),
    ("gemini", "before_agent"): Want(
        "user_message",
        "user",
        "List the TODOs in src/cart.py",
        G,
        ts=_at("2026-03-02T10:15:04.800Z"),
    ),
    ("gemini", "after_agent"): Want(
        "assistant_message",
        "assistant",
        "There are two TODOs: line 14 (rounding) and line 88 (coupon expiry).",
        G,
        {"stop_hook_active": False},
    ),
    ("gemini", "before_tool"): Want(
        "tool_call", "assistant", "read_file: ", G, {"tool_name": "read_file"}, contains=True
    ),
    ("gemini", "after_tool"): Want(
        "tool_result",
        "tool",
        "# TODO: rounding\n...\n# TODO: coupon expiry",
        G,
        {"tool_name": "read_file"},
    ),
    ("gemini", "after_tool_again"): Want(
        "tool_result", "tool", "# TODO: rounding\n...\n# TODO: coupon expiry", G
    ),
    ("gemini", "after_tool_error"): Want(
        "tool_failure", "tool", "Command exited with code 2", G, {"tool_name": "run_shell_command"}
    ),
    ("gemini", "after_tool_mcp"): Want("tool_result", "tool", "[]", G, {"mcp_server": "cairn"}),
    ("gemini", "pre_compress"): Want(
        "compaction", "system", "auto", G, {"trigger": "auto", "phase": "before"}
    ),
    ("gemini", "notification"): Want(
        "notification",
        "system",
        "Gemini wants to run: make lint",
        G,
        {"notification_type": "ToolPermission"},
    ),
    ("gemini", "session_end"): Want("session_end", "system", "exit", G, {"reason": "exit"}),
    ("gemini", "session_end_minimal"): Want("session_end", "system", "", "unknown-session"),
    ("gemini", "unknown_event"): Want(
        "hook_after_model", "system", "llm_response", G, contains=True
    ),
    # ---- Codex CLI ----
    ("codex", "session_start"): Want(
        "session_start", "system", "startup", X, {"source": "startup", "model": "gpt-5-codex"}
    ),
    ("codex", "user_prompt_submit"): Want(
        "user_message", "user", "Add a test for coupon expiry", X, {"turn_id": "turn_4"}
    ),
    ("codex", "pre_tool_use"): Want(
        "tool_call",
        "assistant",
        "rg -n coupon src",
        X,
        {"turn_id": "turn_4", "tool_use_id": "call_Kq81", "tool_name": "Bash"},
        contains=True,
    ),
    ("codex", "post_tool_use"): Want(
        "tool_result", "tool", "src/cart.py:88:    # TODO: coupon expiry", X, {"turn_id": "turn_4"}
    ),
    ("codex", "post_tool_use_other_call"): Want(
        "tool_result",
        "tool",
        "src/cart.py:88:    # TODO: coupon expiry",
        X,
        {"tool_use_id": "call_Zp02"},
    ),
    ("codex", "permission_request"): Want(
        "hook_permission_request", "system", "Bash: ", X, {"tool_name": "Bash"}, contains=True
    ),
    ("codex", "stop"): Want(
        "assistant_message",
        "assistant",
        "Added tests/test_coupon.py::test_expired_coupon_is_refused.",
        X,
        {"turn_id": "turn_4"},
    ),
    ("codex", "stop_failure"): Want(
        "hook_stop_failure", "system", "429 Too Many Requests", X, {"error": "rate_limit"}
    ),
    ("codex", "subagent_start"): Want(
        "subagent_start", "system", "reviewer", X, {"agent_id": "sub_2"}
    ),
    ("codex", "subagent_stop"): Want(
        "subagent_stop", "assistant", "Looks good.", X, {"agent_type": "reviewer"}
    ),
    ("codex", "pre_compact"): Want("compaction", "system", "manual", X, {"phase": "before"}),
    ("codex", "post_compact"): Want("compaction", "system", "manual", X, {"phase": "after"}),
    ("codex", "session_end"): Want("session_end", "system", "other", X, {"reason": "other"}),
    ("codex", "stop_minimal"): Want("assistant_message", "assistant", "", X, {"turn_id": "turn_9"}),
    ("codex", "unknown_event"): Want("hook_interrupt", "system", "", X, {"turn_id": "turn_4"}),
    # ---- GitHub Copilot CLI: camelCase payloads (no event name) ----
    ("copilot", "session_start"): Want(
        "session_start",
        "system",
        "Fix the flaky checkout test",
        P,
        {"hook_event": "sessionStart", "source": "new"},
        ts=datetime(2026, 3, 2, 10, 15, tzinfo=UTC),
    ),
    ("copilot", "session_end"): Want(
        "session_end", "system", "user_exit", P, {"hook_event": "sessionEnd", "reason": "user_exit"}
    ),
    ("copilot", "user_prompt_submitted"): Want(
        "user_message", "user", "Run the checkout tests", P, {"hook_event": "userPromptSubmitted"}
    ),
    ("copilot", "pre_tool_use"): Want(
        "tool_call",
        "assistant",
        "bash: ",
        P,
        {"hook_event": "preToolUse", "tool_name": "bash"},
        contains=True,
    ),
    ("copilot", "post_tool_use"): Want(
        "tool_result",
        "tool",
        "1 failed, 11 passed",
        P,
        {"hook_event": "postToolUse", "result_type": "success"},
        ts=datetime(2026, 3, 2, 10, 15, 16, tzinfo=UTC),
    ),
    ("copilot", "post_tool_use_later"): Want("tool_result", "tool", "1 failed, 11 passed", P),
    ("copilot", "post_tool_use_failure"): Want(
        "tool_failure", "tool", "ENOENT: no such file", P, {"hook_event": "postToolUseFailure"}
    ),
    ("copilot", "agent_stop"): Want(
        "assistant_message", "assistant", "end_turn", P, {"hook_event": "agentStop"}
    ),
    ("copilot", "subagent_start"): Want(
        "subagent_start",
        "system",
        "Explore",
        P,
        {"hook_event": "subagentStart", "agent_name": "explore"},
    ),
    ("copilot", "subagent_stop"): Want(
        "subagent_stop", "assistant", "explore", P, {"hook_event": "subagentStop"}
    ),
    ("copilot", "error_occurred"): Want(
        "hook_error_occurred",
        "system",
        "Model call timed out",
        P,
        {"error_context": "model_call", "recoverable": True},
    ),
    ("copilot", "pre_compact"): Want(
        "compaction", "system", "auto", P, {"hook_event": "preCompact", "phase": "before"}
    ),
    ("copilot", "notification"): Want(
        "notification",
        "system",
        "Copilot needs permission to run bash",
        P,
        {"notification_type": "permission_prompt"},
    ),
    # ---- GitHub Copilot CLI: the VS Code compatible (PascalCase) payloads ----
    ("copilot", "pascal_session_start"): Want(
        "session_start",
        "system",
        "startup",
        P,
        {"hook_event": "sessionStart"},
        ts=_at("2026-03-02T10:15:00.000Z"),
    ),
    ("copilot", "pascal_user_prompt_submit"): Want(
        "user_message", "user", "Run the checkout tests", P
    ),
    ("copilot", "pascal_pre_tool_use"): Want(
        "tool_call", "assistant", "pytest -q", P, {"tool_name": "bash"}, contains=True
    ),
    ("copilot", "pascal_post_tool_use"): Want("tool_result", "tool", "12 passed", P),
    ("copilot", "pascal_post_tool_use_denied"): Want(
        "tool_failure", "tool", "The user denied this tool call.", P, {"result_type": "denied"}
    ),
    ("copilot", "pascal_stop"): Want(
        "assistant_message", "assistant", "end_turn", P, {"hook_event": "agentStop"}
    ),
    ("copilot", "pascal_session_end"): Want("session_end", "system", "complete", P),
    ("copilot", "minimal_prompt"): Want("user_message", "user", "hello", "unknown-session"),
    ("copilot", "unknown_event"): Want(
        "hook_post_tool_batch", "system", '"tools"', P, contains=True
    ),
    # ---- Cursor ----
    ("cursor", "before_submit_prompt"): Want(
        "user_message",
        "user",
        "Rename total() to grand_total()",
        K,
        {"generation_id": "gen-31", "model": "claude-4.5-sonnet"},
    ),
    ("cursor", "before_shell_execution"): Want(
        "tool_call", "assistant", "$ pytest -q", K, {"tool_name": "Shell"}
    ),
    ("cursor", "after_shell_execution"): Want(
        "tool_result",
        "tool",
        "$ pytest -q\n12 passed in 1.02s",
        K,
        {"tool_name": "Shell", "duration": 1180},
    ),
    ("cursor", "after_shell_execution_again"): Want(
        "tool_result", "tool", "$ pytest -q\n12 passed in 1.02s", K, {"generation_id": "gen-32"}
    ),
    ("cursor", "before_mcp_execution"): Want(
        "tool_call", "assistant", "timeline_search: ", K, {"tool_name": "timeline_search"}, True
    ),
    ("cursor", "after_mcp_execution"): Want("tool_result", "tool", "[]", K, {"duration": 95}),
    ("cursor", "after_file_edit"): Want(
        "tool_result",
        "tool",
        "/home/dev/projects/shop/src/cart.py\n- def total(\n+ def grand_total(",
        K,
        {"tool_name": "Edit", "file_path": "/home/dev/projects/shop/src/cart.py"},
    ),
    ("cursor", "before_read_file"): Want(
        "hook_before_read_file", "system", "API_KEY", K, contains=True
    ),
    ("cursor", "after_agent_response"): Want(
        "assistant_message", "assistant", "Renamed total() to grand_total() in 3 files.", K
    ),
    ("cursor", "after_agent_thought"): Want(
        "hook_after_agent_thought", "system", "The callers are in cart.py", K, contains=True
    ),
    ("cursor", "stop"): Want(
        "hook_stop", "system", '"status":"completed"', K, {"status": "completed"}, contains=True
    ),
    ("cursor", "session_start"): Want(
        "session_start", "system", "agent", K, {"composer_mode": "agent"}
    ),
    ("cursor", "session_end"): Want(
        "session_end", "system", "user_close", K, {"reason": "user_close", "duration_ms": 600000}
    ),
    ("cursor", "pre_tool_use"): Want(
        "tool_call", "assistant", "Shell: ", K, {"tool_use_id": "tool_1"}, contains=True
    ),
    ("cursor", "post_tool_use"): Want(
        "tool_result", "tool", "src tests", K, {"tool_use_id": "tool_1"}
    ),
    ("cursor", "post_tool_use_failure"): Want(
        "tool_failure", "tool", "File not found", K, {"failure_type": "error"}
    ),
    ("cursor", "subagent_start"): Want(
        "subagent_start", "system", "Find callers of total()", K, {"subagent_type": "explore"}
    ),
    ("cursor", "subagent_stop"): Want("subagent_stop", "assistant", "3 callers", K),
    ("cursor", "pre_compact"): Want("compaction", "system", "auto", K, {"phase": "before"}),
    ("cursor", "minimal"): Want("assistant_message", "assistant", "", "unknown-session"),
    ("cursor", "unknown_event"): Want(
        "hook_after_tab_file_edit", "system", "file_path", K, contains=True
    ),
    # ---- OpenCode (the shapes cairn's plugin sends) ----
    ("opencode", "session_created"): Want(
        "session_start", "system", "New session - 2026-03-02T10:15:00.000Z", OC
    ),
    ("opencode", "chat_message"): Want(
        "user_message",
        "user",
        "Why is the cart total off by a cent?",
        OC,
        {"message_id": "msg_01", "agent": "build"},
        ts=_at("2026-03-02T10:15:05.000Z"),
    ),
    ("opencode", "tool_execute_before"): Want(
        "tool_call", "assistant", "read: ", OC, {"tool": "read", "call_id": "call_r1"}, True
    ),
    ("opencode", "tool_execute_after"): Want(
        "tool_result", "tool", "def total(items):", OC, {"call_id": "call_r1"}, contains=True
    ),
    ("opencode", "tool_execute_after_other_call"): Want(
        "tool_result", "tool", "def total(items):", OC, {"call_id": "call_r2"}, contains=True
    ),
    ("opencode", "assistant_message"): Want(
        "assistant_message",
        "assistant",
        "round() rounds half to even; use Decimal with ROUND_HALF_UP.",
        OC,
        {"message_id": "msg_02"},
    ),
    ("opencode", "session_compacted"): Want(
        "compaction", "system", "compacted", OC, {"phase": "after"}
    ),
    ("opencode", "session_deleted"): Want(
        "session_end", "system", "deleted", OC, {"reason": "deleted"}
    ),
    ("opencode", "session_error"): Want(
        "hook_session_error", "system", "ProviderAuthError", OC, contains=True
    ),
    ("opencode", "minimal"): Want("user_message", "user", "", "unknown-session"),
    ("opencode", "unknown_event"): Want("hook_file_edited", "system", "cart.py", OC, contains=True),
}

FIXTURE_IDS = [f"{agent}/{name}" for agent, name in sorted(EXPECTED)]

# Fixture pairs that are two different events of the same kind (two calls, two moments)
DIFFERENT = [
    ("claude", "post_tool_use", "post_tool_use_other_call"),
    ("gemini", "after_tool", "after_tool_again"),
    ("codex", "post_tool_use", "post_tool_use_other_call"),
    ("copilot", "post_tool_use", "post_tool_use_later"),
    ("cursor", "after_shell_execution", "after_shell_execution_again"),
    ("opencode", "tool_execute_after", "tool_execute_after_other_call"),
]


def _load(agent: str, name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((FIXTURES / agent / f"{name}.json").read_text("utf-8"))
    return loaded


def _one(agent: str, payload: dict[str, Any]) -> Captured:
    events = adapter_for(agent).to_events(payload)
    assert len(events) == 1
    return events[0]


def test_every_fixture_has_an_expectation_and_every_expectation_a_fixture() -> None:
    on_disk = {(p.parent.name, p.stem) for p in FIXTURES.glob("*/*.json")}
    assert on_disk == set(EXPECTED)
    assert {agent for agent, _ in on_disk} == set(AGENTS)
    for agent in AGENTS:
        assert (FIXTURES / agent / "README.md").is_file(), f"{agent} fixtures name no sources"


@pytest.mark.parametrize(("agent", "name"), sorted(EXPECTED), ids=FIXTURE_IDS)
def test_fixture_becomes_the_right_event(agent: str, name: str) -> None:
    want = EXPECTED[(agent, name)]
    event = _one(agent, _load(agent, name))
    assert (event.kind, event.role, event.session_id) == (want.kind, want.role, want.session)
    if want.contains:
        assert want.text in event.text
    else:
        assert event.text == want.text
    for key, value in want.meta.items():
        assert event.metadata.get(key) == value, key
    if want.ts is not None:
        assert event.ts == want.ts
    assert event.identity
    # an event the agent names in the common vocabulary, or a hook_* kind of its own
    assert event.kind in KINDS or event.kind.startswith("hook_")


@pytest.mark.parametrize("agent", AGENTS)
def test_every_common_kind_a_fixture_shows_is_documented(agent: str) -> None:
    for (fixture_agent, name), want in EXPECTED.items():
        if fixture_agent == agent and not want.kind.startswith("hook_"):
            assert want.kind in KINDS, name


@pytest.mark.parametrize(("agent", "name"), sorted(EXPECTED), ids=FIXTURE_IDS)
def test_the_same_payload_is_the_same_event(agent: str, name: str) -> None:
    payload = _load(agent, name)
    shuffled = dict(reversed(list(payload.items())))  # field order is not identity
    assert _one(agent, payload).identity == _one(agent, shuffled).identity


@pytest.mark.parametrize(("agent", "first", "second"), DIFFERENT)
def test_different_calls_are_different_events(agent: str, first: str, second: str) -> None:
    one, two = _one(agent, _load(agent, first)), _one(agent, _load(agent, second))
    assert one.kind == two.kind
    assert one.identity != two.identity


@pytest.mark.parametrize(
    ("agent", "pre", "post"),
    [
        ("claude", "pre_tool_use", "post_tool_use"),
        ("codex", "pre_tool_use", "post_tool_use"),
        ("cursor", "pre_tool_use", "post_tool_use"),
        ("opencode", "tool_execute_before", "tool_execute_after"),
    ],
)
def test_a_call_and_its_result_are_two_events(agent: str, pre: str, post: str) -> None:
    # they share the tool call's id, so the event name must tell them apart
    assert _one(agent, _load(agent, pre)).identity != _one(agent, _load(agent, post)).identity


@pytest.mark.parametrize("agent", AGENTS)
def test_an_unknown_event_is_recorded_as_a_hook_kind(agent: str) -> None:
    event = _one(agent, {"hook_event_name": "SomethingNew2031", "session_id": "s", "extra": 1})
    assert event.kind == "hook_something_new2031"
    assert event.role == "system"
    assert '"extra":1' in event.text


@pytest.mark.parametrize("agent", AGENTS)
@pytest.mark.parametrize(
    "payload",
    [{}, {"hook_event_name": None}, {"hook_event_name": 7, "session_id": 3, "cwd": ["x"]}],
    ids=["empty", "null-name", "wrong-types"],
)
def test_odd_payloads_never_raise(agent: str, payload: dict[str, Any]) -> None:
    adapter = adapter_for(agent)
    event = _one(agent, payload)
    assert event.session_id
    assert event.kind.startswith("hook_")
    adapter.cwd(payload)
    adapter.event_name(payload)
    reply = adapter.reply(payload, "context")
    assert reply is None or isinstance(reply, str)


# ---- where the project is -------------------------------------------------------------


@pytest.mark.parametrize(
    ("agent", "name"),
    [
        ("claude", "stop"),
        ("gemini", "before_agent"),
        ("codex", "stop"),
        ("copilot", "pre_tool_use"),
        ("copilot", "pascal_stop"),
        ("cursor", "after_shell_execution"),
        ("opencode", "chat_message"),
    ],
)
def test_the_project_folder_comes_from_the_payload(agent: str, name: str) -> None:
    assert adapter_for(agent).cwd(_load(agent, name)) == PROJECT


def test_cursor_takes_the_first_workspace_root_over_a_shell_cwd() -> None:
    payload = _load("cursor", "before_shell_execution") | {"cwd": PROJECT + "/src"}
    assert adapter_for("cursor").cwd(payload) == PROJECT


# ---- replies ---------------------------------------------------------------------------


def _all(agent: str) -> list[dict[str, Any]]:
    return [_load(a, n) for a, n in sorted(EXPECTED) if a == agent]


@pytest.mark.parametrize("agent", ["gemini", "cursor"])
@pytest.mark.parametrize("context", [None, "", "Earlier: the Monday bug was a time zone issue."])
def test_agents_that_read_stdout_as_json_always_get_json(agent: str, context: str | None) -> None:
    adapter = adapter_for(agent)
    for payload in [*_all(agent), {}, {"hook_event_name": "Whatever"}]:
        reply = adapter.reply(payload, context)
        assert isinstance(reply, str)
        assert isinstance(json.loads(reply), dict)


@pytest.mark.parametrize(
    ("agent", "name", "event_name"),
    [
        ("claude", "session_start", "SessionStart"),
        ("claude", "user_prompt_submit", "UserPromptSubmit"),
        ("gemini", "session_start", "SessionStart"),
        ("gemini", "before_agent", "BeforeAgent"),
        ("codex", "session_start", "SessionStart"),
        ("codex", "user_prompt_submit", "UserPromptSubmit"),
    ],
)
def test_context_goes_back_as_hook_specific_output(agent: str, name: str, event_name: str) -> None:
    adapter = adapter_for(agent)
    payload = _load(agent, name)
    assert adapter.event_name(payload) in adapter.context_events
    reply = adapter.reply(payload, "Earlier: the Monday bug." + "x" * 20_000)
    assert reply is not None
    out = json.loads(reply)["hookSpecificOutput"]
    assert out["hookEventName"] == event_name
    assert out["additionalContext"].startswith("Earlier: the Monday bug.")
    assert len(out["additionalContext"]) < 10_000  # Claude Code's cap; the others follow it


@pytest.mark.parametrize(
    ("agent", "name"),
    [
        ("claude", "stop"),
        ("claude", "post_tool_use"),
        ("codex", "post_tool_use"),
        ("copilot", "session_start"),
        ("copilot", "user_prompt_submitted"),
        ("opencode", "chat_message"),
    ],
)
def test_no_context_where_the_agent_takes_none(agent: str, name: str) -> None:
    assert adapter_for(agent).reply(_load(agent, name), "some context") is None


def test_gemini_says_nothing_but_an_empty_object_outside_context_events() -> None:
    adapter = adapter_for("gemini")
    assert adapter.reply(_load("gemini", "after_tool"), "context") == "{}"
    assert adapter.reply(_load("gemini", "before_agent"), None) == "{}"


def test_cursor_lets_every_prompt_through_and_gives_session_start_context() -> None:
    adapter = adapter_for("cursor")
    assert json.loads(adapter.reply(_load("cursor", "before_submit_prompt"), "ctx") or "") == {
        "continue": True
    }
    started = json.loads(adapter.reply(_load("cursor", "session_start"), "Recent: x") or "")
    assert started == {"additional_context": "Recent: x"}
    assert adapter.reply(_load("cursor", "after_file_edit"), "ctx") == "{}"


def test_copilot_recognises_camel_case_events_by_their_fields() -> None:
    from cairn.capture.agents.copilot import event_of

    names = {n: event_of(_load("copilot", n)) for a, n in EXPECTED if a == "copilot"}
    assert names["pre_tool_use"] == "preToolUse"
    assert names["post_tool_use_failure"] == "postToolUseFailure"
    assert names["subagent_start"] == "subagentStart"
    assert names["subagent_stop"] == "subagentStop"
    assert names["agent_stop"] == "agentStop"
    assert names["error_occurred"] == "errorOccurred"
    assert event_of({"sessionId": "s", "timestamp": 1}) == "unknown"


# ---- the hook process stays lean -------------------------------------------------------


def test_adapters_import_with_the_standard_library_only() -> None:
    # The hook process imports one adapter; nothing here may pull in pydantic and friends.
    code = (
        "import sys\n"
        "from cairn.capture.agents import adapter_for\n"
        f"for name in {AGENTS!r}:\n"
        "    adapter_for(name)\n"
        "heavy = sorted(m for m in ('pydantic', 'typer', 'rich', 'fastapi', 'httpx', 'yaml')"
        " if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    src = str(Path(__file__).resolve().parents[2] / "src")
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": src},
    )
    assert done.stdout.strip() == ""
