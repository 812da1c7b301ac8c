"""Attacks on coding-agent capture: payloads, stores, the spool and the settings files that
once made the hook hang, lose events, talk to someone else's daemon or write outside the
project. Each test is one finding of the capture review, kept so it stays fixed."""

from __future__ import annotations

import io
import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cairn.capture import hook, local
from cairn.capture.agents import adapter_for
from cairn.capture.install import Scope, apply, plan_install, plan_uninstall
from cairn.capture.local import CaptureSettings, find_store
from cairn.capture.redact import Redactor
from cairn.capture.spool import Outcome, Spool
from cairn.doors.cli import app
from cairn.errors import InvalidInput
from cairn.small_files import MAX_SETTINGS_FILE_BYTES
from cairn.workspace import Workspace
from tests.blocking import within_seconds
from tests.capture.project import Project, payload, storing

# ---- redaction never stalls the hook ----------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        # three unbounded runs of white space in a row: cubic (3,000 blanks took 133 s)
        "Authorization:" + " " * 3_000,
        "authorization=" + "\t" * 3_000 + "x",
        # \b holds after each "-": the JWT scan restarted at each one (1 MB took minutes)
        "eyJ-" * 50_000,
        "eyJhbGciOiJIUzI1NiJ9-" * 10_000,
    ],
    ids=["auth-blanks", "auth-tabs", "jwt-dashes", "jwt-heads"],
)
def test_redaction_stays_fast_on_pathological_text(text: str) -> None:
    started = time.perf_counter()
    Redactor().redact(text)
    assert time.perf_counter() - started < 1.0


def test_the_bounded_patterns_still_find_their_secrets() -> None:
    out = Redactor().redact("curl -H 'Authorization:   Bearer 9f8e7d6c5b4a3928' x")
    assert "9f8e7d6c5b4a3928" not in out
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0"
    assert Redactor().redact(f"jwt={jwt}") == "jwt=[REDACTED:jwt]"


# ---- the store a payload names --------------------------------------------------------


def test_a_store_someone_else_owns_is_never_used(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``.cairn`` planted above the payload's cwd (``/tmp/.cairn`` for a project in
    ``/tmp``) would get every prompt through its socket and choose the agent's context."""
    assert find_store(str(project.root)) == project.store.resolve()
    someone_else = os.geteuid() + 1
    monkeypatch.setattr(local.os, "geteuid", lambda: someone_else)
    assert find_store(str(project.root)) is None
    # named outright it is the user's choice (a container's root on a mounted project)
    assert find_store(None, str(project.store)) == project.store.resolve()


def test_a_store_that_came_with_a_clone_records_nothing_until_trusted(
    project: Project,
) -> None:
    """A cloned repository's ``.cairn`` is the user's by ownership, but its settings are
    someone else's: an embedder of their choosing would get every prompt. Until the user
    trusts it, the hook stores, spools and starts nothing for it."""
    project.start_daemon()
    assert local.untrust_store(project.store)  # as a clone arrives: never trusted here
    assert find_store(str(project.root)) is None
    body = payload("UserPromptSubmit", cwd=project.root, prompt="TOPSECRET plans")
    assert project.hook(body).returncode == 0
    assert project.events() == []
    assert not project.spool.exists()
    log = project.hook_log.read_text()
    assert "not trusted" in log and "TOPSECRET" not in log
    local.trust_store(project.store)
    assert project.hook(body).returncode == 0
    assert [e.text for e in project.events()] == ["TOPSECRET plans"]


def test_trust_is_for_the_folder_not_its_path(project: Project) -> None:
    """A project deleted and another cloned in its place is a new folder: trusting the old
    one says nothing of the new one."""
    assert local.is_trusted(project.store)
    moved = project.root.parent / "old-store"
    project.store.rename(moved)
    (project.store).mkdir(mode=0o700)
    for name in ("principals.yaml", "policy.yaml"):
        (project.store / name).write_bytes((moved / name).read_bytes())
    assert local.nearest_store(str(project.root)) == project.store.resolve()
    assert find_store(str(project.root)) is None
    assert not local.is_trusted(project.store)


