"""The graph over HTTP against a live ``cairn serve``: link, read, walk and unlink, with
the same governance and trimming as records."""

from __future__ import annotations

import httpx

from tests.doors.conftest import Live


def _client(live: Live, key: str) -> httpx.Client:
    return httpx.Client(base_url=live.url, headers=live.headers(key), timeout=10)


def _record(client: httpx.Client, title: str, **acl: object) -> str:
    content: dict[str, object] = {"kind": "decision", "scope": "acme/app", "title": title}
    if acl:
        content["acl"] = acl
    response = client.post("/v1/records", json={"content": content})
    assert response.status_code == 200, response.text
    record_id: str = response.json()["record"]["id"]
    return record_id


def test_link_walk_and_unlink_over_http(live: Live) -> None:
    with _client(live, live.curator) as curator, _client(live, live.agent) as agent:
        a = _record(curator, "Graph: adopt queues")
        b = _record(curator, "Graph: retire cron")
        hidden = _record(curator, "Graph: board view", roles=["director"])

        # an agent's link queues for review; the curator's commits
        queued = agent.post("/v1/edges", json={"edge": {"type": "DEPENDS_ON", "src": a, "dst": b}})
        assert queued.status_code == 200, queued.text
        assert queued.json()["decision"] == "queue"
        made = curator.post(
            "/v1/edges", json={"edge": {"type": "CAUSAL_PRECEDES", "src": a, "dst": b}}
        )
        assert made.status_code == 200, made.text
        edge_id = made.json()["edge"]["id"]
        curator.post(
            "/v1/edges", json={"edge": {"type": "CAUSAL_PRECEDES", "src": b, "dst": hidden}}
        ).raise_for_status()

        assert agent.get(f"/v1/edges/{edge_id}").json()["src"] == a
        listed = agent.get(f"/v1/records/{b}/edges").json()
        assert [e["id"] for e in listed] == [edge_id]  # the edge to the hidden record is not named

        walk = agent.post("/v1/graph/neighbours", json={"anchors": [a], "hops": 3}).json()
        assert [n["record_id"] for n in walk["nodes"]] == [a, b]
        assert walk["withheld"] == {"vertices": 1}
        assert hidden not in str(walk)

        unknown = agent.post(
            "/v1/edges", json={"edge": {"type": "NOT_A_RELATION", "src": a, "dst": b}}
        )
        assert (unknown.status_code, unknown.json()["code"]) == (422, "invalid_input")
        hidden_end = agent.post(
            "/v1/edges", json={"edge": {"type": "DEPENDS_ON", "src": a, "dst": hidden}}
        )
        assert hidden_end.status_code == 404
        assert (
            agent.post("/v1/graph/neighbours", json={"anchors": [a], "hops": 9}).status_code == 422
        )

        removed = curator.post(f"/v1/edges/{edge_id}/unlink", json={"reason": "wrong"})
        assert removed.status_code == 200, removed.text
        assert removed.json()["edge"]["status"] == "removed"
        after = agent.post("/v1/graph/neighbours", json={"anchors": [a], "hops": 3}).json()
        assert [n["record_id"] for n in after["nodes"]] == [a]
