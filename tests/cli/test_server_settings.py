"""`cairn serve` and `cairn mcp` choose their embedder the same way: flag (serve only) >
CAIRN_EMBEDDER > <store>/config.toml > minilm. The servers themselves are replaced by
recorders, so each case checks what the command would have run, not a running server."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cairn.doors import mcp_server, server
from cairn.doors.cli import app
from cairn.workspace import Workspace

runner = CliRunner()


class _Memory:
    def start_indexing(self) -> None:
        return None

    def close(self) -> None:
        return None


class _McpServer:
    def run(self, transport: str) -> None:
        assert transport == "stdio"


@pytest.fixture
def chosen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What `serve` and `mcp` were started with, recorded instead of starting them."""
    seen: dict[str, Any] = {}

    def fake_serve(workspace: Workspace, **options: Any) -> None:
        seen["serve"] = options["embedder"]
        seen["serve_store"] = workspace.folder

    def fake_open_memory(self: Workspace, *, embedder: str | None = "unset") -> _Memory:
        seen["mcp"] = embedder
        seen["mcp_store"] = self.folder
        return _Memory()

    monkeypatch.setattr(server, "serve", fake_serve)
    monkeypatch.setattr(Workspace, "open_memory", fake_open_memory)
    monkeypatch.setattr(mcp_server, "build_mcp_server", lambda memory, who: _McpServer())
    monkeypatch.delenv("CAIRN_EMBEDDER", raising=False)
    monkeypatch.delenv("CAIRN_STORE", raising=False)
    monkeypatch.delenv("CAIRN_DB", raising=False)
    return seen


def _start_both(folder: Path, key: str, *serve_flags: str) -> None:
    served = runner.invoke(app, ["--store", str(folder), "serve", *serve_flags])
    assert served.exit_code == 0, served.output
    mcp = runner.invoke(app, ["--store", str(folder), "mcp", "--key", key])
    assert mcp.exit_code == 0, mcp.output


def test_serve_and_mcp_take_the_embedder_from_the_same_layers(
    tmp_path: Path, chosen: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / ".cairn"
    made = runner.invoke(app, ["init", "--store", str(folder), "--json"])
    key = json.loads(made.stdout)["keys"]["agent"]

    _start_both(folder, key)
    assert (chosen["serve"], chosen["mcp"]) == ("minilm", "minilm")  # the default
    assert chosen["serve_store"] == chosen["mcp_store"] == folder

    (folder / "config.toml").write_text('embedder = "static"\n')
    _start_both(folder, key)
    assert (chosen["serve"], chosen["mcp"]) == ("static", "static")  # the store's file

    monkeypatch.setenv("CAIRN_EMBEDDER", "openai:http://127.0.0.1:9/v1#e5")
    _start_both(folder, key)
    expected = "openai:http://127.0.0.1:9/v1#e5"
    assert (chosen["serve"], chosen["mcp"]) == (expected, expected)  # environment over file

    _start_both(folder, key, "--embedder", "static")
    assert chosen["serve"] == "static"  # serve's flag over the environment


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--log-level", "bogus"], "bogus"),
        (["--embedder", "bogus"], "unknown embedder spec 'bogus'"),
        (["--embedder", "openai:ftp://x"], "expected openai:http(s)"),
        (["--port", "9100", "--grpc-port", "9100"], "--grpc-port must differ from --port"),
    ],
)
def test_serve_refuses_bad_settings_before_it_starts(
    tmp_path: Path, chosen: dict[str, Any], flags: list[str], said: str
) -> None:
    """A bad flag is one line and exit code 2, not a traceback once the server has begun."""
    folder = tmp_path / ".cairn"
    runner.invoke(app, ["init", "--store", str(folder), "--json"])
    served = runner.invoke(app, ["--store", str(folder), "serve", *flags])
    assert served.exit_code == 2, (served.output, served.exception)
    assert said in served.output
    assert "serve" not in chosen  # nothing was started


def test_a_store_file_that_is_not_a_database_is_a_store_error(tmp_path: Path) -> None:
    folder = tmp_path / ".cairn"
    made = runner.invoke(app, ["init", "--store", str(folder), "--json"])
    key = json.loads(made.stdout)["keys"]["curator"]
    (folder / "cairn.db").write_text('{"format": "cairn-export"}\n' * 200)
    for wal in folder.glob("cairn.db-*"):
        wal.unlink()
    said = runner.invoke(app, ["--store", str(folder), "--key", key, "status"])
    assert said.exit_code == 6, (said.output, said.exception)
    assert "not a readable SQLite database" in said.output


def test_serve_on_a_port_another_server_holds_says_so(tmp_path: Path) -> None:
    folder = tmp_path / ".cairn"
    runner.invoke(app, ["init", "--store", str(folder), "--json"])
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        served = runner.invoke(
            app, ["--store", str(folder), "serve", "--port", str(port), "--embedder", "static"]
        )
    assert served.exit_code == 2, (served.output, served.exception)
    assert f"cannot listen on http://127.0.0.1:{port}: the address is in use" in served.output
