"""The HTTP door driven with httpx against a live ``cairn serve``."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.doors.conftest import Live, wait_embedded

FACT = {"kind": "fact", "scope": "acme/app", "title": "Tests run with make test"}


def _client(live: Live, key: str | None) -> httpx.Client:
    return httpx.Client(base_url=live.url, headers=live.headers(key), timeout=10)


def _operations(live: Live) -> list[tuple[str, str]]:
    spec: dict[str, Any] = httpx.get(f"{live.url}/openapi.json").json()
    return [
        (method.upper(), path)
        for path, item in spec["paths"].items()
        if path.startswith("/v1")
        for method in item
    ]


def test_health_says_only_that_the_server_is_up(live: Live) -> None:
    response = httpx.get(f"{live.url}/health")
    assert response.status_code == 200
    # no key needed, so nothing about the store: no counts, no path, no principals
    assert response.json() == {"status": "ok", "ready": True}


@pytest.mark.parametrize("key", [None, "cairn_wrong"])
def test_every_route_refuses_a_missing_or_wrong_key(live: Live, key: str | None) -> None:
    ops = _operations(live)
    assert len(ops) >= 25
    with _client(live, key) as client:
        for method, path in ops:
            concrete = path.replace("{record_id}", "rec_x").replace("{proposal_id}", "prp_x")
            concrete = concrete.replace("{number}", "1").replace("{edge_id}", "edg_x")
            response = client.request(method, concrete, json={})
            assert response.status_code == 401, (method, path, response.text)
            assert response.json()["code"] == "unauthenticated"
            assert response.headers["www-authenticate"].startswith("Bearer")


def test_agent_proposes_and_cannot_curate(live: Live) -> None:
    with _client(live, live.agent) as agent, _client(live, live.curator) as curator:
        queued = agent.post(
            "/v1/records", json={"content": {**FACT, "kind": "belief", "title": "Beliefs queue"}}
        )
        assert queued.status_code == 200, queued.text
        outcome = queued.json()
        assert outcome["decision"] == "queue"
        proposal_id = outcome["proposal"]["id"]

        refused = agent.post(f"/v1/proposals/{proposal_id}/decision", json={"approve": True})
        assert refused.status_code == 403
        assert refused.json()["code"] == "permission_denied"
        assert agent.post("/v1/publish", json={"scope": "acme/app"}).status_code == 403
        assert agent.get("/v1/audit").status_code == 403
        assert agent.post("/v1/vacuum").status_code == 403

        accepted = curator.post(f"/v1/proposals/{proposal_id}/decision", json={"approve": True})
        assert accepted.status_code == 200, accepted.text
        record_id = accepted.json()["record"]["id"]
        assert agent.post(f"/v1/records/{record_id}/archive", json={}).status_code == 403
        view = agent.get(f"/v1/records/{record_id}").json()
        assert view["record"]["status"] == "active"
        assert agent.get(f"/v1/records/{record_id}/versions").json()[0]["number"] == 1


def test_errors_are_json_with_stable_codes(live: Live) -> None:
    with _client(live, live.agent) as client:
        missing = client.get("/v1/records/rec_nope")
        assert (missing.status_code, missing.json()["code"]) == (404, "not_found")
        bad = client.post(
            "/v1/records", content=b"{not json", headers={"content-type": "application/json"}
        )
        assert (bad.status_code, bad.json()["code"]) == (400, "malformed_json")
        invalid = client.post("/v1/records", json={"content": {**FACT, "title": " "}})
        assert (invalid.status_code, invalid.json()["code"]) == (422, "invalid_input")
        for outside in ("/etc/passwd", "../secrets.md", "docs/../../x.md"):
            refused = client.post("/v1/ingest", json={"paths": [outside], "scope": "acme/app"})
            assert (refused.status_code, refused.json()["code"]) == (422, "invalid_input")
        twice = client.get("/v1/records?limit=1&limit=2")
        assert (twice.status_code, twice.json()["code"]) == (422, "invalid_input")
        # an offset past what the database's integers hold is bad input, not a server error
        for listing in ("/v1/records", "/v1/proposals"):
            huge = client.get(f"{listing}?offset={2**63}")
            assert (huge.status_code, huge.json()["code"]) == (422, "invalid_input"), listing
            assert "offset" in huge.text
        wrong = client.put("/v1/records")
        assert wrong.status_code == 405
        assert set(wrong.headers["allow"].split(", ")) >= {"GET", "POST"}


def test_retrieval_routes_answer_from_the_kernel(live: Live) -> None:
    with _client(live, live.agent) as client:
        made = client.post(
            "/v1/records",
            json={"content": {**FACT, "kind": "episode", "title": "Deployed the okapi build"}},
        ).json()
        record_id = made["record"]["id"]
        version_id = made["version"]["id"]
        found = client.post("/v1/search", json={"query": "okapi", "mode": "keyword"}).json()
        assert [h["record_id"] for h in found["hits"]] == [record_id]  # at once, no vectors
        wait_embedded(live)
        got = client.post("/v1/retrieve", json={"query": "okapi build", "top_k": 5})
        assert got.status_code == 200, got.text
        result = got.json()
        # the store is shared with other tests: vector recall may add their records below
        item = result["items"][0]
        assert item["record_id"] == record_id
        # a record without a body is one chunk, its title, cited whole to the version made
        assert [(c["record_id"], c["version_id"], c["chunk_key"]) for c in item["citations"]] == [
            (record_id, version_id, "title")
        ]
        assert "keyword_match" in item["why_included"]
        assert (result["token_budget_exceeded"], result["excluded_count"]) == (False, 0)
        assert "recall.keyword" in result["trace"]["timings_ms"]
        context = client.post(
            "/v1/read_context",
            json={"scope": "acme/app", "query": "okapi", "selector": {"kind": "head"}},
        ).json()
        assert context["items"][0]["record_id"] == record_id
        report = client.post("/v1/validate", json={"ids": [record_id, "rec_nope"]}).json()
        assert [(c["record_id"], c["valid"], c["problems"]) for c in report["records"]] == [
            (record_id, True, []),
            ("rec_nope", False, ["not_found"]),
        ]
        claims = client.post("/v1/validate_claims", json={"text": "We deployed okapi."}).json()
        (claim,) = claims["claims"]
        assert (claim["claim"], claim["verdict"]) == ("We deployed okapi.", "supported")
        assert claim["evidence"][0]["record_id"] == record_id
        answer = client.post("/v1/research", json={"question": "what about okapi?"}).json()
        assert answer["items"][0]["record_id"] == record_id
        assert f"cite ({record_id}, {version_id})" in answer["summary"]
        symbol = client.post("/v1/for_symbol", json={"symbol": "okapi"}).json()
        assert [i["record_id"] for i in symbol["items"]] == [record_id]
        path = client.post("/v1/for_path", json={"path": "okapi"}).json()
        assert path["items"] == []  # no record is linked to a file of that name


def test_openapi_declares_auth_and_error_statuses(live: Live) -> None:
    spec = httpx.get(f"{live.url}/openapi.json").json()
    op = spec["paths"]["/v1/records"]["post"]
    assert {"400", "401", "403", "404", "409", "422"} <= set(op["responses"])
    assert "HTTPBearer" in spec["components"]["securitySchemes"]


def test_records_batch_is_one_transaction_audited_once(live: Live) -> None:
    contents = [
        {"kind": "episode", "scope": "acme/batch", "title": f"Batch over HTTP {i}"}
        for i in range(30)
    ]
    with _client(live, live.agent) as agent, _client(live, live.curator) as curator:
        done = agent.post("/v1/records:batch", json={"contents": contents})
        assert done.status_code == 200, done.text
        made = [o["record"]["id"] for o in done.json()]
        assert len(made) == 30
        trail = curator.get("/v1/audit", params={"subject_id": made[3]}).json()
        (entry,) = [e for e in trail if e["action"] == "batch"]
        assert entry["details"]["records"] == made
        bad = agent.post("/v1/records:batch", json={"contents": [*contents, {"kind": "fact"}]})
        assert bad.status_code == 422 and bad.json()["code"] == "invalid_input"
        assert agent.post("/v1/records:batch", json={"contents": []}).status_code == 422
