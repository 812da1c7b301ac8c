"""The timeline through a real ``cairn serve`` (HTTP routes and MCP tools) and the CLI: the
same answers on every door, the documented errors, and nothing of a scope the caller may not
read (its events, nodes, grips, counts or search hits)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from cairn.auth import PrincipalEntry, add_key, load_principals, save_principals
from tests.doors.conftest import Live, running, wait_embedded
from tests.timeline.events import event_json

pytestmark = pytest.mark.anyio

SECRET = "zebraquartz"


@dataclass(frozen=True)
class World:
    live: Live
    reader: str  # an agent key for acme/* only
    secret_nodes: tuple[str, ...]
    secret_grips: tuple[str, ...]


def _event(event_id: str, minute: int, text: str, scope: str = "acme/tl") -> dict[str, Any]:
    return event_json(event_id, minute, text, scope, day="2026-03-02")


OURS = [
    _event("t0", 0, "Why does the nightly deploy fail on Fridays?"),
    _event("t1", 1, "The deploy cron overlaps the weekly backup window."),
    _event("t2", 2, "Move the backup to Saturday night then."),
    _event("t3", 3, "Done, the backup job now runs on Saturdays."),
]
THEIRS = [
    _event("x0", 0, f"The {SECRET} merger closes in May.", scope="other/secret"),
    _event("x1", 1, f"Keep {SECRET} out of the changelog.", scope="other/secret"),
]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with running(tmp_path_factory, "timeline") as live:
        path = live.store / "principals.yaml"
        principals = load_principals(path)
        entry = PrincipalEntry(
            id="acme-reader", kind="agent", roles=("agent",), scopes=("acme/*",),
            labels=("public", "internal"),
        )  # fmt: skip
        principals = principals.model_copy(update={"principals": (*principals.principals, entry)})
        principals, reader, _ = add_key(principals, "acme-reader")
        save_principals(path, principals)
        with httpx.Client(base_url=live.url, timeout=30) as http:
            for key, events in ((live.agent, OURS), (live.curator, THEIRS)):
                answer = http.post(
                    "/v1/timeline/events", json={"events": events}, headers=live.headers(key)
                )
                assert answer.status_code == 200, answer.text
            # the server rolls up in the background too: whichever runs first builds it
            built = http.post("/v1/timeline/rollup", headers=live.headers(live.curator))
            assert built.status_code == 200, built.text
            # the new summaries' vectors come from the server's worker: searches below rank
            # what is stored, not a race with it
            wait_embedded(live)
            status = http.get("/v1/timeline/status", headers=live.headers(live.curator)).json()
            assert status["lag"] == 0
            assert status["nodes"] == {"segment": 2, "day": 2, "week": 2, "month": 2, "year": 2}
            years = http.get("/v1/timeline/root", headers=live.headers(live.curator)).json()
            secret_nodes: list[str] = []
            secret_grips: set[str] = set()
            stack = [y["node_id"] for y in years if y["scope"] == "other/secret"]
            while stack:
                node = http.get(
                    f"/v1/timeline/nodes/{stack.pop()}", headers=live.headers(live.curator)
                ).json()
                secret_nodes.append(node["node_id"])
                secret_grips |= {g["grip_id"] for g in node["grips"]}
                stack += node["children"]
        assert len(secret_nodes) == 5 and secret_grips
        yield World(live, reader, tuple(secret_nodes), tuple(sorted(secret_grips)))


def _get(world: World, path: str, key: str, **params: Any) -> httpx.Response:
    return httpx.get(
        f"{world.live.url}{path}", params=params, headers=world.live.headers(key), timeout=30
    )


def _our_segment(world: World) -> dict[str, Any]:
    (year,) = _get(world, "/v1/timeline/root", world.reader).json()
    node = year
    while node["level"] != "segment":
        node = _get(world, f"/v1/timeline/nodes/{node['children'][0]}", world.reader).json()
    return node


def test_appending_over_http_is_idempotent_and_refuses_bad_events(world: World) -> None:
    live = world.live
    again = httpx.post(
        f"{live.url}/v1/timeline/events", json={"events": OURS[:2]},
        headers=live.headers(live.agent), timeout=30,
    )  # fmt: skip
    assert again.status_code == 200
    assert again.json() == {"stored": [], "duplicates": ["t0", "t1"]}
    changed = dict(OURS[0], text="rewritten")
    clash = httpx.post(
        f"{live.url}/v1/timeline/events", json={"events": [changed]},
        headers=live.headers(live.agent), timeout=30,
    )  # fmt: skip
    assert clash.status_code == 409
    assert clash.headers["content-type"].startswith("application/problem+json")
    assert "t0" in clash.json()["detail"]
    naive = dict(OURS[0], event_id="n1", ts="2026-03-02T09:00:00")
    refused = httpx.post(
        f"{live.url}/v1/timeline/events", json={"events": [naive]},
        headers=live.headers(live.agent), timeout=30,
    )  # fmt: skip
    assert refused.status_code == 422 and "time zone" in refused.text
    outside = httpx.post(
        f"{live.url}/v1/timeline/events",
        json={"events": [dict(OURS[0], event_id="o1", scope="other/x")]},
        headers=live.headers(world.reader), timeout=30,
    )  # fmt: skip
    assert outside.status_code == 403
    deep = httpx.post(
        f"{live.url}/v1/timeline/events",
        content='{"events": [' + "[" * 5000 + "]" * 5000 + "]}",
        headers={**live.headers(live.agent), "content-type": "application/json"}, timeout=30,
    )  # fmt: skip
    assert deep.status_code == 422 and "levels" in deep.json()["detail"]
    # and nothing of the refused batches was stored
    stored = _get(world, "/v1/timeline/events", live.curator, limit=100).json()
    assert {e["event_id"] for e in stored} == {e["event_id"] for e in OURS + THEIRS}


def test_only_curators_build_and_see_the_status(world: World) -> None:
    live = world.live
    refused = httpx.post(
        f"{live.url}/v1/timeline/rollup", headers=live.headers(world.reader), timeout=30
    )
    assert refused.status_code == 403
    assert _get(world, "/v1/timeline/status", world.reader).status_code == 403
    status = _get(world, "/v1/timeline/status", live.curator).json()
    assert status["lag"] == 0 and status["nodes"]["segment"] == 2


def test_navigation_search_and_grips_over_http(world: World) -> None:
    segment = _our_segment(world)
    assert segment["event_count"] == 4 and segment["title"].startswith("Why does the nightly")
    day = _get(world, f"/v1/timeline/nodes/{segment['parent_id']}", world.reader).json()
    page = _get(world, f"/v1/timeline/nodes/{day['node_id']}/children", world.reader).json()
    assert [c["node_id"] for c in page["children"]] == [segment["node_id"]]
    found = _get(world, "/v1/timeline/search", world.reader, q="backup window").json()
    assert found["warnings"] == []
    hits = found["hits"]
    assert hits[0]["node_id"] == segment["node_id"]
    grip = _get(world, f"/v1/timeline/grips/{hits[0]['grip_ids'][0]}", world.reader).json()
    covered = [e["event_id"] for e in grip["events"]]
    assert covered and set(covered) <= {"t0", "t1", "t2", "t3"}
    assert grip["grip"]["excerpt"] in " ".join(e["text"] for e in grip["events"])
    recent = _get(world, "/v1/timeline/recent", world.reader, max_tokens=500).json()
    assert recent["items"] and recent["tokens"] <= 500
    scan = _get(world, "/v1/timeline/scan", world.reader, q="backup", node_id=day["node_id"])
    # equal scores (one word each), then in time order
    assert [g["event_id"] for g in scan.json()["grips"]] == ["t1", "t2", "t3"]
    old = _get(world, f"/v1/timeline/nodes/{segment['node_id']}", world.reader, version=9)
    assert old.status_code == 404
    naive = _get(world, "/v1/timeline/search", world.reader, q="x", since="2026-03-02T09:00:00")
    assert naive.status_code == 422


def test_nothing_of_another_scope_reaches_a_reader_over_http(world: World) -> None:
    reader = world.reader
    for node_id in world.secret_nodes:
        for path in (f"/v1/timeline/nodes/{node_id}", f"/v1/timeline/nodes/{node_id}/children"):
            answer = _get(world, path, reader)
            assert answer.status_code == 404 and SECRET not in answer.text
    for grip_id in world.secret_grips:
        answer = _get(world, f"/v1/timeline/grips/{grip_id}", reader)
        assert answer.status_code == 404 and SECRET not in answer.text
    reads = [
        _get(world, "/v1/timeline/root", reader),
        _get(world, "/v1/timeline/search", reader, q=f"{SECRET} merger"),
        _get(world, "/v1/timeline/recent", reader, max_tokens=100_000),
        _get(world, "/v1/timeline/events", reader, limit=1000),
        _get(world, "/v1/timeline/scan", reader, q=SECRET,
             since="2026-03-01T00:00:00Z", until="2026-03-04T00:00:00Z"),
    ]  # fmt: skip
    for answer in reads:
        assert answer.status_code == 200
        assert SECRET not in answer.text and "other/secret" not in answer.text
        assert not any(node in answer.text for node in world.secret_nodes)
    # vector recall may still offer the reader's own nearest summaries, never theirs
    hits = _get(world, "/v1/timeline/search", reader, q=f"{SECRET} merger").json()["hits"]
    assert all(h["node_id"] not in world.secret_nodes for h in hits)
    # the scan counted only what the reader may read
    scan = _get(world, "/v1/timeline/scan", reader, q=SECRET,
                since="2026-03-01T00:00:00Z", until="2026-03-04T00:00:00Z").json()  # fmt: skip
    assert scan["scanned"] == len(OURS)


def _cli(world: World, key: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CAIRN_API_KEY": key, "CAIRN_EMBEDDER": "static"}
    return subprocess.run(
        [sys.executable, "-c", "from cairn.doors.cli import main; main()",
         "--store", str(world.live.store), "timeline", *args],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip


def test_the_cli_prints_what_http_answers(world: World) -> None:
    segment = _our_segment(world)
    shown = _cli(world, world.reader, "node", segment["node_id"], "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) == segment
    page = _cli(world, world.reader, "browse", segment["parent_id"], "--json")
    http_page = _get(world, f"/v1/timeline/nodes/{segment['parent_id']}/children", world.reader)
    assert json.loads(page.stdout) == http_page.json()
    for node_id in world.secret_nodes:
        hidden = _cli(world, world.reader, "node", node_id)
        assert hidden.returncode == 3 and SECRET not in hidden.stdout + hidden.stderr
    found = _cli(world, world.reader, "search", f"{SECRET} merger", "--json")
    assert found.returncode == 0, found.stderr
    assert all(h["node_id"] not in world.secret_nodes for h in json.loads(found.stdout)["hits"])
    refused = _cli(world, world.reader, "rollup")
    assert refused.returncode == 4, refused.stderr


async def test_mcp_tools_answer_within_the_callers_scopes(world: World) -> None:
    live = world.live
    http = httpx2.AsyncClient(headers=live.headers(world.reader), timeout=30)
    async with Client(streamable_http_client(f"{live.url}/mcp", http_client=http)) as client:
        found = await client.call_tool("timeline_search", {"q": "backup window"})
        assert not found.is_error, found.content
        hits = found.structured_content["hits"]
        assert hits and hits[0]["grip_ids"]
        expanded = await client.call_tool("timeline_expand", {"grip_id": hits[0]["grip_ids"][0]})
        assert not expanded.is_error
        assert {e["event_id"] for e in expanded.structured_content["events"]} <= {
            "t0", "t1", "t2", "t3",
        }  # fmt: skip
        recent = await client.call_tool("timeline_recent", {"max_tokens": 100_000})
        events = await client.call_tool("timeline_events", {"limit": 1000})
        secret = await client.call_tool("timeline_search", {"q": f"{SECRET} merger"})
        for result in (recent, events, secret):
            assert not result.is_error
            assert SECRET not in json.dumps(result.structured_content)
        assert {e["event_id"] for e in events.structured_content["events"]} == {
            e["event_id"] for e in OURS
        }
        for grip_id in world.secret_grips:
            hidden = await client.call_tool("timeline_expand", {"grip_id": grip_id})
            assert hidden.is_error and "[not_found]" in str(hidden.content)
            assert SECRET not in str(hidden.content)


def test_the_server_rolls_up_appended_events_by_itself(world: World) -> None:
    live = world.live
    late = [_event("bg0", 40, "A background rollup picked this up."), _event("bg1", 41, "Yes.")]
    answer = httpx.post(
        f"{live.url}/v1/timeline/events", json={"events": late},
        headers=live.headers(live.agent), timeout=30,
    )  # fmt: skip
    assert answer.json()["stored"] == ["bg0", "bg1"]
    deadline = time.monotonic() + 30
    while True:  # a bounded wait for the server's own rollup, woken by the append
        status = _get(world, "/v1/timeline/status", live.curator).json()
        if status["lag"] == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.05)  # pacing the poll, not synchronisation
    assert status["lag"] == 0
    hits = _get(world, "/v1/timeline/search", world.reader, q="background rollup").json()["hits"]
    grips = [
        _get(world, f"/v1/timeline/grips/{g}", world.reader).json() for g in hits[0]["grip_ids"]
    ]
    assert "bg0" in {e["event_id"] for g in grips for e in g["events"]}
