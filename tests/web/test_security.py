"""The console's security rules, in process: the session cookie, CSRF on every form,
security headers, revocation, and the kernel refusing an agent whatever the page shows."""

from __future__ import annotations

import logging

import pytest

from cairn.auth import revoke_key, save_principals
from tests.web.conftest import Console, hidden, sign_in

PAGES = ["/ui/queue", "/ui/search", "/ui/audit", "/ui/timeline"]


def _cookie_header(answer_headers: list[str], name: str) -> str:
    found = [h for h in answer_headers if h.startswith(f"{name}=")]
    assert found, f"no Set-Cookie for {name}"
    return found[0]


def test_the_session_cookie_is_httponly_strict_expiring_and_holds_no_key(
    console: Console,
) -> None:
    client = console.client()
    form = client.get("/ui/signin")
    answer = client.post(
        "/ui/signin",
        data={"key": console.curator_key, "signin_token": hidden(form.text, "signin_token")},
    )
    cookie = _cookie_header(answer.headers.get_list("set-cookie"), "cairn_session")
    flags = cookie.lower()
    assert "httponly" in flags
    assert "samesite=strict" in flags
    assert "max-age=" in flags
    assert "path=/ui" in flags
    assert "secure" not in flags  # plain HTTP here; see the TLS test
    assert console.curator_key not in cookie
    assert console.curator_key.removeprefix("cairn_") not in cookie


def test_the_cookie_is_secure_over_tls(console: Console) -> None:
    client = console.client(https=True)
    form = client.get("/ui/signin")
    answer = client.post(
        "/ui/signin",
        data={"key": console.curator_key, "signin_token": hidden(form.text, "signin_token")},
    )
    cookie = _cookie_header(answer.headers.get_list("set-cookie"), "cairn_session")
    assert "; secure" in cookie.lower()


def test_security_headers_on_every_page(console: Console) -> None:
    client = console.client()
    sign_in(client, console.curator_key)
    for path in [*PAGES, "/ui/signin", "/ui/no-such-page"]:
        headers = client.get(path).headers
        csp = headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp, path
        assert "frame-ancestors 'none'" in csp, path
        assert headers["x-frame-options"] == "DENY", path
        assert headers["referrer-policy"] == "no-referrer", path
        assert headers["x-content-type-options"] == "nosniff", path


def test_no_inline_script_in_any_page(console: Console) -> None:
    client = console.client()
    sign_in(client, console.curator_key)
    console.propose("A belief to look at")
    for path in PAGES:
        html = client.get(path).text
        assert "<script>" not in html and "onclick=" not in html.lower(), path
        for tag in html.split("<script")[1:]:
            assert 'src="/ui/static/' in tag.split(">")[0], path


def test_pages_redirect_to_signin_without_a_session(console: Console) -> None:
    client = console.client()
    for path in [*PAGES, "/ui/", "/ui/proposals/prp_x", "/ui/records/rec_x"]:
        answer = client.get(path)
        assert answer.status_code == 303, path
        assert answer.headers["location"] == "/ui/signin", path


def test_a_wrong_key_is_refused_and_never_echoed_or_logged(
    console: Console, caplog: pytest.LogCaptureFixture
) -> None:
    client = console.client()
    form = client.get("/ui/signin")
    secret = "cairn_not-a-real-key-but-secret"
    with caplog.at_level(logging.DEBUG):
        answer = client.post(
            "/ui/signin", data={"key": secret, "signin_token": hidden(form.text, "signin_token")}
        )
        sign_in(client, console.curator_key)
    assert answer.status_code == 401
    assert secret not in answer.text
    assert secret not in caplog.text and console.curator_key not in caplog.text


def test_signin_needs_its_form_token(console: Console) -> None:
    client = console.client()
    client.get("/ui/signin")
    answer = client.post("/ui/signin", data={"key": console.curator_key, "signin_token": "x"})
    assert answer.status_code == 403
    assert "cairn_session" not in answer.headers.get("set-cookie", "")


@pytest.mark.parametrize("token", [None, "forged"])
def test_a_decision_without_the_sessions_csrf_token_changes_nothing(
    console: Console, token: str | None
) -> None:
    proposal = console.propose("Forged approvals must fail")
    client = console.client()
    sign_in(client, console.curator_key)
    data = {"reason": "forged"} | ({"csrf": token} if token else {})
    for action in ("approve", "reject"):
        answer = client.post(f"/ui/proposals/{proposal}/{action}", data=data)
        assert answer.status_code == 403
    answer = client.post("/ui/queue/approve", data={"ids": [proposal], "reason": "x", **data})
    assert answer.status_code == 403
    assert console.proposal_status(proposal) == "pending"


