"""Authentication and authority on every door.

Every route, tool and RPC refuses a missing or wrong key before anything runs; an agent key
reaches no curator action on any door; the opt-in anonymous A2A mode stays confined to A2A.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from cairn.doors.mcp_server import MCP_TOOLS
from cairn.workspace import Workspace
from tests.doors.conftest import Live, free_port, running, start_server, stop_server
from tests.doors.test_mcp import STDIO

BAD_KEYS = [None, "cairn_wrong", "Basic"]
A2A_METHODS = (
    "message/send",
    "message/stream",
    "tasks/get",
    "tasks/cancel",
    "tasks/resubscribe",
    "tasks/pushNotificationConfig/set",
    "tasks/pushNotificationConfig/get",
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
)
# Curator actions over HTTP: (method, path, body). {rec} and {prp} are filled in.
CURATOR_ROUTES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("POST", "/v1/proposals/{prp}/decision", {"approve": True}),
    ("POST", "/v1/records/{rec}/archive", {}),
    ("POST", "/v1/records/{rec}/restore", {}),
    ("POST", "/v1/records/{rec}/transition", {"to": "archived"}),
    ("POST", "/v1/publish", {"scope": "acme/auth"}),
    ("GET", "/v1/audit", None),
    ("POST", "/v1/refresh", None),
    ("POST", "/v1/vacuum", None),
]


def _header(key: str | None) -> dict[str, str]:
    if key is None:
        return {}
    return {"Authorization": key if key == "Basic" else f"Bearer {key}"}


@pytest.mark.parametrize("key", BAD_KEYS)
def test_every_mcp_tool_refuses_a_missing_or_wrong_key(live: Live, key: str | None) -> None:
    headers = {**_header(key), "accept": "application/json, text/event-stream"}
    for number, tool in enumerate(MCP_TOOLS):
        body = {"jsonrpc": "2.0", "id": number, "method": "tools/call", "params": {"name": tool}}
        response = httpx.post(f"{live.url}/mcp", json=body, headers=headers, timeout=10)
        assert response.status_code == 401, (tool, response.text)
        assert response.headers["www-authenticate"].startswith("Bearer")


def test_stdio_mcp_refuses_a_wrong_key(live: Live) -> None:
    done = subprocess.run(
        [sys.executable, "-c", STDIO, str(live.store), "mcp"],
        env={**os.environ, "CAIRN_API_KEY": "cairn_wrong"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "unauthenticated" in done.stderr and done.stdout == ""


@pytest.mark.parametrize("key", BAD_KEYS)
def test_every_a2a_method_refuses_a_missing_or_wrong_key(live: Live, key: str | None) -> None:
    for number, method in enumerate(A2A_METHODS):
        body = {"jsonrpc": "2.0", "id": number, "method": method, "params": {"id": "t"}}
        response = httpx.post(f"{live.url}/", json=body, headers=_header(key), timeout=10)
        assert response.status_code == 401, (method, response.text)
        assert response.json()["code"] == "unauthenticated"
        assert response.headers["www-authenticate"].startswith("Bearer")


def test_agent_key_reaches_no_curator_action_over_http(live: Live) -> None:
    agent = httpx.Client(base_url=live.url, headers=_header(live.agent), timeout=10)
    curator = httpx.Client(base_url=live.url, headers=_header(live.curator), timeout=10)
    with agent, curator:
        made = curator.post(
            "/v1/records",
            json={"content": {"kind": "fact", "scope": "acme/auth", "title": "Auth fact"}},
        ).json()
        queued = agent.post(
            "/v1/records",
            json={"content": {"kind": "belief", "scope": "acme/auth", "title": "Auth belief"}},
        ).json()
        assert queued["decision"] == "queue"
        fill = {"rec": made["record"]["id"], "prp": queued["proposal"]["id"]}
        for method, path, body in CURATOR_ROUTES:
            response = agent.request(method, path.format(**fill), json=body)
            assert response.status_code == 403, (method, path, response.text)
            assert response.json()["code"] == "permission_denied"
        # Nothing changed: the record is active and the proposal still pending.
        assert curator.get(f"/v1/records/{fill['rec']}").json()["record"]["status"] == "active"
        assert curator.get(f"/v1/proposals/{fill['prp']}").json()["status"] == "pending"


def test_agent_writes_over_a2a_go_through_the_gate(live: Live) -> None:
    message = {
        "kind": "message",
        "messageId": "auth-belief",
        "role": "user",
        "parts": [
            {"kind": "data", "data": {"skill": "remember", "type": "belief", "content": "A2A b"}}
        ],
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}
    task = httpx.post(f"{live.url}/", json=body, headers=_header(live.agent), timeout=30).json()
    data = task["result"]["artifacts"][0]["parts"][0]["data"]
    assert data["status"] == "pending"  # an agent's belief waits for a curator


@pytest.fixture(scope="module")
def anonymous(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    with running(tmp_path_factory, "anon", a2a_anonymous="agent") as server:
        yield server


def test_anonymous_a2a_is_opt_in_and_confined(anonymous: Live) -> None:
    url = anonymous.url
    card = httpx.get(f"{url}/.well-known/agent-card.json").json()
    assert "securitySchemes" not in card  # honest: this agent answers without a key
    send = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/send",
        "params": {
            "message": {
                "kind": "message",
                "messageId": "anon-1",
                "role": "user",
                "parts": [{"kind": "text", "text": "recall: anything"}],
            }
        },
    }
    answered = httpx.post(f"{url}/", json=send, timeout=30)
    assert answered.json()["result"]["status"]["state"] == "completed"
    # a wrong key is still refused, and the other doors still need a key
    assert httpx.post(f"{url}/", json=send, headers=_header("cairn_wrong")).status_code == 401
    assert httpx.get(f"{url}/v1/records").status_code == 401
    mcp = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"accept": "application/json, text/event-stream"}
    assert httpx.post(f"{url}/mcp", json=mcp, headers=accept).status_code == 401


def test_anonymous_a2a_refuses_a_curator_principal(tmp_path: Any) -> None:
    store = tmp_path / ".cairn"
    Workspace(store).init()
    process = start_server(store, free_port(), a2a_anonymous="curator")
    try:
        assert process.wait(timeout=60) != 0
    finally:
        stop_server(process)
    assert "curator or admin" in (tmp_path / "server.log").read_text()