def test_a_store_folder_that_is_a_link_to_a_trusted_store_is_not_trusted(
    project: Project,
) -> None:
    """A clone that ships ``.cairn -> /home/me/other-project/.cairn`` would have the hooks
    record its prompts into the user's other store: a link is never trusted, nor can it be."""
    project.start_daemon()
    clone = project.root.parent / "clone"
    clone.mkdir()
    (clone / ".cairn").symlink_to(project.store)
    assert local.is_trusted(project.store)
    assert local.nearest_store(str(clone)) == clone / ".cairn"  # the link, not its target
    assert find_store(str(clone)) is None
    body = payload("UserPromptSubmit", cwd=clone, prompt="TOPSECRET in the clone")
    assert project.hook(body).returncode == 0
    assert project.events() == []
    assert "symbolic link" in project.hook_log.read_text()
    with pytest.raises(ValueError, match="symbolic link"):
        local.trust_store(clone / ".cairn")
    with pytest.raises(ValueError, match="symbolic link"):
        local.untrust_store(clone / ".cairn")  # would take trust from the store it leads to
    assert local.is_trusted(project.store)
    # named outright, it is the user's own choice
    assert find_store(str(clone), str(clone / ".cairn")) == project.store.resolve()


@pytest.mark.parametrize("mode", [0o620, 0o602], ids=["group-writable", "world-writable"])
def test_a_trust_file_others_could_write_trusts_nothing(project: Project, mode: int) -> None:
    """A trust file (or its folder) that another user could write would let them trust a
    store of their making: it is believed only when only the user could have written it."""
    trust_file = project.state / "cairn" / "trusted-stores.json"
    assert local.is_trusted(project.store)
    trust_file.chmod(mode)
    assert not local.is_trusted(project.store)
    assert find_store(str(project.root)) is None
    with pytest.raises(local.TrustFileRefused, match="writable by others"):
        local.trust_store(project.store)  # refused, not written over
    body = payload("UserPromptSubmit", cwd=project.root, prompt="a prompt")
    assert project.hook(body).returncode == 0
    assert "trusted stores is not believed" in project.hook_log.read_text()  # and why
    trust_file.chmod(0o600)
    assert local.is_trusted(project.store)
    (project.state / "cairn").chmod(0o777)
    assert not local.is_trusted(project.store)
    (project.state / "cairn").chmod(0o700)


def test_a_trust_file_another_user_owns_trusts_nothing(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert local.is_trusted(project.store)
    someone_else = os.geteuid() + 1
    real_fstat = os.fstat

    def owned_by_someone_else(fd: int) -> os.stat_result:
        info = real_fstat(fd)
        fields = list(info)
        fields[4] = someone_else  # st_uid
        return os.stat_result(fields)

    monkeypatch.setattr(local.os, "fstat", owned_by_someone_else)
    assert not local.is_trusted(project.store)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "too-large"])
def test_a_clones_config_never_hangs_or_floods_the_hook(project: Project, kind: str) -> None:
    """Every ``.cairn`` the walk finds is looked at, a clone's too: a ``config.toml`` that is
    a FIFO (or a link to the hook's own stdout) would hang it on every prompt, one linked to
    ``/dev/zero`` fill its memory. An untrusted store's settings are never read; a trusted
    one's that turned into such a file is no longer trusted, and its settings are refused."""
    config = project.store / "config.toml"
    config.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(config)
    elif kind == "dev-zero":
        config.symlink_to("/dev/zero")
    else:
        config.write_bytes(b"#" * (MAX_SETTINGS_FILE_BYTES + 1))
    assert not within_seconds(10, config, lambda: local.is_trusted(project.store))
    assert within_seconds(10, config, lambda: find_store(str(project.root))) is None
    with pytest.raises(ValueError, match=r"not a regular file|over"):
        within_seconds(10, config, lambda: local.load_capture_settings(project.store))
    with pytest.raises(ValueError, match=r"not a regular file|over"):
        within_seconds(10, config, lambda: local.trust_store(project.store))


