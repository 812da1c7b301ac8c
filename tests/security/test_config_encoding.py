"""A policy or principals file that is not UTF-8 is a broken file like any other: the CLI
says so in one line (no traceback) and a running server answers ``503 policy_error``
(``test_store_files``), naming neither the file nor its content."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from cairn.doors.cli import app
from cairn.errors import PolicyError
from cairn.workspace import Workspace

runner = CliRunner(env={"CAIRN_EMBEDDER": "static", "CAIRN_STORE": "", "CAIRN_API_KEY": ""})


def _spoil(path: Path) -> None:
    """An operator's editor saved it as Latin-1: one byte that is not UTF-8."""
    path.write_bytes(path.read_bytes() + b"# caf\xe9\n")


@pytest.mark.parametrize("name", ["principals.yaml", "policy.yaml"])
def test_the_cli_says_the_file_is_not_utf8(tmp_path: Path, name: str) -> None:
    folder = tmp_path / ".cairn"
    keys = Workspace(folder).init().keys
    _spoil(folder / name)
    result = runner.invoke(app, ["list", "--store", str(folder), "--key", keys["curator"]])
    assert result.exit_code == PolicyError.exit_code, (result.output, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.stderr.startswith("error (policy_error)") and "not UTF-8" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
