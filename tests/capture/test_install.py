"""``cairn hooks install`` / ``uninstall``: merged into what is there, taken out exactly,
and every agent's file in the format that agent reads."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cairn.capture import install, local
from cairn.capture.install import Scope, apply, is_cairn_command, plan_install, plan_uninstall
from cairn.doors.cli import app
from cairn.errors import InvalidInput

EXE = "/opt/tools/venv/bin/cairn"

# A settings file as people write them: their own hook, odd spacing, keys in their order,
# no newline at the end.
ODD_SETTINGS = (
    '{ "permissions":{"allow":["Bash(npm test:*)"]},\n'
    '\t"hooks": {\n'
    '\t\t"PreToolUse": [ {"matcher":"Bash","hooks":[{"type":"command",'
    '"command":"./guard.sh"}]} ],\n'
    '\t\t"Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]\n'
    "\t},\n"
    '  "model" :"opus"}'
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


def _scope(project: Path) -> Scope:
    return Scope(project=project, home=project.parent / "home", env={})


def _install(agent: str, project: Path, state: Path, **kw: Any) -> install.Plan:
    plan = plan_install(agent, _scope(project), EXE, **kw)
    apply(plan, state)
    return plan


def _uninstall(agent: str, project: Path, state: Path, **kw: Any) -> install.Plan:
    plan = plan_uninstall(agent, _scope(project), state, **kw)
    apply(plan, state)
    return plan


def _claude(project: Path) -> Path:
    return project / ".claude" / "settings.json"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))


def _cairn_handlers(data: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for event, groups in data.get("hooks", {}).items():
        for group in groups:
            for handler in group.get("hooks", [group]):
                command = handler.get("command") or handler.get("bash")
                if is_cairn_command(command):
                    found.append((event, handler))
    return found


# ---- Claude Code settings ------------------------------------------------------------


def test_merge_leaves_other_hooks_and_settings_alone(project: Path, state: Path) -> None:
    _write(_claude(project), ODD_SETTINGS)
    _install("claude", project, state)
    data = json.loads(_claude(project).read_text())
    assert data["permissions"] == {"allow": ["Bash(npm test:*)"]}
    assert data["model"] == "opus"
    assert list(data) == ["permissions", "hooks", "model"]  # the user's key order
    assert data["hooks"]["PreToolUse"][0] == {
        "matcher": "Bash",
        "hooks": [{"type": "command", "command": "./guard.sh"}],
    }
    assert data["hooks"]["Stop"][0] == {
        "hooks": [{"type": "command", "command": "notify-send done"}]
    }
    events = {event for event, _ in _cairn_handlers(data)}
    assert events == {hook.event for hook in install.CLAUDE_HOOKS}


def test_claude_hooks_are_async_except_where_their_output_or_ending_matters(
    project: Path, state: Path
) -> None:
    _install("claude", project, state)
    data = json.loads(_claude(project).read_text())
    handlers = dict(_cairn_handlers(data))
    waited = {event for event, handler in handlers.items() if not handler.get("async")}
    assert waited == {"SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"}
    assert all(handler["command"] == f"{EXE} hook --agent claude" for handler in handlers.values())
    assert all(0 < handler["timeout"] <= 10 for handler in handlers.values())
    tool_groups = [g for g in data["hooks"]["PreToolUse"] if g.get("matcher") == "*"]
    assert len(tool_groups) == 1


def test_uninstall_gives_the_file_back_byte_for_byte(project: Path, state: Path) -> None:
    _write(_claude(project), ODD_SETTINGS)
    _install("claude", project, state)
    assert _claude(project).read_bytes() != ODD_SETTINGS.encode()
    _uninstall("claude", project, state)
    assert _claude(project).read_bytes() == ODD_SETTINGS.encode()
    assert not list(state.glob("*.json"))  # the record went with it


def test_crlf_files_come_back_byte_for_byte_too(project: Path, state: Path) -> None:
    text = '{\r\n  "model": "opus"\r\n}\r\n'
    _write(_claude(project), text)
    _install("claude", project, state)
    assert b"\r\n" in _claude(project).read_bytes()  # written in the file's own style
    _uninstall("claude", project, state)
    assert _claude(project).read_bytes() == text.encode()


def test_a_file_install_made_is_removed_with_its_folder(project: Path, state: Path) -> None:
    _install("claude", project, state)
    assert _claude(project).is_file()
    _uninstall("claude", project, state)
    assert not (project / ".claude").exists()
    assert list(project.iterdir()) == []


def test_installing_twice_changes_nothing_the_second_time(project: Path, state: Path) -> None:
    _write(_claude(project), ODD_SETTINGS)
    _install("claude", project, state)
    once = _claude(project).read_bytes()
    again = plan_install("claude", _scope(project), EXE)
    assert not again.changed
    apply(again, state)
    assert _claude(project).read_bytes() == once
    _uninstall("claude", project, state)
    assert _claude(project).read_bytes() == ODD_SETTINGS.encode()


def test_installing_from_another_cairn_replaces_the_old_command(project: Path, state: Path) -> None:
    _write(_claude(project), ODD_SETTINGS)
    _install("claude", project, state)
    plan = plan_install("claude", _scope(project), "/new/venv/bin/cairn")
    apply(plan, state)
    commands = {h["command"] for _, h in _cairn_handlers(json.loads(_claude(project).read_text()))}
    assert commands == {"/new/venv/bin/cairn hook --agent claude"}
    _uninstall("claude", project, state)
    assert _claude(project).read_bytes() == ODD_SETTINGS.encode()


def test_edits_made_since_install_survive_uninstall(project: Path, state: Path) -> None:
    _write(_claude(project), ODD_SETTINGS)
    _install("claude", project, state)
    data = json.loads(_claude(project).read_text())
    data["theme"] = "dark"
    data["hooks"]["PostToolUse"].append({"hooks": [{"type": "command", "command": "./log.sh"}]})
    _claude(project).write_text(json.dumps(data, indent=2))
    _uninstall("claude", project, state)
    after = json.loads(_claude(project).read_text())
    assert after["theme"] == "dark"
    assert after["hooks"]["PostToolUse"] == [
        {"hooks": [{"type": "command", "command": "./log.sh"}]}
    ]
    assert _cairn_handlers(after) == []
    assert after["hooks"]["PreToolUse"][0]["hooks"][0]["command"] == "./guard.sh"
    assert after["model"] == "opus"


def test_reformatted_but_unchanged_settings_come_back_as_they_were(
    project: Path, state: Path
) -> None:
    _write(_claude(project), ODD_SETTINGS)
    _install("claude", project, state)
    data = json.loads(_claude(project).read_text())
    _claude(project).write_text(json.dumps(data, indent=4))  # an editor reformatted it
    _uninstall("claude", project, state)
    assert _claude(project).read_bytes() == ODD_SETTINGS.encode()


def test_without_a_record_uninstall_takes_out_only_cairns_entries(
    project: Path, state: Path
) -> None:
    _write(_claude(project), ODD_SETTINGS)
    _install("claude", project, state)
    shutil.rmtree(state)  # the state folder was lost
    _uninstall("claude", project, state)
    after = json.loads(_claude(project).read_text())
    assert after == json.loads(ODD_SETTINGS)


@pytest.mark.parametrize(
    "text",
    ['{"hooks": {', "[1, 2]", '{"hooks": []}', '{"hooks": {"Stop": {}}}'],
    ids=["broken", "not-an-object", "hooks-not-an-object", "event-not-a-list"],
)
def test_a_file_cairn_cannot_read_is_refused_and_left_alone(
    project: Path, state: Path, text: str
) -> None:
    _write(_claude(project), text)
    with pytest.raises(InvalidInput) as refused:
        plan_install("claude", _scope(project), EXE)
    assert str(_claude(project)) in refused.value.message
    assert "left" in refused.value.message
    assert _claude(project).read_bytes() == text.encode()
    assert not state.exists()


def test_the_command_quotes_an_executable_path_with_spaces() -> None:
    command = install.hook_command("/Users/me/My Tools/venv/bin/cairn", "claude")
    assert command == "'/Users/me/My Tools/venv/bin/cairn' hook --agent claude"
    assert is_cairn_command(command, "claude")
    assert not is_cairn_command(command, "gemini")
    assert not is_cairn_command("./guard.sh hook --agent claude")
    assert not is_cairn_command("cairnish hook --agent claude")


# ---- every agent's file ------------------------------------------------------------------


def _grouped(data: dict[str, Any], events: set[str]) -> list[dict[str, Any]]:
    assert set(data["hooks"]) == events
    handlers = []
    for event, groups in data["hooks"].items():
        assert isinstance(groups, list) and len(groups) == 1, event
        assert isinstance(groups[0]["hooks"], list)
        handlers.extend(groups[0]["hooks"])
    return handlers


def test_gemini_settings(project: Path, state: Path) -> None:
    _write(project / ".gemini" / "settings.json", '{"theme": "GitHub"}\n')
    _install("gemini", project, state)
    data = json.loads((project / ".gemini" / "settings.json").read_text())
    assert data["theme"] == "GitHub"
    handlers = _grouped(data, {h.event for h in install.GEMINI_HOOKS})
    for handler in handlers:
        assert handler == {
            "name": "cairn",
            "type": "command",
            "command": f"{EXE} hook --agent gemini",
            "timeout": 10_000,  # Gemini counts in milliseconds
        }
    assert data["hooks"]["BeforeTool"][0]["matcher"] == "*"


def test_codex_hooks_json(project: Path, state: Path) -> None:
    _install("codex", project, state)
    data = json.loads((project / ".codex" / "hooks.json").read_text())
    assert set(data) == {"hooks"}  # Codex refuses any other top-level key
    handlers = _grouped(data, {h.event for h in install.CODEX_HOOKS})
    assert all(h["command"] == f"{EXE} hook --agent codex" for h in handlers)
    assert data["hooks"]["SessionEnd"][0]["hooks"][0]["timeout"] <= 3


def test_copilot_hooks_file(project: Path, state: Path) -> None:
    _install("copilot", project, state)
    path = project / ".github" / "hooks" / "cairn.json"
    data = json.loads(path.read_text())
    assert data["version"] == 1
    assert set(data["hooks"]) == {h.event for h in install.COPILOT_HOOKS}
    for entries in data["hooks"].values():
        assert entries == [
            {"type": "command", "bash": f"{EXE} hook --agent copilot", "timeoutSec": 10}
        ]
    _uninstall("copilot", project, state)
    assert not (project / ".github").exists()


def test_cursor_hooks_file_keeps_the_users_hooks(project: Path, state: Path) -> None:
    original = (
        '{\n  "version": 1,\n  "hooks": {\n    "afterFileEdit": [{"command": "./fmt.sh"}]\n  }\n}\n'
    )
    _write(project / ".cursor" / "hooks.json", original)
    _install("cursor", project, state)
    data = json.loads((project / ".cursor" / "hooks.json").read_text())
    assert data["version"] == 1
    assert set(data["hooks"]) == {h.event for h in install.CURSOR_HOOKS}
    assert data["hooks"]["afterFileEdit"] == [
        {"command": "./fmt.sh"},
        {"command": f"{EXE} hook --agent cursor"},
    ]
    # no permission hooks: their answer is the user's
    assert not {"beforeShellExecution", "beforeMCPExecution", "beforeReadFile"} & set(data["hooks"])
    _uninstall("cursor", project, state)
    assert (project / ".cursor" / "hooks.json").read_text() == original


def test_opencode_plugin_file(project: Path, state: Path) -> None:
    _install("opencode", project, state)
    path = project / ".opencode" / "plugins" / "cairn.js"
    text = path.read_text()
    assert f"const CAIRN_COMMAND = {json.dumps(EXE)}" in text
    assert '"hook", "--agent", "opencode"' in text
    _uninstall("opencode", project, state)
    assert not (project / ".opencode").exists()


def test_opencode_refuses_to_overwrite_a_file_that_is_not_cairns(
    project: Path, state: Path
) -> None:
    _write(project / ".opencode" / "plugins" / "cairn.js", "export const Mine = async () => ({})\n")
    with pytest.raises(InvalidInput):
        plan_install("opencode", _scope(project), EXE)


@pytest.mark.parametrize(
    ("agent", "where"),
    [
        ("claude", ".claude/settings.json"),
        ("gemini", ".gemini/settings.json"),
        ("codex", ".codex/hooks.json"),
        ("cursor", ".cursor/hooks.json"),
        ("opencode", ".config/opencode/plugins/cairn.js"),
    ],
)
def test_user_settings_live_under_home(tmp_path: Path, agent: str, where: str) -> None:
    scope = Scope(project=None, home=tmp_path, env={})
    plan = plan_install(agent, scope, EXE)
    assert [change.path for change in plan.changes] == [tmp_path / where]


def test_copilot_has_no_user_settings(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="repository"):
        plan_install("copilot", Scope(project=None, home=tmp_path, env={}), EXE)


@pytest.mark.parametrize("agent", install.AGENTS)
def test_every_agent_uninstalls_to_nothing(project: Path, state: Path, agent: str) -> None:
    _install(agent, project, state)
    assert list(project.iterdir())
    _uninstall(agent, project, state)
    assert list(project.iterdir()) == []


# ---- the Claude Code plugin ---------------------------------------------------------------


def test_plugin_install_writes_a_marketplace_and_enables_it(project: Path, state: Path) -> None:
    _write(_claude(project), ODD_SETTINGS)
    _install("claude", project, state, plugin=True)
    market = project / ".claude" / "cairn-plugin"
    data = json.loads(_claude(project).read_text())
    assert data["extraKnownMarketplaces"]["cairn-local"] == {
        "source": {"source": "directory", "path": str(market)}
    }
    assert data["enabledPlugins"] == {"cairn@cairn-local": True}
    assert json.loads((market / ".claude-plugin" / "marketplace.json").read_text())["name"] == (
        "cairn-local"
    )
    hooks = json.loads((market / "cairn" / "hooks" / "hooks.json").read_text())["hooks"]
    assert {h["command"] for _, h in _cairn_handlers({"hooks": hooks})} == {
        f"{EXE} hook --agent claude"
    }
    mcp = json.loads((market / "cairn" / ".mcp.json").read_text())["mcpServers"]["cairn"]
    assert mcp["command"] == EXE
    assert (market / "cairn" / "skills" / "memory" / "SKILL.md").is_file()
    _uninstall("claude", project, state, plugin=True)
    assert _claude(project).read_bytes() == ODD_SETTINGS.encode()
    assert not market.exists()


def test_plugin_install_warns_when_the_raw_hooks_are_there(project: Path, state: Path) -> None:
    assert not plan_install("claude", _scope(project), EXE, plugin=True).notes
    _install("claude", project, state)
    notes = plan_install("claude", _scope(project), EXE, plugin=True).notes
    assert len(notes) == 1 and "twice" in notes[0]


# ---- the command line ---------------------------------------------------------------------


@pytest.fixture
def cli_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", home.as_posix())
    monkeypatch.setenv("CAIRN_STATE_DIR", (tmp_path / "state").as_posix())
    return {"HOME": home.as_posix()}


def _cli(*args: str) -> Any:
    return CliRunner().invoke(app, ["hooks", *args, "--cairn", EXE])


def test_cli_dry_run_shows_the_diff_and_writes_nothing(project: Path, cli_env: Any) -> None:
    _write(_claude(project), ODD_SETTINGS)
    result = _cli("install", "--project", str(project), "--dry-run")
    assert result.exit_code == 0, result.output
    assert f"+++ {_claude(project)}" in result.output
    assert f"{EXE} hook --agent claude" in result.output
    assert _claude(project).read_bytes() == ODD_SETTINGS.encode()


def test_cli_refuses_without_a_terminal_or_yes(project: Path, cli_env: Any) -> None:
    result = _cli("install", "--project", str(project))
    assert result.exit_code == InvalidInput.exit_code  # a usage problem: add --yes
    assert "--yes" in result.output
    assert "+++" in result.output  # the diff is shown all the same
    assert not _claude(project).exists()


def test_cli_yes_installs_and_uninstall_restores(project: Path, cli_env: Any) -> None:
    _write(_claude(project), ODD_SETTINGS)
    assert _cli("install", "--project", str(project), "--yes").exit_code == 0
    assert is_cairn_command(_claude(project).read_text(), "claude")
    again = _cli("install", "--project", str(project), "--yes")
    assert "already in place" in again.output
    done = CliRunner().invoke(app, ["hooks", "uninstall", "--project", str(project), "--yes"])
    assert done.exit_code == 0, done.output
    assert _claude(project).read_bytes() == ODD_SETTINGS.encode()


def test_cli_user_writes_the_users_settings(cli_env: dict[str, str]) -> None:
    result = _cli("install", "--user", "--yes", "--agent", "gemini")
    assert result.exit_code == 0, result.output
    assert (Path(cli_env["HOME"]) / ".gemini" / "settings.json").is_file()


def test_cli_reports_an_unreadable_file(project: Path, cli_env: Any) -> None:
    _write(_claude(project), "{not json")
    result = _cli("install", "--project", str(project), "--yes")
    assert result.exit_code == 2
    assert "not valid JSON" in result.output
    assert _claude(project).read_text() == "{not json"


def test_cli_plugin_and_unknown_agent(project: Path, cli_env: Any) -> None:
    result = _cli("install", "--project", str(project), "--plugin", "--yes")
    assert result.exit_code == 0, result.output
    assert (project / ".claude" / "cairn-plugin" / "cairn" / ".mcp.json").is_file()
    wrong = _cli("install", "--project", str(project), "--agent", "emacs")
    assert wrong.exit_code == 2
    assert "unknown agent" in wrong.output
    gemini_plugin = _cli("install", "--project", str(project), "--agent", "gemini", "--plugin")
    assert gemini_plugin.exit_code == 2


# ---- the OpenCode plugin runs -------------------------------------------------------------

_NODE_HARNESS = r"""
import cp from "node:child_process"
import { syncBuiltinESMExports } from "node:module"
const calls = []
cp.spawn = (cmd, args) => {
  const call = { cmd, args, input: null }
  calls.push(call)
  const stdin = { on() {}, end(data) { call.input = JSON.parse(data) } }
  return { stdin, on() {}, unref() {} }
}
syncBuiltinESMExports()
const { CairnCapture } = await import(process.argv[2])
const hooks = await CairnCapture({ directory: "/home/dev/projects/shop" })
await hooks["chat.message"]({ sessionID: "ses_1", messageID: "msg_1", agent: "build" },
  { message: { id: "msg_1" }, parts: [{ type: "text", text: "Why?" }] })
