"""Shared pieces of the decision-graph tests: one asker per role, a memory with a trace
folder on each backend, loading a fixtures folder, and the maps from graph keys to the
ids the store gave them."""

from __future__ import annotations

import json
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from cairn.governance.policy import DEFAULT_POLICY_YAML, Policy, parse_policy
from cairn.graph.fixtures import plan_graph
from cairn.graph.llm import ChatAnswerer
from cairn.graph.settings import GraphSettings
from cairn.memory import Memory
from cairn.model import Edge, EdgeStatus, Principal, PrincipalKind, RecordQuery, Sensitivity
from cairn.store.base import Store
from tests.factories import CURATOR
from tests.graph.mini import mini_graph

ROLES = ("staff", "manager", "director", "exec")


def asker(
    role: str,
    *,
    labels: tuple[str, ...] | None = None,
    sensitivity: Sensitivity | None = None,
    scopes: tuple[str, ...] = ("acme/*",),
    roles: tuple[str, ...] | None = None,
    principal_id: str | None = None,
) -> Principal:
    """A person holding one graph role, with the namespaces and ceiling that role's people
    usually hold (staff and managers no ``confidential``; directors and execs all three)."""
    high = role in ("director", "exec")
    default_labels = ("public", "internal", "confidential") if high else ("public", "internal")
    default_ceiling = {"staff": Sensitivity.LOW, "manager": Sensitivity.MEDIUM}.get(
        role, Sensitivity.HIGH
    )
    return Principal(
        id=principal_id or f"u-{role}",
        kind=PrincipalKind.HUMAN,
        roles=roles or (role,),
        scopes=scopes,
        labels=labels or default_labels,
        sensitivity=sensitivity or default_ceiling,
    )


STAFF = asker("staff")
MANAGER = asker("manager")
DIRECTOR = asker("director")
EXEC = asker("exec")
ASKERS = {"staff": STAFF, "manager": MANAGER, "director": DIRECTOR, "exec": EXEC}


# The store each memory here was built on. The helpers below read the graph whole (every
# record and edge, whatever a principal may see): the store's view, which no Memory verb
# offers, so they keep the store they built rather than reach into the memory for it.
_STORES: weakref.WeakKeyDictionary[Memory, Store] = weakref.WeakKeyDictionary()


def new_memory(
    store: Store, tmp_path: Path, policy: Policy | None = None, graph: GraphSettings | None = None
) -> Memory:
    """A memory with a store folder, so every answer's trace is kept."""
    memory = Memory(
        store,
        policy or parse_policy(DEFAULT_POLICY_YAML),
        root=tmp_path,
        folder=tmp_path / ".cairn",
        embedder=None,
        graph=graph,
    )
    _STORES[memory] = store
    return memory


def store_of(memory: Memory) -> Store:
    """The store ``new_memory`` built ``memory`` on."""
    return _STORES[memory]


@pytest.fixture
def gmemory(store: Store, tmp_path: Path) -> Memory:
    """A memory with traces, on each backend (SQLite and PostgreSQL)."""
    return new_memory(store, tmp_path)


@pytest.fixture
def lite(tmp_path: Path) -> Iterator[Memory]:
    """A memory with traces on SQLite only: for the tests that ask many questions."""
    from cairn.store.sqlite import SqliteStore

    memory = new_memory(SqliteStore(tmp_path / "cairn.db"), tmp_path)
    yield memory
    memory.close()


def ingest(memory: Memory, folder: Path) -> dict[str, str]:
    """Load the fixtures in ``folder`` as a curator; graph key → record id."""
    memory.graph_ingest(plan_graph(folder), principal=CURATOR)
    return record_ids(memory)


def record_ids(memory: Memory) -> dict[str, str]:
    found = store_of(memory).query_records(
        RecordQuery(kinds=("decision", "event"), limit=10_000), scope_globs=()
    )
    return {str(r.content.metadata["graph_id"]): r.id for r in found}


def stored_edges(memory: Memory, *, removed: bool = False) -> dict[str, Edge]:
    """Every live edge of the graph by its graph key (a fixture's id, or ``src~field~dst``);
    with ``removed``, the removed ones instead."""
    edges: dict[str, Edge] = {}
    for record_id in record_ids(memory).values():
        for edge in store_of(memory).list_edges(None, node_id=record_id, limit=10_000):
            key = edge.metadata.get("graph_id")
            if isinstance(key, str) and (edge.status is EdgeStatus.REMOVED) == removed:
                edges[key] = edge
    return edges


@pytest.fixture
def mini(lite: Memory, tmp_path: Path) -> dict[str, str]:
    """The mini graph loaded into ``lite``: graph key → record id."""
    return ingest(lite, mini_graph(tmp_path / "mini"))


def echo_answerer() -> ChatAnswerer:
    """An OpenAI-compatible endpoint (in process, no network) that answers with the whole
    prompt it was sent: whatever reached the prompt shows up in the answer."""

    def handler(request: httpx.Request) -> httpx.Response:
        sent = json.loads(request.content)
        prompt = json.dumps(sent["messages"], ensure_ascii=False)
        return httpx.Response(
            200,
            json={
                "id": "cmpl-echo",
                "model": "echo-1",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": prompt}}],
                "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": 1},
            },
        )

    return ChatAnswerer(
        base_url="http://llm.invalid/v1",
        model="echo-1",
        timeout=5,
        transport=httpx.MockTransport(handler),
    )


@dataclass(frozen=True)
class Asked:
    """One answer and everything the asker can take away from it."""

    body: dict[str, Any]
    trace: dict[str, Any]  # the asker's copy of the trace files

    @property
    def meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = self.body["_meta"]
        return meta

    @property
    def keys(self) -> list[str | None]:
        return [item["key"] for item in self.body["evidence"]]

    @property
    def reasons(self) -> list[str]:
        return sorted(self.meta["policy_trace"]["reasons_by_id"].values())