def test_another_sessions_token_does_not_do(console: Console) -> None:
    proposal = console.propose("Tokens are per session")
    mine, theirs = console.client(), console.client()
    sign_in(mine, console.curator_key)
    their_token = sign_in(theirs, console.curator_key)
    answer = mine.post(f"/ui/proposals/{proposal}/approve", data={"csrf": their_token})
    assert answer.status_code == 403
    assert console.proposal_status(proposal) == "pending"


def test_the_agents_session_shows_no_decision_controls_and_is_refused(
    console: Console,
) -> None:
    proposal = console.propose("Agents may not approve this")
    client = console.client()
    csrf = sign_in(client, console.agent_key)
    for path in ["/ui/queue", f"/ui/proposals/{proposal}"]:
        html = client.get(path).text
        assert proposal in html  # the agent sees its own proposal …
        for control in ("/approve", "/reject", "/rebase", "Approve selected", 'name="ids"'):
            assert control not in html, (path, control)  # … and no way to decide it
    for action in ("approve", "reject"):
        answer = client.post(
            f"/ui/proposals/{proposal}/{action}", data={"csrf": csrf, "reason": "mine"}
        )
        assert answer.status_code == 403
    answer = client.post(
        "/ui/queue/approve", data={"csrf": csrf, "ids": [proposal], "reason": "mine"}
    )
    assert answer.status_code == 403
    assert console.proposal_status(proposal) == "pending"
    assert client.get("/ui/audit").status_code == 403


def test_a_revoked_key_ends_its_sessions(console: Console) -> None:
    client = console.client()
    sign_in(client, console.curator_key)
    assert client.get("/ui/queue").status_code == 200
    principals = console.workspace.principals()
    curator = next(p for p in principals.principals if p.id == "curator")
    save_principals(console.workspace.principals_path, revoke_key(principals, curator.keys[0].id))
    answer = client.get("/ui/queue")
    assert answer.status_code == 303 and answer.headers["location"] == "/ui/signin"


def test_sign_out_ends_the_session(console: Console) -> None:
    client = console.client()
    csrf = sign_in(client, console.curator_key)
    assert client.post("/ui/signout", data={}).status_code == 403  # sign-out needs the token
    answer = client.post("/ui/signout", data={"csrf": csrf})
    assert answer.status_code == 303
    for path in PAGES:
        assert client.get(path).headers["location"] == "/ui/signin"


def test_a_stolen_cookie_stops_working_after_sign_out(console: Console) -> None:
    client = console.client()
    csrf = sign_in(client, console.curator_key)
    stolen = client.cookies.get("cairn_session")
    assert stolen
    client.post("/ui/signout", data={"csrf": csrf})
    thief = console.client()
    thief.cookies.set("cairn_session", stolen)
    assert thief.get("/ui/queue").status_code == 303


def test_curator_flow_in_process(console: Console) -> None:
    keep, drop = console.propose("Approve me"), console.propose("Reject me")
    client = console.client()
    csrf = sign_in(client, console.curator_key)
    assert client.post(f"/ui/proposals/{keep}/approve", data={"csrf": csrf}).status_code == 303
    no_reason = client.post(f"/ui/proposals/{drop}/reject", data={"csrf": csrf})
    assert no_reason.status_code == 422  # the kernel wants a reason for a rejection
    answer = client.post(f"/ui/proposals/{drop}/reject", data={"csrf": csrf, "reason": "not true"})
    assert answer.status_code == 303
    assert console.proposal_status(keep) == "accepted"
    assert console.proposal_status(drop) == "rejected"
    audit = client.get("/ui/audit").text
    assert keep in audit and drop in audit and "not true" in audit


def test_bad_filters_and_numbers_are_bad_input_not_a_crash(console: Console) -> None:
    # a NUL in a filter the page hands to the kernel's models, and numbers past what the
    # database's integers hold: each a 422 page, as the API answers them
    for key in (console.curator_key, console.agent_key):
        client = console.client()
        sign_in(client, key)
        for path, params in (
            ("/ui/queue", {"scope": "\x00"}),
            ("/ui/queue", {"author": "a\x00"}),
            ("/ui/audit", {"actor": "\x00"}),
            ("/ui/audit", {"after_seq": str(2**63)}),
            ("/ui/records/rec_01HZZZZZZZZZZZZZZZZZZZZZZZ", {"diff_from": str(2**63)}),
        ):
            answer = client.get(path, params=params)
            assert answer.status_code in (403, 422), (path, params, answer.status_code)
            assert "Internal error" not in answer.text
