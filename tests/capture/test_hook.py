"""``cairn hook``: a payload in, the right events out, and the agent never sees a failure."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from cairn.capture import hook
from cairn.capture.agents import adapter_for
from cairn.capture.local import CaptureSettings, find_store, parse_capture
from tests.capture.project import Project, payload
from tests.capture.secrets import CORPUS


def _run_in_process(monkeypatch: pytest.MonkeyPatch, body: dict[str, Any], *args: str) -> str:
    """The hook's own ``main``, as the ``cairn hook`` process runs it (stdin, stdout)."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(body).encode())))
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    assert hook.main(list(args)) == 0
    return out.getvalue()


def _log(project: Project) -> list[dict[str, Any]]:
    if not project.hook_log.exists():
        return []
    return [json.loads(line) for line in project.hook_log.read_text().splitlines()]


def test_garbage_on_stdin_exits_0_and_leaves_a_diagnostic(project: Project) -> None:
    done = project.hook(b"\x00\xffnot json at all{")
    assert done.returncode == 0
    assert done.stdout == ""
    problems = [line["problem"] for line in _log(project)]
    assert problems == ["stdin is not JSON"]


def test_json_that_is_not_an_object_exits_0_with_a_diagnostic(project: Project) -> None:
    done = project.hook(b"[1, 2, 3]")
    assert done.returncode == 0
    assert [line["problem"] for line in _log(project)] == ["stdin is not a JSON object"]


def test_a_payload_outside_any_project_is_noted_not_an_error(
    tmp_path: Path, project: Project
) -> None:
    elsewhere = tmp_path / "no-store-here"
    elsewhere.mkdir()
    done = project.hook(payload("UserPromptSubmit", cwd=elsewhere, prompt="hi"))
    assert done.returncode == 0
    assert [line["problem"] for line in _log(project)] == ["no cairn store for this project"]


def test_the_hook_never_logs_the_payload(project: Project) -> None:
    secret = "sk-ant-api03-Qm9vYmFyQmF6UXV4UXV1eENvcmdlR3JhdWx0R2FycGx5"
    project.hook(b'{"prompt": "' + secret.encode() + b'", "broken": ')
    assert secret not in project.hook_log.read_text()


