"""``--json`` prints what the HTTP API answers: every listing (and the reads beside them),
run on one store through the CLI and through the FastAPI app with the same key and the same
query, gives the same JSON.

Only what must differ between two calls is normalised (``MUST_DIFFER``): how long a read
took, and when a check ran.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from cairn.doors.cli import app
from cairn.doors.http import create_app
from cairn.workspace import Workspace
from tests.cli.test_cli import Cli

runner = CliRunner(env={"CAIRN_EMBEDDER": "static", "CAIRN_STORE": "", "CAIRN_API_KEY": ""})
SCOPE = "acme/app"
EVENTS = [
    {"event_id": f"t-{i}", "ts": f"2026-11-20T09:{i:02d}:00Z", "session_id": "s-1",
     "scope": SCOPE, "role": "user" if i % 2 else "assistant", "kind": "message",
     "text": f"The nightly deploy number {i} failed: the backup window locks the database"}
    for i in range(6)
]  # fmt: skip


@dataclass
class World:
    cli: Cli
    client: TestClient
    names: dict[str, str] = field(default_factory=dict)  # RECORD, STALE, NODE, GRIP, …


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """One store with records and versions, pending and stale proposals, a published scope,
    the audit log of all that, a rolled-up timeline, and the example decision graph."""
    tmp = tmp_path_factory.mktemp("json-http")
    cli = Cli(tmp / ".cairn")
    ids = [
        cli.run("remember", "--kind", "fact", "--scope", SCOPE, "--title", title,
                "--body", f"{title}. The deploy runs nightly.")["record"]["id"]
        for title in ("Deploys run nightly", "Backups lock the database", "Fridays are slow")
    ]  # fmt: skip
    v1 = cli.run("get", ids[0])["version"]["id"]
    stale = cli.run("update", ids[0], "--base", v1, "--body", "Deploys run at 02:00.", who="agent")
    cli.run("update", ids[0], "--body", "Deploys run nightly at 01:00.")  # the agent's is stale
    pending = cli.run("remember", "--kind", "belief", "--scope", SCOPE, "--title", "Fridays",
                      "--body", "The backup overlaps the deploy.", who="agent")  # fmt: skip
    cli.run("publish", "--scope", SCOPE, "--name", "first")
    events = tmp / "events.jsonl"
    events.write_text("\n".join(json.dumps(e) for e in EVENTS) + "\n", encoding="utf-8")
    cli.run("timeline", "append", str(events), who="agent")
    cli.run("timeline", "rollup")
    cli.run("graph", "ingest", "--example")
    cli.run("reindex")
    year = cli.run("timeline", "root")[0]["node_id"]
    segment = cli.run("timeline", "node", year)
    while segment["level"] != "segment":  # year → month → week → day → segment
        segment = cli.run("timeline", "node", segment["children"][0])
    names = {
        "RECORD": ids[0],
        "STALE": stale["proposal"]["id"],
        "PENDING": pending["proposal"]["id"],
        "YEAR": year,
        "NODE": segment["node_id"],
        "GRIP": segment["bullets"][0]["grip_ids"][0],
    }
    with TestClient(create_app(Workspace(cli.folder), embedder="static")) as client:
        yield World(cli, client, names)


@dataclass(frozen=True)
class Case:
    """A CLI command (as typed after ``cairn``) and the HTTP call that must answer the same."""

    cli: str
    method: str
    path: str
    params: dict[str, Any] | list[tuple[str, Any]] | None = None
    body: dict[str, Any] | None = None
    who: str = "curator"


FILTERED = [("kind", "fact"), ("kind", "belief"), ("status", "active"), ("scope", "acme/*"),
            ("limit", 2), ("offset", 1)]  # fmt: skip
CASES: dict[str, Case] = {
    # records
    "list": Case("list", "GET", "/v1/records"),
    "list as the agent": Case("list", "GET", "/v1/records", who="agent"),
    "list filtered": Case(
        "list --kind fact --kind belief --status active --scope 'acme/*' --limit 2 --offset 1",
        "GET",
        "/v1/records",
        FILTERED,
    ),
    "list of decisions": Case(
        "list --kind decision --limit 500", "GET", "/v1/records", {"kind": "decision", "limit": 500}
    ),
    "history": Case("history RECORD", "GET", "/v1/records/RECORD/versions"),
    "get": Case("get RECORD", "GET", "/v1/records/RECORD"),
    "get published": Case(
        "get RECORD --selector published", "GET", "/v1/records/RECORD", {"selector": "published"}
    ),
    "get a version": Case("get RECORD --version 1", "GET", "/v1/records/RECORD/versions/1"),
    # review and audit
    "review list": Case("review list", "GET", "/v1/proposals"),
    "review list as the agent": Case("review list", "GET", "/v1/proposals", who="agent"),
    "review list accepted": Case(
        "review list --status accepted --limit 3",
        "GET",
        "/v1/proposals",
        {"status": "accepted", "limit": 3},
    ),
    "review show": Case("review show STALE", "GET", "/v1/proposals/STALE"),
    "review show as the agent": Case(
        "review show PENDING", "GET", "/v1/proposals/PENDING", who="agent"
    ),
    "audit": Case("audit", "GET", "/v1/audit"),
    "audit filtered": Case(
        "audit --actor agent --action propose --limit 5",
        "GET",
        "/v1/audit",
        {"actor": "agent", "action": "propose", "limit": 5},
    ),
    "audit of a record": Case(
        "audit --subject RECORD --since 2020-01-01T00:00:00Z",
        "GET",
        "/v1/audit",
        {"subject_id": "RECORD", "since": "2020-01-01T00:00:00Z"},
    ),
    "audit of a proposal": Case(
        "audit --proposal STALE", "GET", "/v1/audit", {"proposal_id": "STALE"}
    ),
    # retrieval
    "search": Case(
        f"search 'when do deploys run' -k 3 --scope {SCOPE}",
        "POST",
        "/v1/retrieve",
        body={"query": "when do deploys run", "top_k": 3, "scope": SCOPE},
    ),
    "search by keyword": Case(
        "search backups --mode keyword --kind fact --max-tokens 500",
        "POST",
        "/v1/retrieve",
        body={"query": "backups", "mode": "keyword", "kinds": ["fact"], "max_tokens": 500},
    ),
    "context": Case(
        f"context deploys --scope {SCOPE}",
        "POST",
        "/v1/read_context",
        body={"query": "deploys", "scope": SCOPE},
        who="agent",
    ),
    "validate": Case("validate RECORD", "POST", "/v1/validate", body={"ids": ["RECORD"]}),
    # the timeline
    "timeline root": Case("timeline root", "GET", "/v1/timeline/root"),
    "timeline root of a scope": Case(
        "timeline root --scope 'acme/*'", "GET", "/v1/timeline/root", {"scope": "acme/*"}
    ),
    "timeline node": Case("timeline node NODE", "GET", "/v1/timeline/nodes/NODE"),
    "timeline browse": Case(
        "timeline browse YEAR -k 5", "GET", "/v1/timeline/nodes/YEAR/children", {"limit": 5}
    ),
    "timeline events": Case("timeline events", "GET", "/v1/timeline/events"),
    "timeline events of a session": Case(
        "timeline events --session s-1 --since 2026-11-20T09:02:00Z -k 2",
        "GET",
        "/v1/timeline/events",
        {"session_id": "s-1", "since": "2026-11-20T09:02:00Z", "limit": 2},
    ),
    "timeline search": Case(
        "timeline search 'backup window' -k 3",
        "GET",
        "/v1/timeline/search",
        {"q": "backup window", "k": 3},
    ),
    "timeline expand": Case(
        "timeline expand GRIP --before 1 --after 1",
        "GET",
        "/v1/timeline/grips/GRIP",
        {"before": 1, "after": 1},
    ),
    "timeline scan": Case(
        "timeline scan backup --node YEAR",
        "GET",
        "/v1/timeline/scan",
        {"q": "backup", "node_id": "YEAR"},
    ),
    "timeline recent": Case(
        "timeline recent --max-tokens 500",
        "GET",
        "/v1/timeline/recent",
        {"max_tokens": 500},
        who="agent",
    ),
    "timeline status": Case("timeline status", "GET", "/v1/timeline/status"),
    # the decision graph
    "graph roles": Case("graph roles", "GET", "/v1/graph/roles"),
    "graph roles as the agent": Case("graph roles", "GET", "/v1/graph/roles", who="agent"),
}

# Listings with no HTTP route to compare with, and why.
NO_HTTP_ROUTE = {
    "keys list": "keys are kept in the store's principals file and managed on its machine: "
    "the HTTP API has no route that lists (or makes) keys",
}

# Fields whose values differ from one call to the next, whatever the door.
MUST_DIFFER = {
    "timings_ms": "how long each stage of a retrieval took (its trace)",
    "checked_at": "when `validate` checked the records",
}


def _normalised(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: f"<{k}>" if k in MUST_DIFFER else _normalised(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalised(v) for v in value]
    return value


def _named(value: Any, names: dict[str, str]) -> Any:
    """``value`` with the placeholders (RECORD, NODE, …) replaced by the world's ids."""
    if isinstance(value, str):
        return re.sub(r"\b(" + "|".join(names) + r")\b", lambda m: names[m.group(0)], value)
    if isinstance(value, list | tuple):
        return type(value)(_named(v, names) for v in value)
    if isinstance(value, dict):
        return {k: _named(v, names) for k, v in value.items()}
    return value


