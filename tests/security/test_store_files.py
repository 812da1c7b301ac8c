"""The store folder is its owner's alone, written atomically; broken config never leaks.

The attacks this closes: ``keys create`` and ``keys revoke`` rewrote ``principals.yaml`` as
0644 and the database was 0644 (readable by every user of the machine); a broken
``principals.yaml`` answered 500 with lines of the file in the response.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from cairn.doors.cli import app
from cairn.doors.server import build_server_app
from cairn.errors import PolicyError
from cairn.private_files import tighten
from cairn.workspace import Workspace

runner = CliRunner()
SECRET_LINE = "    - {id: key_x, sha256: 'zz-not-a-hash-zz', created_at: 2026-01-01T00:00:00Z"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _cli(folder: Path, *args: str) -> str:
    result = runner.invoke(app, [*args, "--store", str(folder), "--json"])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_every_file_of_a_new_store_is_private(tmp_path: Path) -> None:
    folder = tmp_path / ".cairn"
    keys = json.loads(_cli(folder, "init"))["keys"]
    runner.invoke(
        app,
        ["remember", "--kind", "episode", "--scope", "acme/app", "--title", "written",
         "--store", str(folder), "--key", keys["curator"]],
    )  # fmt: skip
    assert _mode(folder) == 0o700
    names = sorted(p.name for p in folder.iterdir())
    assert {"cairn.db", "policy.yaml", "principals.yaml"} <= set(names)
    for path in folder.iterdir():
        assert _mode(path) == 0o600, (path.name, oct(_mode(path)))


def test_keys_create_and_revoke_keep_the_principals_file_private(tmp_path: Path) -> None:
    folder = tmp_path / ".cairn"
    _cli(folder, "init")
    principals = folder / "principals.yaml"
    made = runner.invoke(app, ["--store", str(folder), "--json", "keys", "create", "agent"])
    created = json.loads(made.stdout)
    assert _mode(principals) == 0o600
    revoke = runner.invoke(app, ["--store", str(folder), "keys", "revoke", created["id"]])
    assert revoke.exit_code == 0, revoke.output
    assert _mode(principals) == 0o600
    assert created["key"] not in principals.read_text()
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")], "a temporary was left"


def test_opening_an_older_store_makes_it_private(tmp_path: Path) -> None:
    folder = tmp_path / ".cairn"
    Workspace(folder).init()
    folder.chmod(0o755)
    for path in folder.iterdir():
        path.chmod(0o644)
    Workspace(folder).open_memory(embedder=None).close()
    assert _mode(folder) == 0o700
    assert all(_mode(p) == 0o600 for p in folder.iterdir())
    elsewhere = tmp_path / "link-target.txt"
    elsewhere.write_text("not the store's")
    elsewhere.chmod(0o644)
    (folder / "link").symlink_to(elsewhere)
    tighten(folder)
    assert _mode(elsewhere) == 0o644, "a link's target outside the store is left alone"


def _break(folder: Path) -> None:
    text = (folder / "principals.yaml").read_text()
    # an operator's bad edit: a line whose indentation breaks the YAML
    (folder / "principals.yaml").write_text(text + SECRET_LINE + "\n  : [\n")


def test_a_broken_principals_file_stops_start_up_naming_file_and_line(tmp_path: Path) -> None:
    folder = tmp_path / ".cairn"
    Workspace(folder).init()
    _break(folder)
    try:
        build_server_app(Workspace(folder), embedder="static")
    except PolicyError as refused:
        message = refused.message
    else:  # pragma: no cover - the assertion below reports it
        message = ""
    assert "principals.yaml" in message and "line" in message
    assert "zz-not-a-hash-zz" not in message, "the error quoted the file"
    served = runner.invoke(app, ["--store", str(folder), "serve"])
    assert served.exit_code != 0 and "line" in served.output
    assert "zz-not-a-hash-zz" not in served.output


def _not_utf8(folder: Path) -> None:
    # an operator's editor saved it as Latin-1 (it answered 500 internal_error)
    path = folder / "principals.yaml"
    path.write_bytes(path.read_bytes() + SECRET_LINE.encode() + b"\n# caf\xe9\n")


@pytest.mark.parametrize("spoil", [_break, _not_utf8], ids=["bad-yaml", "not-utf8"])
def test_a_principals_file_broken_while_serving_is_never_quoted(
    tmp_path: Path, spoil: Callable[[Path], None]
) -> None:
    folder = tmp_path / ".cairn"
    keys = Workspace(folder).init().keys
    application = build_server_app(Workspace(folder), embedder="static")
    with TestClient(application, raise_server_exceptions=False) as client:
        headers = {"Authorization": f"Bearer {keys['agent']}"}
        assert client.get("/v1/status", headers=headers).status_code == 200
        spoil(folder)
        for method, path in (("GET", "/v1/status"), ("POST", "/mcp"), ("POST", "/")):
            response = client.request(method, path, headers=headers, json={})
            assert response.status_code == 503, (path, response.status_code, response.text)
            assert response.json()["code"] == "policy_error"
            assert "zz-not-a-hash-zz" not in response.text
            assert "principals.yaml" not in response.text and str(folder) not in response.text
        health = client.get("/health")
        assert health.status_code == 503 and health.json() == {
            "status": "unavailable",
            "ready": False,
        }
    assert os.path.exists(folder / "principals.yaml")
