"""The console end to end in real headless Chromium (Debian's ``chromium``, driven by
Playwright for Python; no Playwright browser download), against a real ``cairn serve``.

Install the browser with ``apt-get install -y chromium`` (the Makefile's ``browser``
target). Without it these tests skip, saying so. With ``CAIRN_UI_SCREENSHOTS=<folder>``
the run saves a screenshot of every page there (``docs/ui`` holds the committed ones).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from cairn.graph.fixtures import example_fixtures, plan_graph
from cairn.workspace import Workspace
from tests.doors.conftest import free_port, start_server, wait_ready

playwright_sync = pytest.importorskip(
    "playwright.sync_api", reason="Playwright for Python is not installed (pip install playwright)"
)
# axe-core, bundled by this dev dependency, checked in the page under test
from axe_playwright_python.sync_playwright import Axe  # noqa: E402

CHROMIUM = next(
    (p for p in ("/usr/bin/chromium", "/usr/bin/chromium-browser") if Path(p).exists()),
    shutil.which("chromium") or shutil.which("chromium-browser"),
)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="no chromium to drive: apt-get install -y chromium (or: make browser)",
    ),
]
SHOTS = os.environ.get("CAIRN_UI_SCREENSHOTS")
DECISION_CONTROLS = (
    "button.approve",
    "button.approve-matching",
    "button.reject",
    "button.rebase",
    "input[name=ids]",
    "form[action$='/move']",
)


@dataclass
class Server:
    url: str
    curator: str
    agent: str
    folder: Path

    def api(self, method: str, path: str, key: str, **kwargs: Any) -> Any:
        answer = httpx.request(
            method,
            f"{self.url}/v1{path}",
            headers={"Authorization": f"Bearer {key}"},
            timeout=30,
            **kwargs,
        )
        assert answer.status_code == 200, answer.text
        return answer.json()

    def propose(self, title: str, *, scope: str = "acme/app") -> str:
        content = {"kind": "belief", "scope": scope, "title": title, "body": f"{title}."}
        outcome = self.api("POST", "/records", self.agent, json={"content": content})
        assert outcome["decision"] == "queue"
        proposal_id: str = outcome["proposal"]["id"]
        return proposal_id

    def status(self, proposal_id: str) -> str:
        status: str = self.api("GET", f"/proposals/{proposal_id}", self.curator)["status"]
        return status


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("console") / ".cairn"
    keys = Workspace(folder).init().keys
    port = free_port()
    process = start_server(folder, port)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, process)
        yield Server(url, keys["curator"], keys["agent"], folder)
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def browser(server: Server) -> Iterator[Any]:
    with playwright_sync.sync_playwright() as p:
        launched = p.chromium.launch(
            executable_path=CHROMIUM, args=["--headless=new", "--no-sandbox", "--disable-gpu"]
        )
        try:
            yield launched
        finally:
            launched.close()


def _sign_in(browser: Any, server: Server, key: str) -> Any:
    context = browser.new_context(base_url=server.url)
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.errors = errors
    page.goto("/ui/queue")
    assert page.url.endswith("/ui/signin"), "an anonymous visit goes to sign-in"
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/ui/queue")
    assert key not in page.url and key not in page.content()
    return page


def _shot(page: Any, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=True)


def _accessible(page: Any) -> None:
    """axe-core in the same browser: no serious or critical violation."""
    results = Axe().run(page)
    bad = [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:3]}"
        for v in results.response["violations"]
        if v.get("impact") in ("serious", "critical")
    ]
    assert bad == [], f"{page.url}: {bad}"


def test_curator_approves_rejects_and_reads_the_audit_log(browser: Any, server: Server) -> None:
    keep = server.propose("Deploys happen on Tuesdays")
    drop = server.propose("The moon is made of cheese")
    page = _sign_in(browser, server, server.curator)
    _shot(page, "queue")
    _accessible(page)

    page.goto(f"/ui/proposals/{keep}")
    _shot(page, "proposal")
    _accessible(page)
    page.get_by_label("Reason for approving (optional)").fill("matches the runbook")
    page.get_by_role("button", name="Approve", exact=True).click()
    page.wait_for_url(f"**/ui/proposals/{keep}")
    assert page.locator("#proposal-status").inner_text() == "accepted"

    page.goto(f"/ui/proposals/{drop}")
    page.get_by_label("Reason for rejecting (required)").fill("not supported by evidence")
    page.get_by_role("button", name="Reject").click()
    page.wait_for_url(f"**/ui/proposals/{drop}")
    assert page.locator("#proposal-status").inner_text() == "rejected"
    assert server.status(keep) == "accepted" and server.status(drop) == "rejected"

    page.goto("/ui/audit")
    table = page.locator("table.audit")
    assert table.locator(f"a[href='/ui/proposals/{keep}']").count() >= 1
    assert table.locator(f"a[href='/ui/proposals/{drop}']").count() >= 1
    assert "not supported by evidence" in table.inner_text()
    _shot(page, "audit")
    _accessible(page)
    page.get_by_label("Action").fill("reject")
    page.get_by_role("button", name="Filter", exact=True).click()
    filtered = page.locator("table.audit").inner_text()
    assert drop in filtered and keep not in filtered

    # the approved record's page: content, versions with citations, audit entries
    record_id = server.api("GET", f"/proposals/{keep}", server.curator)["result_record_id"]
    page.goto(f"/ui/records/{record_id}")
    assert page.locator("#record-status").inner_text() == "active"
    assert page.locator("input.citation").first.input_value().startswith(f"({record_id}, ver_")
    assert "matches the runbook" in page.locator(".audit-list").inner_text()
    _shot(page, "record")
    _accessible(page)
    page.get_by_label("Reason").first.fill("no longer true")
    page.get_by_role("button", name="Archive").click()
    page.wait_for_url(f"**/ui/records/{record_id}")
    assert page.locator("#record-status").inner_text() == "archived"

    page.goto("/ui/search?q=deploys")
    _shot(page, "search")
    _accessible(page)
    page.goto("/ui/timeline")
    _shot(page, "timeline")
    _accessible(page)
    assert page.errors == [], "no script or CSP errors in the console"
    page.context.close()


def test_a_stale_proposal_is_rebased_then_approved(browser: Any, server: Server) -> None:
    made = server.api(
        "POST",
        "/records",
        server.curator,
        json={"content": {"kind": "fact", "scope": "acme/app", "title": "CI", "body": "Jenkins"}},
    )
    record_id = made["record"]["id"]
    queued = server.api(
        "PATCH", f"/records/{record_id}", server.agent, json={"patch": {"body": "GitHub Actions"}}
    )
    assert queued["decision"] == "queue"
    old = queued["proposal"]["id"]
    moved = {"patch": {"body": "Buildkite"}}
    server.api("PATCH", f"/records/{record_id}", server.curator, json=moved)

    page = _sign_in(browser, server, server.curator)
    page.goto("/ui/queue")
    assert page.locator("tr.stale", has_text=old).count() == 1
    page.goto(f"/ui/proposals/{old}")
    assert page.locator(".stale-badge").count() == 1
    assert page.get_by_role("button", name="Approve", exact=True).count() == 0
    assert "Buildkite" in page.locator("table.diff").nth(1).inner_text()  # against the head
    _shot(page, "proposal-stale")
    _accessible(page)
    page.get_by_role("button", name="Rebase on the current version").click()
    page.wait_for_url("**/ui/proposals/prp_*")
    new = page.url.rsplit("/", 1)[1]
    assert new != old and server.status(old) == "rebased"
    assert page.locator(".stale-badge").count() == 0
    page.get_by_role("button", name="Approve", exact=True).click()
    page.wait_for_url(f"**/ui/proposals/{new}")
    assert server.status(new) == "accepted"
    head = server.api("GET", f"/records/{record_id}", server.curator)
    assert head["version"]["content"]["body"] == "GitHub Actions"
    page.context.close()


def test_bulk_approve_a_filtered_set(browser: Any, server: Server) -> None:
    chosen = [server.propose(f"Bulk belief {n}", scope="acme/bulk") for n in range(3)]
    other = server.propose("Outside the filter", scope="acme/elsewhere")
    page = _sign_in(browser, server, server.curator)
    page.goto("/ui/queue")
    page.get_by_label("Scope").fill("acme/bulk")
    page.get_by_role("button", name="Filter", exact=True).click()
    page.wait_for_url("**/ui/queue?*scope=acme%2Fbulk*")
    assert page.locator("input[name=ids]").count() == 3
    page.get_by_label("Select every proposal on this page").check()  # console.js
    page.get_by_label("Reason (recorded for each)").fill("weekly triage")
    page.get_by_role("button", name="Approve selected").click()
    page.wait_for_url("**/ui/queue?approved=3")
    assert [server.status(p) for p in chosen] == ["accepted"] * 3
    assert server.status(other) == "pending"
    # and every match of a filter at once, from the browser
    more = [server.propose(f"More bulk {n}", scope="acme/bulk2") for n in range(2)]
    page.goto("/ui/queue?scope=acme%2Fbulk2")
    page.get_by_label("Reason (recorded for each)").fill("second triage")
    page.get_by_role("button", name="Approve every proposal matching the filters").click()
    page.wait_for_url("**/ui/queue?approved=2")
    assert [server.status(p) for p in more] == ["accepted"] * 2
    assert server.status(other) == "pending"
    audit = server.api("GET", "/audit?action=approve&limit=1000", server.curator)
    assert {e["proposal_id"] for e in audit if e["reason"] == "weekly triage"} == set(chosen)
    page.context.close()


def test_an_agent_sees_no_decision_controls_and_forged_posts_change_nothing(
    browser: Any, server: Server
) -> None:
    target = server.propose("An agent's own proposal")
    page = _sign_in(browser, server, server.agent)
    for path in ["/ui/queue", f"/ui/proposals/{target}"]:
        page.goto(path)
        assert target in page.content()
        for control in DECISION_CONTROLS:
            assert page.locator(control).count() == 0, (path, control)
    _shot(page, "agent-queue")
    _accessible(page)
    assert page.locator("nav a", has_text="Audit log").count() == 0

    # the agent's own session, with its own valid CSRF token: the kernel refuses
    csrf = page.locator("input[name=csrf]").first.input_value()
    for action in ("approve", "reject"):
        answer = page.request.post(
            f"/ui/proposals/{target}/{action}", form={"csrf": csrf, "reason": "mine"}
        )
        assert answer.status == 403
    answer = page.request.post(
        "/ui/queue/approve", form={"csrf": csrf, "ids": target, "reason": "mine"}
    )
    assert answer.status == 403
    # a curator's session without the token: refused before the kernel is asked
    curator = _sign_in(browser, server, server.curator)
    answer = curator.request.post(f"/ui/proposals/{target}/approve", form={"reason": "x"})
    assert answer.status == 403
    assert server.status(target) == "pending"
    page.context.close()
    curator.context.close()


def test_sign_out_and_every_page_redirects_to_sign_in(browser: Any, server: Server) -> None:
    page = _sign_in(browser, server, server.curator)
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url("**/ui/signin")
    _shot(page, "signin")
    _accessible(page)
    for path in ["/ui/queue", "/ui/search", "/ui/audit", "/ui/timeline", "/ui/records/rec_x"]:
        page.goto(path)
        assert page.url.endswith("/ui/signin"), path
    page.context.close()


def test_the_why_page_answers_for_the_role_and_is_accessible(browser: Any, server: Server) -> None:
    # the example graph, loaded into the served store by a curator's own process
    workspace = Workspace(server.folder)
    with workspace.open_memory(embedder=None) as memory:
        plan = plan_graph(example_fixtures())
        memory.graph_ingest(plan, principal=workspace.authenticate(server.curator))
    page = _sign_in(browser, server, server.agent)
    page.get_by_role("link", name="Why").click()
    page.get_by_label("Decision").fill("acme-emea-end-onprem-connector-support-2025")
    page.get_by_role("button", name="Ask").click()
    page.wait_for_url("**/ui/why?**")
    assert page.get_by_role("heading", name="Answer for the staff role").is_visible()
    assert "Some evidence was withheld due to your permissions." in page.content()
    assert page.get_by_role("heading", name="Audit drawer").is_visible()
    _shot(page, "why")
    _accessible(page)
    assert page.errors == []
    # and the error page, for an anchor the role may not read (the browser logs the 404)
    page.goto("/ui/why?anchor=acme-corp-descope-onprem-2024")
    assert page.get_by_role("heading", name="Not Found").is_visible()
    _shot(page, "error")
    _accessible(page)
    page.context.close()


def test_the_timeline_with_events_down_to_a_grip_is_accessible(
    browser: Any, server: Server
) -> None:
    events = [
        {
            "event_id": f"ev-console-{n}",
            "ts": f"2026-03-0{1 + n // 4}T10:0{n % 4}:00Z",
            "session_id": "s-console",
            "scope": "acme/app",
            "agent": "claude-code",
            "role": "user" if n % 2 == 0 else "assistant",
            "kind": "message",
            "text": f"Step {n}: we moved the deploy check to the release pipeline.",
        }
        for n in range(8)
    ]
    server.api("POST", "/timeline/events", server.agent, json={"events": events})
    server.api("POST", "/timeline/rollup", server.curator, json={})
    page = _sign_in(browser, server, server.agent)
    page.goto("/ui/timeline")
    # year → month → week → day → segment, each page checked on the way down
    for _ in range(5):
        _accessible(page)
        link = page.locator("ul.children a").first
        if link.count() == 0:
            break
        link.click()
        page.wait_for_load_state()
    assert page.locator("details.grip").count() > 0, "a segment's bullets carry grips"
    page.locator("details.grip summary").first.click()
    page.locator(".grip-body li.held").first.wait_for()
    _accessible(page)
    grip = page.locator("details.grip").first.get_attribute("hx-get")
    assert grip is not None
    page.goto(grip)
    assert page.locator("li.held").count() > 0
    _shot(page, "grip")
    _accessible(page)
    assert page.errors == []
    page.context.close()
