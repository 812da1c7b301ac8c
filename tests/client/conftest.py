"""Fixtures for the Python API: a fresh local store, and a real ``cairn serve`` on a loopback
port with a store of its own, so that ``cairn.open`` and ``cairn.connect`` start alike."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cairn.workspace import Workspace
from tests.doors.conftest import Live, running


@dataclass(frozen=True)
class LocalStore:
    folder: Path
    curator: str
    agent: str


@pytest.fixture(autouse=True)
def _no_ambient_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys and stores are given by each test, never read from the environment it runs in."""
    for name in ("CAIRN_API_KEY", "CAIRN_STORE", "CAIRN_DB"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CAIRN_EMBEDDER", "static")  # the embedder the live server runs


@pytest.fixture
def local_store(tmp_path: Path) -> LocalStore:
    folder = tmp_path / ".cairn"
    keys = Workspace(folder).init().keys
    return LocalStore(folder, keys["curator"], keys["agent"])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    with running(tmp_path_factory, "client") as live:
        yield live
