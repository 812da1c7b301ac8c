"""A policy or principals file that is not UTF-8 is a broken file like any other: the CLI
says so in one line (no traceback) and a running server answers ``503 policy_error``
(``test_store_files``), naming neither the file nor its content."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cairn.doors.cli import app
from cairn.errors import PolicyError
from cairn.governance.policy import read_config_text
from cairn.small_files import MAX_SETTINGS_FILE_BYTES as MAX_CONFIG_BYTES
from cairn.workspace import Workspace
from tests.blocking import within_seconds

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


@pytest.mark.parametrize("name", ["principals.yaml", "policy.yaml"])
@pytest.mark.parametrize("swap", ["fifo", "dev-zero", "too-large"])
def test_a_policy_file_that_is_no_file_or_too_large_is_refused_at_once(
    tmp_path: Path, name: str, swap: str
) -> None:
    """A FIFO put in its place would hang every request that reads it, ``/dev/zero`` (or a
    file of gigabytes) fill the memory: each is a one-line policy error, at once."""
    folder = tmp_path / ".cairn"
    keys = Workspace(folder).init().keys
    target = folder / name
    target.unlink()
    if swap == "fifo":
        os.mkfifo(target)  # no writer: opening it for reading would wait for ever
    elif swap == "dev-zero":
        target.symlink_to("/dev/zero")
    else:
        target.write_bytes(b"# padding\n" * (MAX_CONFIG_BYTES // 10 + 1))
    said = {"fifo": "not a regular file", "dev-zero": "not a regular file"}.get(
        swap, f"over the limit of {MAX_CONFIG_BYTES:,} bytes"
    )
    with pytest.raises(PolicyError, match=said):
        within_seconds(10, target, lambda: read_config_text(target))
    result = runner.invoke(app, ["list", "--store", str(folder), "--key", keys["curator"]])
    assert result.exit_code == PolicyError.exit_code, (result.output, result.exception)
    assert result.stderr.startswith("error (policy_error)") and said in result.stderr
