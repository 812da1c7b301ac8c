"""A rollup killed with SIGKILL in the middle (nodes committed, their piece of the outbox
not yet acknowledged) resumes to exactly what an uninterrupted run builds: every node, every
version, the same content. On both stores."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.memory import Memory
from cairn.model import TocNode
from cairn.store.base import Store, TocFilter
from cairn.store.postgres import PostgresStore
from cairn.store.sqlite import SqliteStore
from tests.factories import CURATOR
from tests.timeline.events import AGENT, T0, conversation

ROOT = Path(__file__).resolve().parents[2]
PIECE = 40


def _events() -> list:  # type: ignore[type-arg]
    found = []
    for day in range(30):
        found += conversation(f"d{day}x", T0 + timedelta(days=day, hours=day % 5), 12)
        found += conversation(f"d{day}y", T0 + timedelta(days=day, hours=8), 5)
    return found


def _every_version(store: Store) -> list[dict[str, object]]:
    """Every version of every node, in a fixed order, without when it was built."""
    every_acl = frozenset(row.id for row in store.acls())
    latest = store.toc_nodes(TocFilter(acl_ids=every_acl, scope_ids=None), limit=100_000)
    versions: list[TocNode] = []
    for node in latest:
        for n in range(1, node.version + 1):
            found = store.toc_node(node.node_id, n)
            assert found is not None
            versions.append(found)
    return sorted(
        (v.model_dump(mode="json", exclude={"built_at"}) for v in versions),
        key=lambda v: (str(v["node_id"]), int(str(v["version"]))),
    )


def test_a_killed_rollup_resumes_to_the_uninterrupted_result(store: Store, tmp_path: Path) -> None:
    policy = parse_policy(DEFAULT_POLICY_YAML)
    events = _events()
    memory = Memory(store, policy, root=tmp_path, embedder=None)
    reference_store = SqliteStore(tmp_path / "reference.db")
    reference = Memory(reference_store, policy, root=tmp_path, embedder=None)
    for target in (memory, reference):
        for start in range(0, len(events), 100):
            target.append_events(events[start : start + 100], principal=AGENT)
    reference.rollup(principal=CURATOR, piece=PIECE)

    backend, where = (
        ("postgres", store.url) if isinstance(store, PostgresStore) else ("sqlite", str(store.path))
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.timeline.rollup_process", backend, where, str(PIECE), "4"],
        cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "PAUSED"
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL
    # the killed run got somewhere and left work undone
    status = memory.timeline_status(principal=CURATOR)
    assert 0 < status.lag < len(events) and status.nodes

    memory.rollup(principal=CURATOR, piece=PIECE)
    assert memory.timeline_status(principal=CURATOR).lag == 0
    assert _every_version(store) == _every_version(reference_store)
    reference.close()