def test_hooks_trust_says_when_it_cannot_keep_its_list(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A state folder that is a file (or a lock file that is a link): one line, no traceback."""
    not_a_folder = project.root.parent / "state-file"
    not_a_folder.write_text("")
    monkeypatch.setenv("XDG_STATE_HOME", str(not_a_folder))
    result = CliRunner().invoke(app, ["hooks", "trust", str(project.store)])
    assert result.exit_code == InvalidInput.exit_code, (result.output, result.exception)
    assert "cannot keep the list of trusted stores" in result.stderr
    assert "Traceback" not in result.output
    # with no list there, nothing is trusted, and untrust has nothing to do
    result = CliRunner().invoke(app, ["hooks", "untrust", str(project.store)])
    assert result.exit_code == 0 and "nothing to do" in result.stdout


@pytest.mark.parametrize(
    "cwd",
    ["/a" * 200_000, "/tmp/a\0b", "/proc/self/fd/0/x"],
    ids=["400k-characters", "nul", "not-a-folder"],
)
def test_an_impossible_cwd_finds_no_store_quickly(cwd: str) -> None:
    # the long one walked 200,000 parents and was killed by the kernel for memory
    started = time.perf_counter()
    assert find_store(cwd) is None
    assert time.perf_counter() - started < 1.0


def test_an_unreadable_folder_on_the_way_up_is_no_store(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = project.root / "locked" / "inner"
    deep.mkdir(parents=True)
    real_stat = Path.stat

    def stat(self: Path, **kw: Any) -> os.stat_result:
        if "locked" in self.parts:
            raise PermissionError(13, "Permission denied", str(self))
        return real_stat(self, **kw)

    monkeypatch.setattr(Path, "stat", stat)
    assert find_store(str(deep)) == project.store.resolve()


# ---- what a payload may carry ------------------------------------------------------------


def _events(agent: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    return hook.build_events(adapter_for(agent), body, CaptureSettings(), "code/x")


def test_nul_surrogates_and_nan_are_stored_not_refused(tmp_path: Path) -> None:
    """A binary file's bytes in a tool's output (NUL), a path that is not UTF-8 (a lone
    surrogate), a NaN: the kernel refuses each, so the event went to the rejected file or
    was lost with a UnicodeEncodeError; now they are replaced and the event goes in."""
    body = payload(
        "PostToolUse",
        session="s\ud800",
        tool_name="Bash",
        tool_use_id="t1",
        tool_response="ELF\x00\x01 bad \udcff path",
        duration_ms=float("nan"),
    )
    [event] = _events("claude", body)
    wire = json.dumps(event, ensure_ascii=False, allow_nan=False).encode("utf-8")
    assert b"\\u0000" not in wire
    assert event["metadata"]["duration_ms"] is None
    assert "\x00" not in event["text"] and "\ufffd" in event["text"]
    assert Spool(tmp_path / "spool.jsonl").append([event])


def test_a_time_past_the_calendars_end_is_replaced_by_now() -> None:
    body = {
        "session_id": "s",
        "hook_event_name": "BeforeAgent",
        "timestamp": "0001-01-01T00:00:00+05:00",  # OverflowError in UTC: the event was lost
        "prompt": "hi",
    }
    [event] = _events("gemini", body)
    assert datetime.fromisoformat(event["ts"]).year == datetime.now(UTC).year


def test_cursor_still_lets_the_prompt_through_when_the_hook_fails(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cursor's beforeSubmitPrompt waits for {"continue": true}; a failing hook answered
    {} (the reply for no payload), which may hold the user's prompt back."""
    (project.store / "config.toml").write_text("[capture]\nnot_a_setting = 1\n")
    local.trust_store(project.store)  # the user's own edit, trusted again
    body = {
        "conversation_id": "c1",
        "hook_event_name": "beforeSubmitPrompt",
        "workspace_roots": [str(project.root)],
        "prompt": "hello",
    }
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(body).encode())))
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    assert hook.main(["--agent", "cursor"]) == 0
    assert json.loads(out.getvalue()) == {"continue": True}
    problems = [json.loads(line)["problem"] for line in project.hook_log.read_text().splitlines()]
    assert problems == ["hook failed"]


