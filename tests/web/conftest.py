"""A console in process (FastAPI's TestClient) over a fresh store with a curator and an
agent key, and helpers to sign in and to read a form's tokens."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from cairn.doors.http import create_app
from cairn.workspace import Workspace


@dataclass
class Console:
    workspace: Workspace
    curator_key: str
    agent_key: str
    app_client: TestClient

    def client(self, *, https: bool = False) -> TestClient:
        """A fresh browser: its own cookie jar."""
        base = "https://testserver" if https else "http://testserver"
        return TestClient(self.app_client.app, base_url=base, follow_redirects=False)

    def propose(self, title: str, *, kind: str = "belief", scope: str = "acme/app") -> str:
        """A pending proposal by the agent, through the HTTP API."""
        answer = self.app_client.post(
            "/v1/records",
            json={"content": {"kind": kind, "scope": scope, "title": title, "body": title}},
            headers={"Authorization": f"Bearer {self.agent_key}"},
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["decision"] == "queue"
        proposal_id: str = answer.json()["proposal"]["id"]
        return proposal_id

    def proposal_status(self, proposal_id: str) -> str:
        answer = self.app_client.get(
            f"/v1/proposals/{proposal_id}",
            headers={"Authorization": f"Bearer {self.curator_key}"},
        )
        status: str = answer.json()["status"]
        return status


@pytest.fixture
def console(tmp_path: Path) -> Iterator[Console]:
    workspace = Workspace(tmp_path / ".cairn")
    keys = workspace.init().keys
    app = create_app(workspace, embedder="static")
    with TestClient(app, follow_redirects=False) as client:
        yield Console(workspace, keys["curator"], keys["agent"], client)


def hidden(html: str, name: str) -> str:
    found = re.search(rf'name="{name}" value="([^"]+)"', html)
    assert found, f"no hidden {name} field in the page"
    return found.group(1)


def sign_in(client: TestClient, key: str) -> str:
    """Sign ``client`` in with ``key``; returns the session's CSRF token."""
    form = client.get("/ui/signin")
    assert form.status_code == 200
    answer = client.post(
        "/ui/signin", data={"key": key, "signin_token": hidden(form.text, "signin_token")}
    )
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == "/ui/queue"
    return hidden(client.get("/ui/queue").text, "csrf")
