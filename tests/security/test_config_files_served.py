"""A server reads the principals file on every request: one swapped for a FIFO would hang
every request, one of gigabytes fill the memory. Each is a broken file like any other, a
``503 policy_error`` at once, and the server is well again when the file is.
(``read_config_text`` itself, and the CLI, are in ``test_config_encoding``.)"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from cairn.doors.server import build_server_app
from cairn.small_files import MAX_SETTINGS_FILE_BYTES as MAX_CONFIG_BYTES
from cairn.workspace import Workspace
from tests.blocking import within_seconds


@pytest.mark.parametrize("swap", ["fifo", "too-large"])
def test_a_principals_file_swapped_while_serving_is_a_policy_error_at_once(
    tmp_path: Path, swap: str
) -> None:
    folder = tmp_path / ".cairn"
    keys = Workspace(folder).init().keys
    principals = folder / "principals.yaml"
    kept = principals.read_bytes()
    application = build_server_app(Workspace(folder), embedder="static")
    with TestClient(application, raise_server_exceptions=False) as client:
        headers = {"Authorization": f"Bearer {keys['agent']}"}
        assert client.get("/v1/status", headers=headers).status_code == 200
        principals.unlink()
        if swap == "fifo":
            os.mkfifo(principals)  # no writer: a blocking open would wait for ever
        else:
            principals.write_bytes(kept + b"#" * MAX_CONFIG_BYTES)
        response = within_seconds(10, principals, lambda: client.get("/v1/status", headers=headers))
        assert response.status_code == 503, response.text
        assert response.json()["code"] == "policy_error"
        assert "principals.yaml" not in response.text and str(folder) not in response.text
        principals.unlink()
        principals.write_bytes(kept)
        assert client.get("/v1/status", headers=headers).status_code == 200