await hooks["tool.execute.before"]({ tool: "bash", sessionID: "ses_1", callID: "c1" },
  { args: { command: "ls" } })
await hooks["tool.execute.after"]({ tool: "bash", sessionID: "ses_1", callID: "c1" },
  { title: "ls", output: "src", metadata: {} })
await hooks.event({ event: { type: "message.part.updated", properties: { part:
  { id: "p1", messageID: "msg_2", sessionID: "ses_1", type: "text", text: "Because" } } } })
await hooks.event({ event: { type: "message.part.updated", properties: { part:
  { id: "p1", messageID: "msg_2", sessionID: "ses_1", type: "text", text: "Because." } } } })
const done = { info: { id: "msg_2", sessionID: "ses_1", role: "assistant",
  time: { completed: 1 } } }
await hooks.event({ event: { type: "message.updated", properties: done } })
await hooks.event({ event: { type: "message.updated", properties: done } })
await hooks.event({ event: { type: "session.idle", properties: { sessionID: "ses_1" } } })
console.log(JSON.stringify(calls))
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_the_opencode_plugin_hands_each_event_to_cairn(project: Path, state: Path) -> None:
    from cairn.capture.agents import adapter_for

    _install("opencode", project, state)
    plugin = project / "cairn.mjs"
    shutil.copy(project / ".opencode" / "plugins" / "cairn.js", plugin)
    harness = project / "harness.mjs"
    harness.write_text(_NODE_HARNESS)
    done = subprocess.run(
        ["node", str(harness), plugin.as_uri()], capture_output=True, text=True, check=True
    )
    calls = json.loads(done.stdout)
    assert {call["cmd"] for call in calls} == {EXE}
    assert all(call["args"] == ["hook", "--agent", "opencode"] for call in calls)
    events = [adapter_for("opencode").to_events(call["input"])[0] for call in calls]
    assert [(e.kind, e.text) for e in events] == [
        ("user_message", "Why?"),
        ("tool_call", "bash: command: ls"),
        ("tool_result", "src"),
        ("assistant_message", "Because."),  # once, with the part's last text
    ]
    assert {e.session_id for e in events} == {"ses_1"}
    assert all(call["input"]["cwd"] == "/home/dev/projects/shop" for call in calls)