# ---- the spool --------------------------------------------------------------------------


def _event(i: int, ts: str) -> dict[str, Any]:
    return {"event_id": f"hk_{i}", "ts": ts, "scope": "code/x", "text": str(i)}


def test_a_spooled_time_without_a_zone_does_not_stop_every_replay(tmp_path: Path) -> None:
    """Sorting a naive time among aware ones raised TypeError after the spool was claimed:
    every replay (and the daemon's start) failed on it again, for good."""
    spool = Spool(tmp_path / "spool.jsonl")
    spool.append([_event(1, "2026-01-01T10:00:00+00:00")])
    spool.append([_event(2, "2026-01-01T09:00:00")])
    spool.append([_event(3, "2026-01-01T11:00:00+00:00")])
    sent: list[str] = []
    report = spool.replay(storing(sent))
    assert sent == ["hk_1", "hk_3"]
    assert (report.stored, report.rejected, report.kept) == (2, 1, 0)
    assert "hk_2" in spool.rejected_path.read_text()


# ---- hooks install ----------------------------------------------------------------------

EXE = "/opt/tools/venv/bin/cairn"


def _scope(project: Path) -> Scope:
    return Scope(project=project, home=project.parent / "home", env={})


def test_a_settings_link_out_of_the_project_is_refused(tmp_path: Path) -> None:
    """A cloned repository whose ``.claude/settings.json`` links to the user's own settings:
    install read them and wrote them, tokens and all, into the project's file."""
    users = tmp_path / "home" / ".claude" / "settings.json"
    users.parent.mkdir(parents=True)
    users.write_text('{"env": {"ANTHROPIC_API_KEY": "sk-ant-not-for-the-repo"}}')
    project = tmp_path / "repo"
    (project / ".claude").mkdir(parents=True)
    (project / ".claude" / "settings.json").symlink_to(users)
    with pytest.raises(InvalidInput, match="outside the project"):
        plan_install("claude", _scope(project), EXE)
    with pytest.raises(InvalidInput, match="outside the project"):
        plan_uninstall("claude", _scope(project), tmp_path / "state")
    # a linked folder is the same thing
    other = tmp_path / "repo2"
    other.mkdir()
    (other / ".claude").symlink_to(users.parent)
    with pytest.raises(InvalidInput, match="outside the project"):
        plan_install("claude", _scope(other), EXE)


def test_a_link_planted_at_the_temporary_name_is_not_written_through(tmp_path: Path) -> None:
    project = tmp_path / "repo"
    (project / ".claude").mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    for name in (".settings.json.cairn-tmp", f".settings.json.{os.getpid()}.cairn-tmp"):
        (project / ".claude" / name).symlink_to(victim)
    apply(plan_install("claude", _scope(project), EXE), tmp_path / "state")
    assert victim.read_text() == "precious\n"
    assert json.loads((project / ".claude" / "settings.json").read_text())["hooks"]


def test_a_private_settings_file_stays_private_and_so_do_the_records(tmp_path: Path) -> None:
    project = tmp_path / "repo"
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text('{"env": {"TOKEN": "x"}}')
    settings.chmod(0o600)
    state = tmp_path / "state"
    apply(plan_install("claude", _scope(project), EXE), state)
    assert settings.stat().st_mode & 0o777 == 0o600
    assert state.stat().st_mode & 0o777 == 0o700
    assert all(record.stat().st_mode & 0o777 == 0o600 for record in state.iterdir())


