"""Approving every proposal a filter matches, across the queue's pages, in one go."""

from __future__ import annotations

from tests.web.conftest import Console, hidden, sign_in


def _queue_many(console: Console, scope: str, count: int) -> list[str]:
    contents = [
        {"kind": "belief", "scope": scope, "title": f"Bulk belief {scope} {n}", "body": f"n={n}"}
        for n in range(count)
    ]
    answer = console.app_client.post(
        "/v1/records:batch",
        json={"contents": contents},
        headers={"Authorization": f"Bearer {console.agent_key}"},
    )
    assert answer.status_code == 200, answer.text
    outcomes = answer.json()
    assert {o["decision"] for o in outcomes} == {"queue"}
    return [o["proposal"]["id"] for o in outcomes]


def test_approve_every_match_across_pages(console: Console) -> None:
    chosen = _queue_many(console, "acme/many", 60)  # more than one page of 50
    other = console.propose("Outside the filter", scope="acme/elsewhere")
    client = console.client()
    csrf = sign_in(client, console.curator_key)
    page = client.get("/ui/queue", params={"scope": "acme/many"})
    assert "Approve every proposal matching the filters (all pages)" in page.text
    answer = client.post(
        "/ui/queue/approve-matching",
        data={"csrf": csrf, "reason": "weekly triage", "scope": "acme/many"},
    )
    assert answer.status_code == 303
    assert answer.headers["location"] == "/ui/queue?approved=60"
    assert {console.proposal_status(p) for p in chosen} == {"accepted"}
    assert console.proposal_status(other) == "pending"


def test_an_agent_cannot_approve_what_matches(console: Console) -> None:
    mine = console.propose("An agent's own proposal", scope="acme/agent")
    client = console.client()
    csrf = sign_in(client, console.agent_key)
    answer = client.post(
        "/ui/queue/approve-matching",
        data={"csrf": csrf, "reason": "mine", "scope": "acme/agent"},
    )
    assert answer.status_code == 403
    assert console.proposal_status(mine) == "pending"
    # and the control is not offered to it
    assert "approve-matching" not in client.get("/ui/queue").text


def test_a_filter_matching_nothing_or_too_much_is_refused_whole(console: Console) -> None:
    client = console.client()
    csrf = sign_in(client, console.curator_key)
    nothing = client.post(
        "/ui/queue/approve-matching",
        data={"csrf": csrf, "reason": "triage", "scope": "acme/none"},
    )
    assert nothing.status_code == 422
    assert "no pending proposal matches" in nothing.text
    many = _queue_many(console, "acme/huge", 1_001)
    too_much = client.post(
        "/ui/queue/approve-matching",
        data={"csrf": csrf, "reason": "triage", "scope": "acme/huge"},
    )
    assert too_much.status_code == 422
    assert "more than 1,000 proposals match" in too_much.text
    assert console.proposal_status(many[0]) == "pending"
    assert hidden(client.get("/ui/queue").text, "csrf") == csrf
