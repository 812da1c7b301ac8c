"""A real ``cairn serve`` on a free loopback port, shared by the door tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from cairn.workspace import Workspace

# The static embedder keeps start-up and indexing fast; `cairn serve` defaults to minilm.
SERVE = (
    "import sys; from pathlib import Path; from cairn.workspace import Workspace; "
    "from cairn.doors.server import serve; "
    "serve(Workspace(Path(sys.argv[1])), port=int(sys.argv[2]), log_level='info', "
    "embedder='static', a2a_anonymous=sys.argv[3] if len(sys.argv) > 3 else None)"
)


@dataclass(frozen=True)
class Live:
    url: str
    store: Path
    curator: str
    agent: str
    process: subprocess.Popen[bytes]

    def headers(self, key: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"} if key else {}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_server(
    store: Path, port: int, *, a2a_anonymous: str | None = None
) -> subprocess.Popen[bytes]:
    # The server's structured log goes next to the store, to read when a test fails.
    log = (store.parent / "server.log").open("ab")
    extra = [a2a_anonymous] if a2a_anonymous else []
    return subprocess.Popen(
        [sys.executable, "-c", SERVE, str(store), str(port), *extra],
        stdout=subprocess.DEVNULL,
        stderr=log,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def wait_ready(url: str, process: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """Poll /health until it answers 200; a bounded loop, not a sleep."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited early (see {url} log next to the store)")
        try:
            if httpx.get(f"{url}/health", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)  # pacing the poll, not synchronisation
    raise TimeoutError(f"{url} never became ready")


def wait_embedded(live: Live, timeout: float = 30.0) -> None:
    """Poll the store's own count until every chunk has a vector (a bounded loop, not a
    sleep), so a hybrid read ranks what is stored, not a race with the index worker."""
    deadline = time.monotonic() + timeout
    headers = live.headers(live.curator)
    while httpx.get(f"{live.url}/v1/status", headers=headers).json()["vector_lag"] > 0:
        if time.monotonic() > deadline:
            raise TimeoutError("the index worker never caught up")
        time.sleep(0.05)  # pacing the poll, not synchronisation


def stop_server(process: subprocess.Popen[bytes]) -> int:
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()


@contextmanager
def running(
    tmp_path_factory: pytest.TempPathFactory, name: str, *, a2a_anonymous: str | None = None
) -> Iterator[Live]:
    """A fresh store and a real server on a free loopback port, stopped with SIGTERM."""
    store = tmp_path_factory.mktemp(name) / ".cairn"
    keys = Workspace(store).init().keys
    port = free_port()
    process = start_server(store, port, a2a_anonymous=a2a_anonymous)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, process)
        yield Live(url, store, keys["curator"], keys["agent"], process)
    finally:
        stop_server(process)


@pytest.fixture(scope="session")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    with running(tmp_path_factory, "doors") as server:
        yield server