def test_the_store_is_found_from_the_payload_cwd_not_the_process(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = project.root / "src" / "pkg"
    deep.mkdir(parents=True)
    # the hook process runs in the state folder, which holds no store
    monkeypatch.chdir(project.state)
    assert find_store(str(deep)) == project.store.resolve()
    assert find_store(None) is None


def test_cairn_store_overrides_the_walk(
    tmp_path: Path, project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAIRN_STORE", str(project.store))
    assert find_store(str(tmp_path)) == project.store.resolve()
    monkeypatch.setenv("CAIRN_STORE", str(tmp_path / "missing"))
    assert find_store(str(project.root)) is None  # an override that is not a store is not guessed


def _events(body: dict[str, Any], settings: CaptureSettings | None = None) -> list[dict[str, Any]]:
    return hook.build_events(adapter_for("claude"), body, settings or CaptureSettings(), "code/x")


def test_event_ids_are_stable_for_a_retry_and_differ_for_new_calls(tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("{}\n")
    body = payload("UserPromptSubmit", prompt="yes", transcript_path=str(transcript))
    first = _events(body)[0]["event_id"]
    assert _events(body)[0]["event_id"] == first  # the same call again
    # the same words later in the session (the transcript has grown) are a new event
    transcript.write_text("{}\n{}\n")
    assert _events(body)[0]["event_id"] != first
    # a tool call is named by its own id, whatever the transcript does
    call = payload("PreToolUse", tool_name="Bash", tool_use_id="toolu_1", tool_input={"c": 1})
    named = _events(call)[0]["event_id"]
    transcript.write_text("grown\n" * 10)
    assert _events(call)[0]["event_id"] == named
    other = dict(call, tool_use_id="toolu_2")
    assert _events(other)[0]["event_id"] != named


def test_texts_and_metadata_are_redacted_and_counted() -> None:
    # the unclosed key block hides everything after it, so it goes last
    texts = sorted((t for _, t, _ in CORPUS), key=lambda t: "BEGIN RSA" in t)
    text = "\n".join(texts)
    events = _events(
        payload("PostToolUse", tool_name="Bash", tool_use_id="t", tool_response={"stdout": text})
    )
    stored = json.dumps(events)
    for _, _, secret in CORPUS:
        assert secret not in stored
    assert sum(events[0]["metadata"]["redactions"].values()) >= len(CORPUS) - 1


def test_long_output_is_cut_after_redaction_and_marked() -> None:
    body = payload("PostToolUse", tool_name="Bash", tool_use_id="t", tool_response="x" * 50_000)
    event = _events(body, CaptureSettings(max_event_chars=1000))[0]
    assert len(event["text"]) == 1000
    assert event["metadata"]["truncated_from"] == 50_000


def test_skipped_tools_are_not_recorded() -> None:
    read = payload("PostToolUse", tool_name="Read", tool_use_id="t", tool_response="file text")
    assert _events(read, CaptureSettings(skip_tools=("Read",))) == []
    assert len(_events(read)) == 1


def test_capture_settings_refuse_unknown_keys_and_bad_values() -> None:
    with pytest.raises(ValueError, match="unknown setting 'contxt'"):
        parse_capture({"contxt": True})
    with pytest.raises(ValueError, match="context must be true or false"):
        parse_capture({"context": "yes"})
    with pytest.raises(ValueError, match="context_tokens must be between"):
        parse_capture({"context_tokens": 20})
    assert parse_capture({"skip_tools": ["Read"]}).skip_tools == ("Read",)


def test_a_retried_hook_stores_one_event(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    project.start_daemon()
    body = payload("UserPromptSubmit", cwd=project.root, prompt="ship it")
    for _ in range(3):
        assert project.hook(body).returncode == 0
    events = project.events()
    assert [(e.kind, e.text) for e in events] == [("user_message", "ship it")]
    assert not project.spool.exists() or project.spool.stat().st_size == 0


def test_unknown_events_and_missing_fields_are_recorded(project: Project) -> None:
    project.start_daemon()
    odd = {"hook_event_name": "FancyNewEvent", "cwd": str(project.root), "extra": {"a": 1}}
    assert project.hook(odd).returncode == 0
    bare = {"hook_event_name": "Stop", "cwd": str(project.root)}
    assert project.hook(bare).returncode == 0
    kinds = sorted((e.kind, e.session_id) for e in project.events())
    assert kinds == [
        ("assistant_message", "unknown-session"),
        ("hook_fancy_new_event", "unknown-session"),
    ]


def test_the_hook_entry_point_imports_neither_the_cli_nor_the_kernel(project: Project) -> None:
    probe = (
        "import sys\n"
        "sys.argv = ['cairn', 'hook']\n"
        "from cairn._main import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as done:\n"
        "    assert done.code == 0, done.code\n"
        "heavy = sorted(m for m in ('typer', 'pydantic', 'fastapi', 'cairn.memory', 'numpy') "
        "if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        input=json.dumps(payload("Notification", cwd=project.root, message="hi")),
        capture_output=True,
        text=True,
        env=project.env(),
        timeout=60,
        check=True,
    )
    assert done.stdout.strip() == ""


def test_spool_and_log_live_in_the_state_folder_owner_only(project: Project) -> None:
    # no daemon: the event is spooled
    project.hook(payload("UserPromptSubmit", cwd=project.root, prompt="remember me"))
    assert project.spool.is_relative_to(project.state)
    assert not str(project.spool).startswith("/tmp/cairn")
    assert project.spool.stat().st_mode & 0o777 == 0o600
    for folder in (project.spool.parent, project.spool.parent.parent):
        assert folder.stat().st_mode & 0o777 == 0o700
    line = json.loads(project.spool.read_text().splitlines()[0])
    assert line["events"][0]["text"] == "remember me"


def test_an_agent_time_far_from_the_hooks_clock_gives_way_to_it() -> None:
    # a hook reports what happens now: a time stamp of year 9999 would lead every "recent"
    # context forever, so outside a day behind to minutes ahead the hook's time stands
    gemini = adapter_for("gemini")
    body = json.loads((Path(__file__).parent / "fixtures/gemini/after_agent.json").read_text())
    at = datetime(2026, 3, 2, 10, 20, tzinfo=UTC)
    near = hook.build_events(gemini, body, CaptureSettings(), "code/x", now=at)
    assert {e["ts"] for e in near} == {"2026-03-02T10:15:19.002000+00:00"}
    for far in ("9999-12-31T23:00:00Z", "0001-01-01T00:00:00Z", "2026-03-04T10:15:00Z"):
        events = hook.build_events(
            gemini, {**body, "timestamp": far}, CaptureSettings(), "code/x", now=at
        )
        assert {e["ts"] for e in events} == {at.isoformat()}, far
        assert all(e["metadata"]["agent_ts"].startswith(far[:10]) for e in events)


def test_a_long_metadata_string_is_cut_so_the_event_still_goes_in() -> None:
    codex = adapter_for("codex")
    body = json.loads((Path(__file__).parent / "fixtures/codex/stop_failure.json").read_text())
    body["error"] = "upstream 500: " + "x" * 12_000
    (event,) = hook.build_events(codex, body, CaptureSettings(), "code/x")
    assert event["metadata"]["error"].startswith("upstream 500: ")
    assert len(event["metadata"]["error"]) <= 2_000  # far below what the store refuses
