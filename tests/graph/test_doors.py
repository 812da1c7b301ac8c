"""The graph's doors: HTTP (in process, FastAPI's TestClient) with the policy passport, and
the CLI (``cairn graph ingest``, ``cairn why``, ``cairn trace show|download``), both over a
real store folder with real keys, answering exactly as ``Memory.why`` does."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer.main
import typer.testing
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from cairn.auth import PrincipalEntry, add_key, load_principals, save_principals
from cairn.doors.cli import app as cli_app
from cairn.doors.http import create_app
from cairn.graph.fixtures import plan_graph
from cairn.graph.passport import REQUIRED_HEADERS
from cairn.graph.why import WhyRequest
from cairn.memory import Memory
from cairn.model import Principal
from cairn.workspace import Workspace
from tests.factories import CURATOR
from tests.graph.conftest import DIRECTOR, MANAGER, STAFF
from tests.graph.mini import mini_graph

BODY_KEYS = {"trace_id", "answer", "envelope", "evidence", "_meta"}


def add_principals(workspace: Workspace, *principals: Principal) -> dict[str, str]:
    """Give each principal an entry and a key in the store's principals file."""
    path = workspace.principals_path
    found = load_principals(path)
    keys = {}
    for principal in principals:
        entry = PrincipalEntry(**principal.model_dump())
        found = found.model_copy(update={"principals": (*found.principals, entry)})
        found, key, _ = add_key(found, principal.id)
        keys[principal.id] = key
    save_principals(path, found)
    return keys


@dataclass
class Door:
    workspace: Workspace
    memory: Memory
    client: TestClient
    keys: dict[str, str]  # by principal id, and "curator"
    folder: Path

    def roles(self, principal: Principal) -> dict[str, dict[str, Any]]:
        answer = self.client.get("/v1/graph/roles", headers=self.auth(principal))
        assert answer.status_code == 200, answer.text
        return {role["role"]: role for role in answer.json()}

    def auth(self, principal: Principal) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[principal.id]}"}

    def passport(self, principal: Principal, role: str | None = None) -> dict[str, str]:
        role = role or principal.roles[0]
        profile = self.roles(principal)[role]
        return {
            **self.auth(principal),
            "X-User-Id": principal.id,
            "X-User-Roles": role,
            "X-User-Namespaces": ",".join(principal.labels),
            "X-Policy-Version": profile["policy_version"],
            "X-Policy-Key": profile["policy_key"],
            "X-Request-Id": "req-42",
            "X-Trace-Id": "trace-42",
        }


@pytest.fixture(scope="module")
def door(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Door]:
    root = tmp_path_factory.mktemp("graph-doors")
    workspace = Workspace(root / ".cairn")
    keys = workspace.init().keys
    keys |= add_principals(workspace, STAFF, MANAGER, DIRECTOR)
    memory = workspace.open_memory(embedder=None)
    folder = mini_graph(root / "mini")
    memory.graph_ingest(plan_graph(folder), principal=CURATOR)
    app = create_app(workspace, memory=memory, embedder="static")
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            yield Door(workspace, memory, client, keys, folder)
    finally:
        memory.close()


# ---- HTTP ----------------------------------------------------------------------------


def test_roles_list_what_the_key_may_ask_as(door: Door) -> None:
    assert list(door.roles(STAFF)) == ["staff"]
    assert list(door.roles(DIRECTOR)) == ["staff", "manager", "director"]
    graph = door.memory.policy_in_force.graph
    assert door.roles(MANAGER)["manager"]["policy_key"] == graph.policy_key("manager")
    agent = door.client.get(
        "/v1/graph/roles", headers={"Authorization": f"Bearer {door.keys['agent']}"}
    )
    # cairn init gives its agent the narrowest graph role
    assert agent.status_code == 200
    assert [r["role"] for r in agent.json()] == ["staff"]
    assert door.client.get("/v1/graph/roles").status_code == 401


