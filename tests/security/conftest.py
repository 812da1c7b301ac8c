"""Fixtures for the attack tests: a project folder holding a real store folder made by
``cairn init`` (keys, policy, database), opened on each backend where a store is involved."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from cairn.auth import load_principals
from cairn.doors.server import build_server_app
from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.memory import Memory
from cairn.model import Principal
from cairn.store.base import Store
from cairn.store.sqlite import SqliteStore
from cairn.workspace import Workspace
from tests.conftest import STORE_MAKERS

AGENT_INGESTS_DOCS = DEFAULT_POLICY_YAML.replace(
    "    - path: .\n      roles: [curator, admin]\n",
    "    - path: .\n      roles: [curator, admin]\n    - path: docs\n      roles: [agent]\n",
)
assert AGENT_INGESTS_DOCS != DEFAULT_POLICY_YAML


@dataclass
class Project:
    """A project folder with a store folder (``.cairn``) inside it, made by ``cairn init``."""

    root: Path
    folder: Path
    keys: dict[str, str]
    curator: Principal
    agent: Principal
    memory: Memory
    store: Store  # the memory's own, for checks of what is stored whatever anyone may see


def _principals(folder: Path) -> dict[str, Principal]:
    return {e.id: e.principal() for e in load_principals(folder / "principals.yaml").principals}


@pytest.fixture
def project_factory(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[..., Project]]:
    """Make a project on the backend of ``store``'s parameter, with the given policy."""
    made: list[Memory] = []

    def make(
        policy_yaml: str = DEFAULT_POLICY_YAML, *, backend: str = "sqlite", name: str = ".cairn"
    ) -> Project:
        root = tmp_path / f"project{len(made)}"
        root.mkdir()
        folder = root / name
        keys = Workspace(folder).init().keys
        (folder / "policy.yaml").write_text(policy_yaml, encoding="utf-8")
        store: Store = (
            SqliteStore(folder / "cairn.db")
            if backend == "sqlite"
            else STORE_MAKERS[backend](request, tmp_path)
        )
        memory = Memory(store, parse_policy(policy_yaml), root=root, folder=folder, embedder=None)
        made.append(memory)
        who = _principals(folder)
        return Project(root, folder, keys, who["curator"], who["agent"], memory, store)

    yield make
    for memory in made:
        memory.close()


@dataclass
class Served:
    """``cairn serve``'s app (HTTP API, MCP and A2A) in process, on a store of its own."""

    client: TestClient
    folder: Path
    keys: dict[str, str]

    def as_(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[who]}"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("served") / ".cairn"
    keys = Workspace(folder).init().keys
    app = build_server_app(Workspace(folder), embedder="static")
    with TestClient(app, raise_server_exceptions=False) as client:
        yield Served(client, folder, keys)
