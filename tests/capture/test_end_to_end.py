"""The whole flow, as Claude Code drives it: hook processes record a session; the next
session starts with that session's context, cited to events that exist; and no secret the
session saw is kept anywhere."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from cairn.capture import local
from cairn.memory import Memory
from tests.capture.project import Project, payload
from tests.capture.secrets import CORPUS
from tests.factories import CURATOR


def _rolled_up(project: Project, timeout: float = 90.0) -> None:
    """Wait (polling, with a deadline) until the daemon's background rollup has taken every
    event in."""
    deadline = time.monotonic() + timeout
    memory = project.memory()
    try:
        while memory.timeline_status(principal=CURATOR).lag:
            assert time.monotonic() < deadline, "the daemon did not roll the timeline up"
            time.sleep(0.05)
    finally:
        memory.close()


def _session(project: Project, session: str) -> None:
    calls = [
        payload("SessionStart", session, project.root, source="startup", model="claude-x"),
        payload(
            "UserPromptSubmit",
            session,
            project.root,
            prompt="Move the billing service to PostgreSQL 16",
        ),
        payload(
            "PreToolUse",
            session,
            project.root,
            tool_name="Bash",
            tool_use_id="toolu_a",
            tool_input={"command": "pg_upgrade --old-datadir /srv/pg14"},
        ),
        payload(
            "PostToolUse",
            session,
            project.root,
            tool_name="Bash",
            tool_use_id="toolu_a",
            tool_input={"command": "pg_upgrade --old-datadir /srv/pg14"},
            tool_response={"stdout": "Upgrade Complete", "stderr": ""},
        ),
        payload(
            "Stop",
            session,
            project.root,
            stop_hook_active=False,
            last_assistant_message="Billing now runs on PostgreSQL 16; the upgrade completed.",
        ),
        payload("SessionEnd", session, project.root, reason="logout"),
    ]
    for call in calls:
        done = project.hook(call)
        assert done.returncode == 0, done.stderr
        assert done.stdout == ""  # context is only ever handed back at a session's start


def test_the_next_session_starts_with_the_last_ones_context_cited_to_real_events(
    project: Project,
) -> None:
    (project.store / "config.toml").write_text("[capture]\ncontext = true\ncontext_tokens = 600\n")
    local.trust_store(project.store)  # the user's own edit, trusted again
    project.start_daemon()
    _session(project, "session-1")
    _rolled_up(project)
    done = project.hook(payload("SessionStart", "session-2", project.root, source="startup"))
    assert done.returncode == 0
    reply = json.loads(done.stdout)["hookSpecificOutput"]
    assert reply["hookEventName"] == "SessionStart"
    context = reply["additionalContext"]
    assert "PostgreSQL 16" in context
    assert len(context) <= 10_000
    cited_nodes = re.findall(r"\((tl_[^@\s]+)@(\d+)", context)
    cited_grips = set(re.findall(r"grp_[0-9a-f]+", context))
    assert cited_nodes and cited_grips
    memory: Memory = project.memory()
    try:
        stored = memory.events(principal=CURATOR, limit=1000)
        session_1 = {e.event_id for e in stored if e.session_id == "session-1"}
        for node_id, version in cited_nodes:
            node = memory.timeline_node(node_id, principal=CURATOR, version=int(version))
            assert node.version == int(version)
        reached: set[str] = set()
        for grip_id in cited_grips:
            expanded = memory.expand_grip(grip_id, principal=CURATOR, before=0, after=0)
            assert expanded.events
            reached |= {e.event_id for e in expanded.events}
        # every citation leads to stored events, and they hold the last session's work
        assert reached <= {e.event_id for e in stored}
        assert len(reached & session_1) >= 3
    finally:
        memory.close()


def test_no_secret_is_kept_anywhere(project: Project, tmp_path: Path) -> None:
    """Secrets pass through a session twice, once while the daemon is down (spooled, then
    replayed) and once while it is up; afterwards no file of the store, the spool or the
    logs holds any of them (events, timeline nodes, grips and search indexes all live in
    the store's files)."""
    texts = [text for _, text, _ in CORPUS]

    def leak_everything(session: str) -> None:
        for i, text in enumerate(texts):
            project.hook(
                payload("UserPromptSubmit", session, project.root, prompt=f"note {i}: {text}")
            )
            project.hook(
                payload(
                    "PostToolUse",
                    session,
                    project.root,
                    tool_name="Bash",
                    tool_use_id=f"{session}-{i}",
                    tool_input={"command": f"echo {text}"},
                    tool_response={"stdout": text},
                )
            )

    leak_everything("down")  # spooled
    assert project.spool.exists()
    project.start_daemon()  # replays the spool
    leak_everything("up")
    _rolled_up(project)
    project.stop_daemon()  # the WAL is checkpointed into the database file
    memory = project.memory()
    try:
        stored = memory.events(principal=CURATOR, limit=1000)
    finally:
        memory.close()
    assert len(stored) == 4 * len(texts)  # everything arrived, redacted
    assert any("[REDACTED:" in e.text for e in stored)
    files = [p for root in (project.store, project.state) for p in root.rglob("*") if p.is_file()]
    assert any(p.name == "cairn.db" for p in files)
    for path in files:
        data = path.read_bytes()
        for name, _, secret in CORPUS:
            assert secret.encode() not in data, f"{name} found in {path}"
