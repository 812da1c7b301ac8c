"""`cairn serve` never listens on every interface unasked: an empty host (``CAIRN_HOST=``,
``--host ''``, ``host = ""`` in config.toml) meant 0.0.0.0 to the server, behind a banner
that said ``http://:8765``. It is refused; every interface is ``--host 0.0.0.0``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cairn.doors import server
from cairn.doors.cli import app
from cairn.workspace import Workspace

runner = CliRunner(env={"CAIRN_EMBEDDER": "static", "CAIRN_STORE": "", "CAIRN_HOST": None})


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The hosts `serve` would have listened on (nothing is started)."""
    hosts: list[str] = []

    def fake_serve(workspace: Workspace, **options: Any) -> None:
        hosts.append(options["host"])

    monkeypatch.setattr(server, "serve", fake_serve)
    monkeypatch.chdir(tmp_path)
    Workspace(tmp_path / ".cairn").init()
    return hosts


@pytest.mark.parametrize(
    ("argv", "env", "config"),
    [
        (["--host", ""], {}, ""),
        (["--host", "  "], {}, ""),
        ([], {"CAIRN_HOST": ""}, ""),
        ([], {}, 'host = ""\n'),
    ],
    ids=["--host ''", "--host blank", "CAIRN_HOST=", "config.toml"],
)
def test_an_empty_host_is_refused(
    served: list[str], argv: list[str], env: dict[str, str], config: str
) -> None:
    if config:
        Path(".cairn/config.toml").write_text(config, encoding="utf-8")
    result = runner.invoke(app, ["serve", "--port", "18934", *argv], env=env)
    assert result.exit_code == 2, (result.output, result.exception)
    assert result.stderr.startswith("error (invalid_input) [host]") and "127.0.0.1" in result.stderr
    assert "http://:" not in result.output
    assert served == []


def test_a_named_host_is_served(served: list[str]) -> None:
    for host in ("127.0.0.1", "0.0.0.0", "::1"):
        result = runner.invoke(app, ["serve", "--host", host])
        assert result.exit_code == 0, (result.output, result.exception)
    assert served == ["127.0.0.1", "0.0.0.0", "::1"]
