"""Two ``cairn serve`` processes on one PostgreSQL database behave as one server: what one
is told, the other knows (tasks, proposals, decisions), because neither keeps state of its
own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import psycopg

from cairn.workspace import Workspace
from tests.doors.conftest import free_port, stop_server, wait_ready
from tests.pg import PgCluster

SERVE_ON = (
    "import sys; from pathlib import Path; from cairn.workspace import Workspace; "
    "from cairn.doors.server import serve; "
    "serve(Workspace(Path(sys.argv[1]), db=sys.argv[3]), port=int(sys.argv[2]), "
    "log_level='info', embedder='static')"
)


def _postgres_url(conninfo: str) -> str:
    info = psycopg.conninfo.conninfo_to_dict(conninfo)
    return (
        f"postgresql://{quote(str(info['user']))}@/{quote(str(info['dbname']))}"
        f"?host={quote(str(info['host']))}"
    )


def _serve(folder: Path, db: str, log: Path) -> tuple[str, subprocess.Popen[bytes]]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-c", SERVE_ON, str(folder), str(port), db],
        stdout=subprocess.DEVNULL,
        stderr=log.open("ab"),
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, process)
    except BaseException:
        stop_server(process)
        raise
    return url, process


def _rpc(url: str, key: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": "t", "method": method, "params": params}
    response = httpx.post(f"{url}/", json=body, headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def test_two_servers_on_one_database_act_as_one(pg_cluster: PgCluster, tmp_path: Path) -> None:
    db = _postgres_url(pg_cluster.new_database())
    folder = tmp_path / ".cairn"
    keys = Workspace(folder, db=db).init().keys
    first = second = None
    try:
        one, first = _serve(folder, db, tmp_path / "one.log")
        two, second = _serve(folder, db, tmp_path / "two.log")
        agent = {"Authorization": f"Bearer {keys['agent']}"}
        curator = {"Authorization": f"Bearer {keys['curator']}"}

        # An agent asks server one to remember a belief: the policy queues it for review.
        message = {
            "kind": "message",
            "messageId": "m-two-servers",
            "role": "user",
            "parts": [{"kind": "data", "data": {
                "skill": "remember", "kind": "belief", "scope": "acme/app",
                "title": "Two servers share one truth",
                "content": "What one server is told, the other knows.",
            }}],
        }  # fmt: skip
        task = _rpc(one, keys["agent"], "message/send", {"message": message})["result"]
        proposal_id = task["artifacts"][0]["parts"][0]["data"]["proposal_id"]

        # Server two knows the task and the proposal...
        got = _rpc(two, keys["agent"], "tasks/get", {"id": task["id"]})["result"]
        assert got["id"] == task["id"] and got["status"]["state"] == task["status"]["state"]
        other = _rpc(two, keys["curator"], "tasks/get", {"id": task["id"]})
        assert other["error"]["code"] == -32001  # someone else's task is not found
        queue = httpx.get(f"{two}/v1/proposals", headers=curator).json()
        assert proposal_id in [p["id"] for p in queue]

        # ...a curator approves it there, and server one serves the record at once.
        decided = httpx.post(
            f"{two}/v1/proposals/{proposal_id}/decision", headers=curator, json={"approve": True}
        )
        assert decided.status_code == 200, decided.text
        record_id = decided.json()["record"]["id"]
        seen = httpx.get(f"{one}/v1/records/{record_id}", headers=agent)
        assert seen.status_code == 200
        assert seen.json()["record"]["content"]["title"] == "Two servers share one truth"
        assert not (folder / "a2a_tasks.db").exists()  # no state kept beside the database
    finally:
        for process in (first, second):
            if process is not None:
                stop_server(process)
