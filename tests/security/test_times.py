"""Times come with a time zone or not at all, on every door; old stores are repaired.

The attack this closes: a ``valid_from`` without a zone (or a bare integer) was accepted by
HTTP, MCP and the CLI, and every later read of the record failed with a 500 ("can't compare
offset-naive and offset-aware datetimes").
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC
from pathlib import Path
from typing import Any

import psycopg
import pytest
from mcp import Client
from typer.testing import CliRunner

from cairn.doors.cli import app
from cairn.doors.mcp_server import build_mcp_server
from cairn.errors import InvalidInput
from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.memory import Memory
from cairn.model import ContentPatch, RecordQuery, VersionPin
from cairn.retrieval.context import ReadContextRequest
from cairn.store.pg_migrations import latest_version
from cairn.store.postgres import PostgresStore
from cairn.store.sqlite import SqliteStore
from tests.conftest import content
from tests.factories import CURATOR
from tests.pg import PgCluster
from tests.security.conftest import Served
from tests.store.legacy import rewind_edges_postgres, rewind_edges_sqlite

NAIVE = "2026-01-01T08:30:00"
VALID = "2026-01-01T08:30:00Z"


def _reads_work(memory: Memory, record_id: str) -> None:
    """Every read that compared times: get, list, validate, retrieve, read_context."""
    view = memory.get(record_id, principal=CURATOR)
    assert view.version.content.valid_from is not None
    assert view.version.content.valid_from.utcoffset() is not None
    assert view.version.content.valid_from.astimezone(UTC).hour == 8
    assert memory.list_records(RecordQuery(), principal=CURATOR)
    assert memory.validate([record_id], principal=CURATOR).records[0].valid
    assert memory.retrieve("zones", principal=CURATOR, mode="keyword").items
    request = ReadContextRequest(
        scope="acme/app", query="zones", selector=VersionPin.head(), mode="keyword"
    )
    assert memory.read_context(request, principal=CURATOR).items


def _write_record_and_pending_update(memory: Memory) -> tuple[str, str]:
    outcome = memory.remember(
        content("Time zones matter", valid_from=VALID, kind="belief"), principal=CURATOR
    )
    assert outcome.record is not None
    from cairn.model import Principal, PrincipalKind

    agent = Principal(id="bot", kind=PrincipalKind.AGENT, roles=("agent",), scopes=("*",))
    queued = memory.update(
        outcome.record.id, ContentPatch(valid_to="2030-01-01T00:00:00Z"), principal=agent
    )
    return outcome.record.id, queued.proposal.id


def test_a_sqlite_store_holding_naive_times_is_repaired_on_open(tmp_path: Path) -> None:
    path = tmp_path / "cairn.db"
    memory = Memory(SqliteStore(path), parse_policy(DEFAULT_POLICY_YAML), embedder=None)
    record_id, proposal_id = _write_record_and_pending_update(memory)
    memory.close()
    # Put the rows back the way older versions of cairn stored a naive time.
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("DROP TRIGGER versions_no_update")
        conn.execute(
            "UPDATE versions SET content = json_set(content, '$.valid_from', ?) "
            "WHERE record_id = ?",
            (NAIVE, record_id),
        )
        conn.execute(
            "UPDATE proposals SET change = json_set(change, '$.patch.valid_to', ?) WHERE id = ?",
            ("2030-01-01T00:00:00", proposal_id),
        )
        conn.execute(
            "CREATE TRIGGER versions_no_update BEFORE UPDATE ON versions "
            "BEGIN SELECT RAISE(ABORT, 'versions are append-only'); END"
        )
        conn.execute("DELETE FROM schema_migrations WHERE version >= 4")
        rewind_edges_sqlite(conn)
    conn.close()

    repaired_store = SqliteStore(path)
    repaired = Memory(repaired_store, parse_policy(DEFAULT_POLICY_YAML), embedder=None)
    raw = sqlite3.connect(path)
    stored = raw.execute(
        "SELECT json_extract(content, '$.valid_from') FROM versions WHERE record_id = ?",
        (record_id,),
    ).fetchone()[0]
    pending = raw.execute(
        "SELECT json_extract(change, '$.patch.valid_to') FROM proposals WHERE id = ?",
        (proposal_id,),
    ).fetchone()[0]
    raw.close()
    assert (stored, pending) == (NAIVE + "Z", "2030-01-01T00:00:00Z")  # rewritten on disk
    try:
        _reads_work(repaired, record_id)
        patch = repaired.proposal(proposal_id, principal=CURATOR).change
        assert json.loads(patch.model_dump_json())["patch"]["valid_to"] == "2030-01-01T00:00:00Z"
        # the trigger is back: history stays append-only after the repair
        with pytest.raises(Exception, match="append-only"):
            repaired_store._write_txn().__enter__().execute("UPDATE versions SET content = '{}'")
    finally:
        repaired.close()


def test_a_postgres_store_holding_naive_times_is_repaired_by_migrate(
    pg_cluster: PgCluster,
) -> None:
    url = pg_cluster.new_database()
    try:
        with PostgresStore(url) as store:
            memory = Memory(store, parse_policy(DEFAULT_POLICY_YAML), embedder=None)
            record_id, proposal_id = _write_record_and_pending_update(memory)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ALTER TABLE cairn.versions DISABLE TRIGGER versions_append_only")
            conn.execute(
                "UPDATE cairn.versions SET content = jsonb_set(content, '{valid_from}', %s) "
                "WHERE record_id = %s",
                (json.dumps(NAIVE), record_id),
            )
            conn.execute("ALTER TABLE cairn.versions ENABLE TRIGGER versions_append_only")
            conn.execute(
                "UPDATE cairn.proposals SET change = "
                "jsonb_set(change, '{patch,valid_to}', '\"2030-01-01T00:00:00\"') WHERE id = %s",
                (proposal_id,),
            )
            conn.execute("DELETE FROM cairn.schema_migrations WHERE version >= 4")
            rewind_edges_postgres(conn)
        with PostgresStore(url) as store:
            assert store.schema_version == latest_version()
        with psycopg.connect(url) as conn:
            stored = conn.execute(
                "SELECT content ->> 'valid_from' FROM cairn.versions WHERE record_id = %s",
                (record_id,),
            ).fetchone()
            assert stored == (NAIVE + "Z",)  # rewritten on disk
        with PostgresStore(url) as store:
            memory = Memory(store, parse_policy(DEFAULT_POLICY_YAML), embedder=None)
            _reads_work(memory, record_id)
            change = memory.proposal(proposal_id, principal=CURATOR).change
            assert json.loads(change.model_dump_json())["patch"]["valid_to"].endswith("Z")
    finally:
        pg_cluster.drop_database(url)


@pytest.mark.parametrize("value", [NAIVE, "2026-01-01", 1_700_000_000, 1.5, True])
def test_the_http_door_refuses_a_time_without_a_zone(served: Served, value: Any) -> None:
    body = {"content": {"kind": "fact", "scope": "acme/t", "title": "t", "valid_from": value}}
    before = served.client.get("/v1/status", headers=served.as_("curator")).json()
    response = served.client.post("/v1/records", json=body, headers=served.as_("curator"))
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["code"] == "invalid_input" and "valid_from" in problem["detail"]
    assert "pydantic" not in response.text
    assert served.client.get("/v1/status", headers=served.as_("curator")).json() == before
    listed = served.client.get(
        "/v1/records", params={"created_after": NAIVE}, headers=served.as_("curator")
    )
    assert listed.status_code == 422


# Times no filter may take: without a zone, a number (also as a string), no time at all, or
# a time that falls outside the years 1 to 9999 once it is turned into UTC.
NOT_TIMES = [NAIVE, "2026-01-01", "1700000000", "1.5", "-1", "1e9", "yesterday", "",
             "9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59"]  # fmt: skip
QUERY_TIMES = [("/v1/records", "created_after"), ("/v1/records", "created_before"),
               ("/v1/audit", "since")]  # fmt: skip


@pytest.mark.parametrize("value", NOT_TIMES)
@pytest.mark.parametrize(("path", "name"), QUERY_TIMES)
def test_a_time_in_a_query_string_is_an_aware_rfc_3339_time_or_refused(
    served: Served, path: str, name: str, value: str
) -> None:
    response = served.client.get(path, params={name: value}, headers=served.as_("curator"))
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["code"] == "invalid_input" and name in problem["detail"], problem
    assert "pydantic" not in response.text


@pytest.mark.parametrize(("path", "name"), QUERY_TIMES)
def test_a_time_with_a_zone_in_a_query_string_is_taken(
    served: Served, path: str, name: str
) -> None:
    for value in (VALID, "2026-01-01T10:30:00+02:00", "9999-12-31T23:59:59Z"):
        response = served.client.get(path, params={name: value}, headers=served.as_("curator"))
        assert response.status_code == 200, (value, response.text)


@pytest.mark.parametrize("value", ["9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59"])
def test_a_time_outside_the_years_utc_holds_is_refused_by_the_kernel(
    memory: Memory, value: str
) -> None:
    with pytest.raises(ValueError, match="out of range"):
        content("Out of range", valid_from=value)
    with pytest.raises(ValueError, match="out of range"):
        RecordQuery.model_validate({"created_after": value})
    assert memory.status(principal=CURATOR)["records"] == 0


@pytest.mark.parametrize("value", ["9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59"])
def test_a_time_outside_the_years_utc_holds_is_refused_in_a_body(
    served: Served, value: str
) -> None:
    before = served.client.get("/v1/status", headers=served.as_("curator")).json()
    for path, body in (
        ("/v1/records", {"content": {"kind": "fact", "scope": "acme/t", "title": "t",
                                     "valid_from": value}}),
        ("/v1/search", {"query": "zones", "mode": "keyword", "created_after": value}),
    ):  # fmt: skip
        response = served.client.post(path, json=body, headers=served.as_("curator"))
        assert response.status_code == 422, (path, response.text)
        assert "out of range" in response.json()["detail"], response.text
    assert served.client.get("/v1/status", headers=served.as_("curator")).json() == before


@pytest.mark.anyio
async def test_the_mcp_door_refuses_a_time_without_a_zone(memory: Memory) -> None:
    server = build_mcp_server(memory, lambda _ctx: CURATOR)
    async with Client(server) as client:
        result = await client.call_tool(
            "remember",
            {"kind": "fact", "body": "naive", "scope": "acme/t", "valid_from": NAIVE},
        )
    assert result.is_error and "time zone" in str(result.content)
    assert memory.status(principal=CURATOR)["records"] == 0


def test_the_cli_refuses_a_time_without_a_zone(tmp_path: Path) -> None:
    runner = CliRunner()
    folder = tmp_path / ".cairn"
    keys = json.loads(runner.invoke(app, ["init", "--store", str(folder), "--json"]).stdout)
    base = ["remember", "--kind", "fact", "--scope", "acme/t", "--title", "t",
            "--store", str(folder), "--key", keys["keys"]["curator"]]  # fmt: skip
    refused = runner.invoke(app, [*base, "--valid-from", "2026-01-01"])
    assert refused.exit_code == InvalidInput.exit_code
    assert "time zone" in refused.stderr
    accepted = runner.invoke(app, [*base, "--valid-from", "2026-01-01T00:00:00+02:00"])
    assert accepted.exit_code == 0, accepted.output


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