@pytest.mark.parametrize("kind", ["link to /dev/zero", "pipe", "too large"])
def test_a_settings_file_that_is_not_a_small_regular_file_is_refused_unread(
    project: Path, kind: str
) -> None:
    """A cloned project can hold anything at an agent's settings path: a link to an endless
    device, a pipe that would wait for a writer forever, a huge file. Each is refused with
    a message, without being read whole (or waited on)."""
    path = _claude(project)
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "pipe":
        os.mkfifo(path)
    elif kind == "too large":
        with path.open("wb") as handle:
            handle.truncate(install.MAX_SETTINGS_BYTES + 1)
    else:
        path.symlink_to("/dev/zero")
    with pytest.raises(InvalidInput, match="left it as it is"):
        plan_install("claude", _scope(project), EXE)


def _initialised_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A project whose store `cairn init` made here (trusted, in a state folder of the
    test's own), and the folder a clone will go to."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    made, cloned = tmp_path / "made", tmp_path / "cloned"
    made.mkdir()
    monkeypatch.chdir(made)
    assert CliRunner().invoke(app, ["init"]).exit_code == 0
    return made, cloned


def test_init_trusts_its_store_and_trust_and_untrust_say_which_stores_the_hooks_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made, cloned = _initialised_here(tmp_path, monkeypatch)
    runner = CliRunner()
    assert local.find_store(str(made)) == (made / ".cairn").resolve()
    # a clone's store: the files of a store, made by something other than `cairn init` here
    shutil.copytree(made / ".cairn", cloned / ".cairn")
    assert local.find_store(str(cloned)) is None
    note = runner.invoke(app, ["hooks", "install", "--project", str(cloned), "--yes"])
    assert note.exit_code == 0 and "cairn hooks trust" in note.stderr
    assert runner.invoke(app, ["hooks", "trust", str(cloned)]).exit_code == 0
    assert local.find_store(str(cloned)) == (cloned / ".cairn").resolve()
    assert runner.invoke(app, ["hooks", "untrust", str(cloned / ".cairn")]).exit_code == 0
    assert local.find_store(str(cloned)) is None
    again = runner.invoke(app, ["hooks", "untrust", str(cloned)])
    assert again.exit_code == 0 and "was not trusted" in again.stdout
    # what is no store of the user's cannot be trusted
    refused = runner.invoke(app, ["hooks", "trust", str(tmp_path)])
    assert refused.exit_code == 2 and "not a cairn store" in refused.stderr


def test_the_diff_shows_a_settings_files_control_characters_escaped(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a settings file that came with a cloned repository: JSON keeps C0 escaped, but C1
    # (\x9b is a CSI on many terminals) and bidi overrides reach the diff as they are
    _write(_claude(project), '{"model": "opus\u009b2J \u202egnp.exe"}\n')
    monkeypatch.setenv("XDG_STATE_HOME", str(project.parent / "state"))
    done = CliRunner().invoke(app, ["hooks", "install", "--project", str(project), "--dry-run"])
    assert done.exit_code == 0
    assert "\x9b" not in done.stdout and "\u202e" not in done.stdout
    assert "opus\\x9b2J" in done.stdout


def test_init_over_a_cloned_stores_files_does_not_trust_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made, cloned = _initialised_here(tmp_path, monkeypatch)
    # what a repository commits of a store: its files, not its database
    (cloned / ".cairn").mkdir(parents=True)
    for name in ("policy.yaml", "principals.yaml"):
        shutil.copy(made / ".cairn" / name, cloned / ".cairn" / name)
    (cloned / ".cairn" / "config.toml").write_text('embedder = "openai:http://127.0.0.1:9/v1#m"\n')
    monkeypatch.chdir(cloned)
    done = CliRunner().invoke(app, ["init"])
    assert done.exit_code == 0 and "cairn hooks trust" in done.stderr
    assert local.nearest_store(str(cloned)) == (cloned / ".cairn").resolve()
    assert local.find_store(str(cloned)) is None