def test_user_settings_kept_in_a_dotfiles_repository_stay_a_link(tmp_path: Path) -> None:
    home = tmp_path / "home"
    dotfiles = tmp_path / "dotfiles" / "claude-settings.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text('{"model": "opus"}\n')
    (home / ".claude").mkdir(parents=True)
    link = home / ".claude" / "settings.json"
    link.symlink_to(dotfiles)
    scope = Scope(project=None, home=home, env={})
    apply(plan_install("claude", scope, EXE), tmp_path / "state")
    assert link.is_symlink()
    assert "hooks" in json.loads(dotfiles.read_text())
    apply(plan_uninstall("claude", scope, tmp_path / "state"), tmp_path / "state")
    assert link.is_symlink()
    assert dotfiles.read_text() == '{"model": "opus"}\n'


def test_a_second_replay_never_takes_the_file_from_a_running_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hook's replay while the daemon's (or another hook's) runs: the second took the
    first's claimed file by its name, and the first died on the file gone."""
    spool = Spool(tmp_path / "spool" / "x.jsonl")
    for i in range(3):
        spool.append([_event(i, f"2026-01-01T10:00:0{i}+00:00")])
    got: list[str] = []
    inner: list[Any] = []

    def other_process_replays() -> None:
        with monkeypatch.context() as m:
            m.setattr(os, "getpid", lambda: 999_999)
            inner.append(Spool(spool.path).replay(send, wait=False))

    def send(events: list[dict[str, Any]]) -> tuple[Outcome, str]:
        if not inner:
            other_process_replays()
        got.extend(e["event_id"] for e in events)
        return Outcome.STORED, ""

    report = spool.replay(send)
    assert report.stored == 3
    assert inner[0].stored == 0  # it found a replay running and left the work to it
    assert sorted(got) == ["hk_0", "hk_1", "hk_2"]
    assert not spool.pending()


def test_a_hook_replay_of_a_big_spool_stays_quick(tmp_path: Path) -> None:
    path = tmp_path / "spool" / "x.jsonl"
    path.parent.mkdir()
    line = json.dumps(
        {"v": 1, "events": [_event(0, "2026-01-01T10:00:00+00:00") | {"text": "x" * 4000}]}
    )
    with path.open("w") as handle:
        for i in range(10_000):
            handle.write(line.replace('"hk_0"', f'"hk_{i}"') + "\n")
    started = time.perf_counter()
    report = Spool(path).replay(lambda events: (Outcome.STORED, ""), max_events=200, wait=False)
    assert time.perf_counter() - started < 0.1
    assert report.stored == 0  # left whole for the daemon, which replays it all
    assert Spool(path).waiting_bytes() == path.stat().st_size
    # the daemon's unbounded replay drains it
    sent: list[str] = []
    drained = Spool(path).replay(
        lambda events: (sent.extend(e["event_id"] for e in events), (Outcome.STORED, ""))[1]
    )
    assert drained.stored == 10_000 and len(set(sent)) == 10_000
    assert not Spool(path).pending()


def test_a_replay_that_fails_does_not_keep_the_daemon_from_starting(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any error out of the start-up replay ended the lifespan: no daemon, so every hook
    spooled, and the next start failed on the same spool again."""
    from starlette.testclient import TestClient

    from cairn.doors import capture_socket
    from cairn.doors.server import build_server_app

    def broken(*_: object) -> None:
        raise RuntimeError("database is locked")

    monkeypatch.setattr(capture_socket, "replay_spool", broken)
    app = build_server_app(Workspace(project.store), embedder="static", capture_socket=True)
    with TestClient(app.state.capture_socket_app) as socket_client, TestClient(app) as client:
        assert client.get("/health").status_code == 200
        assert socket_client.get("/health").status_code == 200


def test_a_config_changed_since_it_was_trusted_is_no_longer_trusted(project: Project) -> None:
    """A `git pull` that brings someone else's config.toml (an embedder of theirs) into a
    trusted store: the folder is the same, the settings are not."""
    assert find_store(str(project.root)) == project.store.resolve()
    (project.store / "config.toml").write_text('embedder = "openai:http://127.0.0.1:9/v1#m"\n')
    assert find_store(str(project.root)) is None
    local.trust_store(project.store)  # read, and trusted again
    assert find_store(str(project.root)) == project.store.resolve()
