"""``cairn daemon``: starts, answers, stops cleanly; its socket is the owner's alone."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from cairn.capture import daemon, local
from cairn.capture.client import DaemonClient
from cairn.capture.local import socket_path
from tests.capture.project import Project, payload


def _cli(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # the real command, as a user types it
        [sys.executable, "-m", "cairn", *args, "--store", str(project.store)],
        capture_output=True,
        text=True,
        env=project.env(),
        timeout=180,
        check=False,
    )


def test_start_status_stop_through_the_cli(project: Project) -> None:
    started = _cli(project, "daemon", "start", "--embedder", "static", "--json")
    assert started.returncode == 0, started.stderr
    state = json.loads(started.stdout)
    assert state["running"] is True
    pid = state["pid"]
    assert DaemonClient(socket_path(project.store)).health()["pid"] == pid
    # a second start finds it running and starts nothing new
    again = json.loads(_cli(project, "daemon", "start", "--json").stdout)
    assert again["pid"] == pid
    assert json.loads(_cli(project, "daemon", "status", "--json").stdout)["running"] is True
    stopped = _cli(project, "daemon", "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert f"stopped (pid {pid})" in stopped.stdout
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert not socket_path(project.store).exists()
    assert json.loads(_cli(project, "daemon", "status", "--json").stdout)["running"] is False


def test_a_stop_loses_nothing_that_was_acknowledged(project: Project) -> None:
    project.start_daemon()
    for i in range(20):
        body = payload("UserPromptSubmit", cwd=project.root, prompt=f"prompt {i}")
        assert project.hook(body).returncode == 0
    project.stop_daemon()
    assert len(project.events()) == 20
    assert not project.spool.exists() or project.spool.stat().st_size == 0


def test_the_socket_is_owner_only_and_in_the_store_folder(project: Project) -> None:
    project.start_daemon()
    path = socket_path(project.store)
    assert path.parent == project.store.resolve()
    assert path.stat().st_mode & 0o777 == 0o600
    assert project.store.stat().st_mode & 0o777 == 0o700


def _deep_project(project: Project, state: Path) -> Project:
    """The same project moved below folders long enough that its store's socket path no
    longer fits a Unix socket address."""
    deep = project.root.parent / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    project.root.rename(deep / "proj")
    state.mkdir(parents=True, exist_ok=True)
    return Project(root=deep / "proj", state=state)


def test_a_deep_project_s_socket_moves_to_the_state_folder(project: Project) -> None:
    moved = _deep_project(project, project.state)
    moved.start_daemon()
    try:
        path = socket_path(moved.store)
        assert len(os.fsencode(moved.store / "capture.sock")) > 100
        assert path.parent == moved.state / "cairn" / "run"
        assert path.stat().st_mode & 0o777 == 0o600
        assert DaemonClient(path).health()["pid"] == daemon.status(moved.store).pid
    finally:
        moved.stop_daemon()


def test_a_socket_path_too_long_everywhere_names_the_setting_that_shortens_it(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = project.root.parent / ("s" * 60) / ("t" * 60)
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    moved = _deep_project(project, state)
    with pytest.raises(daemon.DaemonError, match="XDG_STATE_HOME to a shorter folder"):
        moved.start_daemon()
    assert not daemon.status(moved.store).running


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_over_tcp_the_daemon_still_wants_a_key(project: Project) -> None:
    port = _free_port()
    daemon.start(project.store, port=port, embedder="static")
    event = {
        "event_id": "e1",
        "ts": "2026-11-25T10:00:00+00:00",
        "session_id": "s",
        "scope": "code/proj",
        "role": "user",
        "kind": "user_message",
        "text": "hi",
    }
    refused = httpx.post(f"http://127.0.0.1:{port}/v1/timeline/events", json={"events": [event]})
    assert refused.status_code == 401
    # the same request on the socket is the owner's, and goes in
    assert DaemonClient(socket_path(project.store)).append([event])[0].value == "stored"


def test_the_socket_refuses_to_act_as_a_curator(project: Project) -> None:
    (project.store / "config.toml").write_text('[capture]\nprincipal = "curator"\n')
    local.trust_store(project.store)  # the user's own edit, trusted again
    project.start_daemon()
    assert project.hook(payload("UserPromptSubmit", cwd=project.root, prompt="x")).returncode == 0
    assert project.events() == []
    log = [json.loads(line) for line in project.hook_log.read_text().splitlines()]
    assert log[-1]["problem"] == "the daemon refused the events"
    assert "curator or admin" in log[-1]["reason"]
    # and the events wait in the spool for the setting to be fixed
    assert "x" in project.spool.read_text()


def test_a_start_that_fails_says_why(project: Project, tmp_path: Path) -> None:
    (project.store / "config.toml").write_text("[capture]\nnonsense = 1\n")
    local.trust_store(project.store)  # the user's own edit, trusted again
    with pytest.raises(daemon.DaemonError, match="nonsense"):
        project.start_daemon()
