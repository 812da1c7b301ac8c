"""A project folder with a cairn store, its own state folder, and ways to call the hook the
way an agent does (a ``cairn hook`` process fed one payload on stdin)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cairn.capture import daemon
from cairn.capture.local import spool_path, trust_store
from cairn.capture.spool import Outcome
from cairn.memory import Memory
from cairn.model import Event, Principal
from cairn.workspace import Workspace
from tests.factories import CURATOR

__all__ = ["Project", "payload"]


def payload(
    event: str, session: str = "s1", cwd: Path | None = None, **fields: Any
) -> dict[str, Any]:
    """A Claude Code hook payload: the common envelope and the event's own fields."""
    return {
        "session_id": session,
        "transcript_path": str((cwd or Path("/nowhere")) / "transcript.jsonl"),
        "cwd": str(cwd) if cwd else "/nowhere",
        "hook_event_name": event,
        "permission_mode": "default",
        **fields,
    }


@dataclass
class Project:
    root: Path
    state: Path

    @property
    def store(self) -> Path:
        return self.root / ".cairn"

    @property
    def spool(self) -> Path:
        return spool_path(self.store)

    @property
    def hook_log(self) -> Path:
        return self.state / "cairn" / "hook.log"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["XDG_STATE_HOME"] = str(self.state)
        env.pop("CAIRN_STORE", None)
        return env

    def hook(self, body: dict[str, Any] | bytes, *args: str) -> subprocess.CompletedProcess[str]:
        """One ``cairn hook`` process, started from a folder outside the project (the store
        must be found from the payload's cwd, not from where the hook runs)."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        done = subprocess.run(
            [sys.executable, "-m", "cairn", "hook", *args],
            input=data,
            capture_output=True,
            cwd=self.state,
            env=self.env(),
            timeout=60,
            check=False,
        )
        return subprocess.CompletedProcess(
            done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
        )

    def start_daemon(self) -> daemon.DaemonStatus:
        return daemon.start(self.store, embedder="static")

    def stop_daemon(self) -> daemon.DaemonStatus:
        return daemon.stop(self.store)

    def memory(self) -> Memory:
        return Workspace(self.store).open_memory(embedder="static")

    def events(self, reader: Principal = CURATOR) -> list[Event]:
        """Every stored event the reader may see, in source-time order."""
        memory = self.memory()
        try:
            return memory.events(principal=reader, limit=10_000)
        finally:
            memory.close()


def make_project(root: Path, state: Path) -> Iterator[Project]:
    Workspace(root / ".cairn").init()
    trust_store(root / ".cairn")  # as `cairn init` does for the store it makes
    project = Project(root=root, state=state)
    yield project
    if daemon.status(project.store).running:
        project.stop_daemon()


def storing(sent: list[str]) -> Callable[[list[dict[str, Any]]], tuple[Outcome, str]]:
    """A replay's sender that stores everything, noting the event ids it was sent."""

    def send(events: list[dict[str, Any]]) -> tuple[Outcome, str]:
        sent.extend(e["event_id"] for e in events)
        return Outcome.STORED, ""

    return send
