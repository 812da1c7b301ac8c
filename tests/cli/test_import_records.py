"""`cairn import FILE.jsonl` stores records in batches through the gate; `cairn import` of an
export file still restores it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cairn.doors.cli import app
from cairn.limits import MAX_METADATA_DEPTH, MAX_REQUEST_DEPTH
from cairn.store.transfer import FORMAT, FORMAT_VERSION, MAX_ROW_DEPTH
from cairn.workspace import Workspace

runner = CliRunner()


def _line(i: int, **fields: object) -> str:
    content = {"kind": "fact", "scope": "acme/app", "title": f"Imported {i}", "body": f"Body {i}."}
    return json.dumps(content | fields)


def test_import_jsonl_stores_records_and_reports(tmp_path: Path) -> None:
    store = tmp_path / ".cairn"
    key = Workspace(store).init().keys["curator"]
    file = tmp_path / "records.jsonl"
    file.write_text("\n".join(_line(i) for i in range(2500)) + "\n", encoding="utf-8")
    missing = runner.invoke(app, ["import", str(file), "--store", str(store)], env={})
    assert missing.exit_code != 0  # a key is required to store records
    done = runner.invoke(app, ["import", str(file), "--store", str(store), "--key", key, "--json"])
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    assert report["approved"] == 2500 and report["batches"] == 3
    status = runner.invoke(app, ["status", "--store", str(store), "--key", key, "--json"])
    counts = json.loads(status.output)["counts"]
    assert counts["records"] == 2500
    assert counts["audit"] == 3, "one audit entry per batch of 1,000"


def test_a_bad_line_is_named_and_nothing_is_stored(tmp_path: Path) -> None:
    store = tmp_path / ".cairn"
    key = Workspace(store).init().keys["curator"]
    file = tmp_path / "records.jsonl"
    lines = [_line(1), _line(2), '{"kind": "fact", "scope": "acme/app"}', _line(4)]
    file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = runner.invoke(app, ["import", str(file), "--store", str(store), "--key", key])
    assert done.exit_code == 2, done.output
    assert "line 3" in done.output and "title" in done.output
    status = runner.invoke(app, ["status", "--store", str(store), "--key", key, "--json"])
    assert json.loads(status.output)["counts"]["records"] == 0


def _nested(depth: int) -> dict[str, object]:
    value: dict[str, object] = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"k": value}
    return value


# JSON nested far past where Python's parser gives up (about 1,000 levels).
ABYSS = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        (_line(0, metadata=_nested(MAX_METADATA_DEPTH + 2)), f"{MAX_METADATA_DEPTH} levels"),
        (ABYSS, f"is nested more than {MAX_REQUEST_DEPTH} levels"),
    ],
    ids=["metadata", "abyss"],
)
@pytest.mark.parametrize("at", [1, 2])
def test_a_line_nested_too_deep_is_named_with_the_limit_and_nothing_is_stored(
    tmp_path: Path, bad: str, said: str, at: int
) -> None:
    store = tmp_path / ".cairn"
    key = Workspace(store).init().keys["curator"]
    lines = [_line(1), _line(2)]
    lines.insert(at - 1, bad)
    file = tmp_path / "records.jsonl"
    file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = runner.invoke(app, ["import", str(file), "--store", str(store), "--key", key])
    assert done.exit_code == 2, (done.output, done.exception)
    assert f"line {at}" in done.stderr and said in done.stderr, done.stderr
    status = runner.invoke(app, ["status", "--store", str(store), "--key", key, "--json"])
    assert json.loads(status.stdout)["counts"]["records"] == 0


def test_an_export_row_nested_too_deep_is_named_with_the_limit(tmp_path: Path) -> None:
    store = tmp_path / ".cairn"
    Workspace(store).init()
    header = json.dumps({"format": FORMAT, "version": FORMAT_VERSION})
    file = tmp_path / "export.jsonl"
    file.write_text(f"{header}\n{ABYSS}\n", encoding="utf-8")
    done = runner.invoke(app, ["import", str(file), "--store", str(store)])
    assert done.exit_code == 2, (done.output, done.exception)
    assert f"line 2 is nested more than {MAX_ROW_DEPTH} levels" in done.stderr, done.stderr