def _cli_json(world: World, command: str, who: str) -> Any:
    argv = [*shlex.split(_named(command, world.names)), "--json"]
    argv += ["--store", str(world.cli.folder), "--key", world.cli.keys[who]]
    done = runner.invoke(app, argv)
    assert done.exit_code == 0, (argv, done.stdout, done.stderr)
    return json.loads(done.stdout)


def _http_json(world: World, case: Case) -> Any:
    answer = world.client.request(
        case.method,
        _named(case.path, world.names),
        params=_named(case.params, world.names),
        json=_named(case.body, world.names),
        headers={"Authorization": f"Bearer {world.cli.keys[case.who]}"},
    )
    assert answer.status_code == 200, (case, answer.text)
    return answer.json()


@pytest.mark.parametrize("name", list(CASES))
def test_the_cli_prints_what_the_http_api_answers(world: World, name: str) -> None:
    case = CASES[name]
    printed = _cli_json(world, case.cli, case.who)
    answered = _http_json(world, case)
    listed = answered.get("items", answered) if isinstance(answered, dict) else answered
    assert listed, f"{name}: an empty answer proves little"
    assert _normalised(printed) == _normalised(answered)


def test_every_listing_is_compared() -> None:
    """Every command that lists things is compared above, or has no HTTP route (and says
    why): a listing added later is added here."""
    listings = {"list", "history", "review list", "audit", "search", "context", "timeline root",
                "timeline browse", "timeline events", "timeline search", "timeline scan",
                "timeline recent", "graph roles", "keys list"}  # fmt: skip
    compared = {case.cli for case in CASES.values()}
    missing = {
        listing
        for listing in listings - set(NO_HTTP_ROUTE)
        if not any(command == listing or command.startswith(listing + " ") for command in compared)
    }
    assert not missing, f"not compared with the HTTP API: {', '.join(sorted(missing))}"


def test_cairn_status_prints_the_http_counts_with_the_store(world: World) -> None:
    """``cairn status --json`` adds the store folder it read (an HTTP caller is not told
    where the server keeps its data); its counts are what ``GET /v1/status`` answers."""
    printed = _cli_json(world, "status", "curator")
    assert printed["store"] == str(world.cli.folder)
    assert printed["counts"] == _http_json(world, Case("status", "GET", "/v1/status"))


def test_trace_show_prints_what_the_http_api_answers(world: World) -> None:
    """``cairn trace show --json`` prints what ``GET /v1/traces/{id}`` answers. (``cairn why
    --json`` against ``POST /v1/graph/ask``, which takes the policy passport headers, is
    compared in tests/graph/test_doors.py.)"""
    asked = _cli_json(world, "why acme-emea-end-onprem-connector-support-2025", "agent")
    shown = _cli_json(world, f"trace show {asked['trace_id']}", "agent")
    case = Case("trace show", "GET", f"/v1/traces/{asked['trace_id']}", who="agent")
    assert shown == _http_json(world, case)
