"""Shared fixtures. ``store`` and ``memory`` run every contract test on each backend."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.memory import Memory
from cairn.model import Content, Principal, PrincipalKind
from cairn.store.base import Store
from cairn.store.sqlite import SqliteStore
from tests.factories import CURATOR
from tests.temporary import memory_root


def _removed_at_exit(folder: str) -> str:
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


# Temporary files in memory when there is room (tests/temporary.py says why). The first
# pytest process (the xdist controller) chooses; its workers inherit TMPDIR.
if (root := memory_root()) is not None:
    os.environ["TMPDIR"] = _removed_at_exit(root)
    tempfile.tempdir = None  # gettempdir() may have answered already: ask again

# The suite never reads the user's own ~/.config/cairn/config.toml (nor do the servers and
# CLIs it starts, which inherit this): tests that want one make their own.
os.environ["XDG_CONFIG_HOME"] = _removed_at_exit(tempfile.mkdtemp(prefix="cairn-test-config-"))
# Nor its state folder (the hooks' spool and log): tests that look at one make their own.
os.environ["XDG_STATE_HOME"] = _removed_at_exit(tempfile.mkdtemp(prefix="cairn-test-state-"))


def pytest_report_header() -> str:
    return f"temporary files: {tempfile.gettempdir()} (set TMPDIR to choose another folder)"


# Backends every contract test runs on. The PostgreSQL fixture registers itself here.
BACKENDS: list[str] = ["sqlite"]
STORE_MAKERS: dict[str, Callable[[pytest.FixtureRequest, Path], Store]] = {
    "sqlite": lambda request, tmp: SqliteStore(tmp / "cairn.db"),
}

# PostgreSQL: a real server (embedded, or CAIRN_TEST_PG), one per session, a database per test.
from tests.pg import make_postgres_store, pg_cluster  # noqa: E402, F401  (pg_cluster: fixture)

BACKENDS.append("postgres")
STORE_MAKERS["postgres"] = make_postgres_store


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    made = STORE_MAKERS[request.param](request, tmp_path)
    yield made
    made.close()


@pytest.fixture
def memory(store: Store, tmp_path: Path) -> Memory:
    return Memory(store, parse_policy(DEFAULT_POLICY_YAML), root=tmp_path)


@pytest.fixture
def curator() -> Principal:
    return CURATOR


@pytest.fixture
def agent() -> Principal:
    return Principal(id="bot", kind=PrincipalKind.AGENT, roles=("agent",), scopes=("acme/*",))


def content(title: str = "Tests run with make test", **fields: object) -> Content:
    base: dict[str, object] = {
        "kind": "fact",
        "scope": "acme/app",
        "title": title,
        "body": f"{title}. Details follow.",
    }
    base.update(fields)
    return Content.model_validate(base)