def test_ask_answers_as_memory_why_does(door: Door) -> None:
    answer = door.client.post(
        "/v1/graph/ask", json={"anchor": "emea-sunset"}, headers=door.passport(STAFF)
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert set(body) == BODY_KEYS
    direct = door.memory.why(WhyRequest(anchor="emea-sunset"), principal=STAFF)
    assert body["answer"] == direct["answer"]
    assert body["evidence"] == direct["evidence"]
    assert paths(body["_meta"]) == paths(direct["_meta"])
    assert body["_meta"]["fingerprints"] == direct["_meta"]["fingerprints"]
    assert body["_meta"]["actor"] == direct["_meta"]["actor"]
    request = body["_meta"]["request"]
    assert (request["request_id"], request["trace_id"]) == ("req-42", "trace-42")
    assert "Zephyr" not in answer.text
    # the query route falls back to the template without an LLM
    query = door.client.post(
        "/v1/graph/query", json={"anchor": "emea-sunset"}, headers=door.passport(STAFF)
    )
    assert query.status_code == 200, query.text
    assert query.json()["_meta"]["runtime"]["fallback_reason"] == "llm:not_configured"
    assert query.json()["answer"] == body["answer"]


def paths(value: Any, prefix: str = "") -> set[str]:
    """Every key path of a JSON value (list items share one path)."""
    found = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            path = f"{prefix}/{key}"
            found |= {path} | paths(inner, path)
    elif isinstance(value, list):
        for inner in value:
            found |= paths(inner, prefix + "[]")
    return found


@pytest.mark.parametrize("missing", REQUIRED_HEADERS)
def test_each_missing_header_is_refused_naming_it(door: Door, missing: str) -> None:
    headers = door.passport(STAFF)
    del headers[missing]
    answer = door.client.post("/v1/graph/ask", json={"anchor": "emea-sunset"}, headers=headers)
    assert 400 <= answer.status_code < 500
    problem = answer.json()
    assert problem["field"] == missing
    assert missing in problem["detail"]
    assert "Migrate EMEA" not in answer.text


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("X-User-Roles", "director"),
        ("X-User-Namespaces", "internal,confidential"),
        ("X-Domain-Scopes", "acme/*"),
        ("X-Edge-Allow", "CONTRADICTS"),
        ("X-Max-Hops", "2"),
        ("X-User-Id", "u-director"),
        ("X-Policy-Key", "sha256:" + "0" * 64),
        ("X-Policy-Version", "v0"),
    ],
)
def test_a_widening_header_is_forbidden(door: Door, header: str, value: str) -> None:
    headers = {**door.passport(STAFF), header: value}
    answer = door.client.post("/v1/graph/ask", json={"anchor": "emea-sunset"}, headers=headers)
    assert answer.status_code == 403, answer.text
    assert answer.json()["field"] == header
    assert answer.json()["code"] == "permission_denied"


def test_a_malformed_header_is_refused_naming_it(door: Door) -> None:
    headers = {**door.passport(STAFF), "X-Max-Hops": "x"}
    answer = door.client.post("/v1/graph/ask", json={"anchor": "emea-sunset"}, headers=headers)
    assert (answer.status_code, answer.json()["field"]) == (422, "X-Max-Hops")


def test_a_hidden_anchor_is_not_found_over_http(door: Door) -> None:
    for anchor in ("corp-divest", "no-such-decision"):
        answer = door.client.post(
            "/v1/graph/ask", json={"anchor": anchor}, headers=door.passport(STAFF)
        )
        assert answer.status_code == 404
        assert repr(anchor) in answer.json()["detail"]
        assert "rec_" not in answer.text


def test_traces_and_downloads_over_http(door: Door) -> None:
    body = door.client.post(
        "/v1/graph/ask", json={"anchor": "emea-sunset"}, headers=door.passport(STAFF)
    ).json()
    trace_id = body["trace_id"]
    mine = door.client.get(f"/v1/traces/{trace_id}", headers=door.auth(STAFF))
    assert mine.status_code == 200
    assert mine.json()["view"] == "asker"
    assert mine.json()["files"]["_meta.json"] == body["_meta"]
    assert door.client.get(f"/v1/traces/{trace_id}", headers=door.auth(MANAGER)).status_code == 404
    audit = door.client.get(
        f"/v1/traces/{trace_id}", headers={"Authorization": f"Bearer {door.keys['curator']}"}
    )
    assert audit.json()["view"] == "audit"
    href = body["_meta"]["downloads"]["artifacts"][0]["href"]
    download = door.client.get(href, headers=door.auth(STAFF))
    assert download.status_code == 200
    assert download.headers["content-type"] == "application/zip"
    assert f"{trace_id}-bundle_view.zip" in download.headers["content-disposition"]
    with zipfile.ZipFile(io.BytesIO(download.content)) as archive:
        assert "_meta.json" in archive.namelist()
    full = door.client.get(f"/v1/traces/{trace_id}/downloads/bundle_full", headers=door.auth(STAFF))
    assert full.status_code == 403
    assert "acl:role_missing" in full.json()["detail"]
    odd = door.client.get(f"/v1/traces/{trace_id}/downloads/bundle_x", headers=door.auth(STAFF))
    assert odd.status_code == 422
    # a director's full bundle
    asked = door.client.post(
        "/v1/graph/ask", json={"anchor": "corp-divest"}, headers=door.passport(DIRECTOR)
    ).json()
    full = door.client.get(
        f"/v1/traces/{asked['trace_id']}/downloads/bundle_full", headers=door.auth(DIRECTOR)
    )
    assert full.status_code == 200
    with zipfile.ZipFile(io.BytesIO(full.content)) as archive:
        assert "evidence_pre.json" in archive.namelist()


