"""The A2A door over JSON-RPC 0.3 with httpx (the a2a-sdk client test is still to come)."""

from __future__ import annotations

from typing import Any

import httpx

from tests.doors.conftest import Live


def _rpc(live: Live, method: str, params: dict[str, Any], key: str | None) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": "t1", "method": method, "params": params}
    return httpx.post(f"{live.url}/", json=body, headers=live.headers(key), timeout=30)


def _message(text: str, **extra: Any) -> dict[str, Any]:
    return {
        "message": {
            "kind": "message",
            "messageId": f"m-{text[:12]}",
            "role": "user",
            "parts": [{"kind": "text", "text": text}],
            **extra,
        }
    }


def test_card_declares_skills_and_bearer(live: Live) -> None:
    card = httpx.get(f"{live.url}/.well-known/agent-card.json").json()
    assert {s["id"] for s in card["skills"]} == {"research", "remember", "recall"}
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "bearer"


def test_refuses_missing_or_wrong_key(live: Live) -> None:
    for key in (None, "cairn_wrong"):
        response = _rpc(live, "tasks/get", {"id": "x"}, key)
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer")


def test_lifecycle_and_error_codes(live: Live) -> None:
    done = _rpc(live, "message/send", _message("remember: we release on Tuesdays"), live.agent)
    task = done.json()["result"]
    assert task["status"]["state"] == "completed"
    assert task["artifacts"][0]["parts"][0]["kind"] == "data"
    kinds = [p["kind"] for p in task["status"]["message"]["parts"]]
    assert kinds == ["text", "data"]

    unclear = _rpc(live, "message/send", _message("Hello"), live.agent).json()["result"]
    assert unclear["status"]["state"] == "input-required"
    got = _rpc(live, "tasks/get", {"id": unclear["id"], "historyLength": 1}, live.agent).json()
    assert got["result"]["id"] == unclear["id"]
    canceled = _rpc(live, "tasks/cancel", {"id": unclear["id"]}, live.agent).json()
    assert canceled["result"]["status"]["state"] == "canceled"
    again = _rpc(live, "tasks/cancel", {"id": task["id"]}, live.agent).json()
    assert again["error"]["code"] == -32002

    assert _rpc(live, "tasks/get", {"id": "nope"}, live.agent).json()["error"]["code"] == -32001
    bad = _rpc(live, "message/send", {"message": {"kind": "message"}}, live.agent).json()
    assert bad["error"]["code"] == -32602
    assert _rpc(live, "nope/nope", {}, live.agent).json()["error"]["code"] == -32601
    raw = httpx.post(f"{live.url}/", content=b"{", headers=live.headers(live.agent))
    assert raw.json()["error"]["code"] == -32700
    other = httpx.post(f"{live.url}/", json={"id": 1}, headers=live.headers(live.agent))
    assert other.json()["error"]["code"] == -32600


def test_tasks_belong_to_their_principal(live: Live) -> None:
    mine = _rpc(live, "message/send", _message("Hello again"), live.agent).json()["result"]
    theirs = _rpc(live, "tasks/get", {"id": mine["id"]}, live.curator).json()
    assert theirs["error"]["code"] == -32001
