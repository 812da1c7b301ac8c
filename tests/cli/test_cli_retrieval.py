"""CLI read commands: ingest, index, search, context, validate, research."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from cairn.doors.cli import app
from tests.cli.test_cli import Cli

runner = CliRunner(env={"CAIRN_EMBEDDER": "static"})


def test_ingest_index_search_context_validate_research(tmp_path: Path) -> None:
    cli = Cli(tmp_path / ".cairn")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "testing.md").write_text("# Testing SOP\n\nRun `make test` for phase 1 tests.\n")
    (docs / "deploy.md").write_text("# Deploys\n\nWe deploy on Tuesdays.\n")
    key = cli.keys["curator"]

    def run(*args: str, code: int = 0) -> dict:  # type: ignore[type-arg]
        result = runner.invoke(app, [*args, "--store", str(cli.folder), "--key", key, "--json"])
        assert result.exit_code == code, (result.stdout, result.stderr)
        return json.loads(result.stdout) if result.stdout.strip() else {}

    created = run("ingest", str(docs / "*.md"), "--scope", "acme/app")
    assert len(created["created"]) == 2
    assert run("ingest", str(docs), "--scope", "acme/app")["unchanged"] != []
    assert run("status")["counts"]["vector_lag"] == 2
    assert run("reindex")["embedded"] == 2
    testing_id = next(
        r["id"] for r in run("list", "--kind", "document") if r["content"]["title"] == "Testing SOP"
    )
    found = run("search", "how do I run the tests", "--k", "1")
    (item,) = found["items"]
    assert (item["record_id"], item["title"]) == (testing_id, "Testing SOP")
    citation = item["citations"][0]
    assert (citation["record_id"], citation["version_id"], citation["chunk_key"]) == (
        testing_id,
        item["version_id"],
        "testing-sop",
    )
    assert run("search", "tuesday", "--mode", "keyword")["items"][0]["title"] == "Deploys"
    bad = runner.invoke(
        app, ["search", "x", "--mode", "fuzzy", "--store", str(cli.folder), "--key", key]
    )
    assert bad.exit_code == 2 and "mode" in bad.stderr

    empty = run("context", "tests", "--scope", "acme/app")
    assert empty["items"] == [] and "nothing is published" in empty["warnings"][0]
    run("publish", "--scope", "acme/app")
    context = run("context", "tests", "--scope", "acme/app")
    assert context["selector_used"]["kind"] == "published" and context["items"]

    record_id = context["items"][0]["record_id"]
    assert run("validate", record_id)["records"][0]["valid"] is True
    assert run("validate", "rec_missing", code=1)["records"][0]["problems"] == ["not_found"]
    answer = run("research", "how do we deploy?")
    assert answer["items"][0]["title"] == "Deploys"
    for item in answer["items"]:
        assert f"cite ({item['record_id']}, {item['version_id']})" in answer["summary"]