# ---- CLI -----------------------------------------------------------------------------


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    # build the click command once, not on every invoke
    command = typer.main.get_command(cli_app)
    monkeypatch.setattr(typer.testing, "_get_command", lambda _app: command)
    return CliRunner()


def run(runner: CliRunner, door: Door, *args: str, key: str, code: int = 0) -> str:
    argv = [*args, "--store", str(door.workspace.folder), "--key", key]
    result = runner.invoke(cli_app, argv)
    assert result.exit_code == code, (result.stdout, result.stderr)
    return result.stdout


def test_cli_ingest_twice_says_nothing_to_do(cli: CliRunner, door: Door, tmp_path: Path) -> None:
    folder = mini_graph(tmp_path / "again")
    # the door's store already holds the mini graph: nothing to do
    out = run(cli, door, "graph", "ingest", str(folder), key=door.keys["curator"])
    assert "nothing to do" in out
    # a graph of its own in a fresh store: written once, then nothing to do
    workspace = Workspace(tmp_path / "fresh" / ".cairn")
    curator = workspace.init().keys["curator"]
    argv = ["graph", "ingest", str(folder), "--store", str(workspace.folder), "--key", curator]
    first = cli.invoke(cli_app, [*argv, "--json"])
    assert first.exit_code == 0, first.stderr
    assert json.loads(first.stdout)["vertices_created"] == 8
    second = cli.invoke(cli_app, argv)
    assert second.exit_code == 0
    assert "nothing to do" in second.stdout
    # an agent's key is refused
    refused = run(cli, door, "graph", "ingest", str(folder), key=door.keys["agent"], code=4)
    assert refused == ""


def test_cli_why_prints_the_http_body(cli: CliRunner, door: Door) -> None:
    out = run(cli, door, "why", "emea-sunset", "--as", "staff", "--json",
              key=door.keys[DIRECTOR.id])  # fmt: skip
    body = json.loads(out)
    assert set(body) == BODY_KEYS
    http = door.client.post(
        "/v1/graph/ask", json={"anchor": "emea-sunset"}, headers=door.passport(DIRECTOR, "staff")
    ).json()
    assert set(body["_meta"]) == set(http["_meta"])
    assert paths(body) == paths(http)
    assert body["_meta"]["actor"]["role"] == "staff"
    assert body["evidence"] == http["evidence"]
    assert body["_meta"]["fingerprints"] == http["_meta"]["fingerprints"]
    # a role above the key's own is refused
    run(cli, door, "why", "emea-sunset", "--as", "director", "--json",
        key=door.keys[STAFF.id], code=4)  # fmt: skip
    # plain output: the answer and a summary line
    plain = run(cli, door, "why", "emea-sunset", key=door.keys[STAFF.id])
    assert "Migrate EMEA appliance customers" in plain
    assert "role staff" in plain


def test_cli_trace_show_and_download(cli: CliRunner, door: Door, tmp_path: Path) -> None:
    staff = door.keys[STAFF.id]
    body = json.loads(run(cli, door, "why", "emea-sunset", "--json", key=staff))
    trace_id = body["trace_id"]
    shown = json.loads(run(cli, door, "trace", "show", trace_id, "--json", key=staff))
    assert shown["view"] == "asker"
    assert shown["files"]["_meta.json"]["policy_trace"]["withheld_ids"] == ["withheld-1"]
    plain = run(cli, door, "trace", "show", trace_id, key=staff)
    assert "acl:sensitivity_exceeded" in plain
    target = tmp_path / "view.zip"
    run(cli, door, "trace", "download", trace_id, "bundle_view", "-o", str(target), key=staff)
    with zipfile.ZipFile(target) as archive:
        assert "envelope.json" in archive.namelist()
    run(cli, door, "trace", "download", trace_id, "bundle_full", "-o", str(tmp_path / "f.zip"),
        key=staff, code=4)  # fmt: skip
    assert not (tmp_path / "f.zip").exists()
    run(cli, door, "trace", "show", trace_id, key=door.keys[MANAGER.id], code=3)
